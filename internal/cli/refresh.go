package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/plan"
)

func newAddonRefreshCommand() *cobra.Command {
	f := &clusterFlags{}
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "refresh NAME",
		Short: "Reconcile the Addon now and read its source again past every cache (a new chart version, a tag pushed again)",
		Long: `refresh asks the controller to reconcile the Addon at once and to fetch
its source afresh: the chart repository's index (so a version range takes
the newest version published), a chart pushed again under the same OCI tag
or URL, the git branch. It writes the capstan.dev/refresh annotation and
waits until a reconcile has handled it, then for the outcome.

A refresh passes the same gates as any sync: a manual-sync add-on shows its
new plan and waits for 'capstan addon sync', and a suspended one only plans.`,
		Example: `  capstan addon refresh ingress -n platform
  capstan addon refresh ingress --wait=false`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: f.namespace, Name: args[0]}
			req, err := addons.Refresh(cmd.Context(), c, key, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Requested refresh %s of %s.\n", req, key)
			return waitRefreshed(cmd, c, key, req, w)
		},
	}
	f.add(cmd)
	w.add(cmd, "the refresh is handled and its outcome known: Synced, or a plan that waits for a person")
	return cmd
}

// waitRefreshed waits until a reconcile handled the refresh request req,
// then for its outcome: Synced, a plan that waits for a person (approval,
// or spec.suspend), or an error for Blocked and Failed.
func waitRefreshed(cmd *cobra.Command, c client.Client, key client.ObjectKey, req string, w waitFlags) error {
	if !w.wait {
		return nil
	}
	return poll(cmd, w.timeout, func(ctx context.Context) (bool, string, error) {
		a, err := readAddon(ctx, c, key)
		if err != nil {
			return false, "", err
		}
		return refreshOutcome(a, key, req)
	})
}

// refreshOutcome says whether the refresh request req of the Addon is
// handled, with the line to print, or, as an error, why it will not be.
func refreshOutcome(a *capstanv1.Addon, key client.ObjectKey, req string) (bool, string, error) {
	if a.Status.LastHandledRefresh != req {
		if err := requestStands(a, key, capstanv1.RefreshAnnotation, req, "the refresh", "handled"); err != nil {
			return false, "", err
		}
		return false, "waiting for the controller to take up the refresh", nil
	}
	line := fmt.Sprintf("%s %s: %s", a.Status.Source, a.Status.Version, progressLine(a))
	switch a.Status.Phase {
	case capstanv1.PhaseSynced:
		return true, line, nil
	case capstanv1.PhaseBlocked, capstanv1.PhaseFailed, capstanv1.PhaseDegraded:
		return false, line, fmt.Errorf("addon %s is %s: %s", key, a.Status.Phase, readyMessage(a))
	case capstanv1.PhaseSuspended:
		return true, line + "; suspended: the plan is not applied (capstan addon install)", nil
	case capstanv1.PhasePaused:
		return true, line + "; paused: nothing is fetched until the capstan.dev/paused annotation goes", nil
	case capstanv1.PhaseOutOfSync:
		if readyReason(a) == plan.ReasonSyncWindow {
			return true, line + "; held by its sync windows: " + readyMessage(a), nil
		}
		if a.Spec.SyncRequest <= a.Status.LastSyncRequest {
			return true, line + "; the plan waits for approval: " + readyMessage(a), nil
		}
		if heldByGate(a) {
			// NOTE: a pending approval that the refreshed plan made
			// stale, or a prune to confirm: the controller does not
			// take the request up until a person approves again.
			return true, line + "; the plan waits for a person (" + readyReason(a) + "): " + readyMessage(a), nil
		}
	}
	return false, line, nil
}

// requestStands says why a request that an annotation holds (what, as
// "the refresh") will not be taken up as req: the Addon is going or
// paused, or the request was removed or replaced before it was (done).
func requestStands(a *capstanv1.Addon, key client.ObjectKey, annotation, req, what, done string) error {
	switch now := a.Annotations[annotation]; {
	case !a.DeletionTimestamp.IsZero():
		return fmt.Errorf("addon %s is being removed: %s will not be %s", key, what, done)
	case a.Annotations[capstanv1.PausedAnnotation] == "true":
		return fmt.Errorf("addon %s was paused before %s was %s; it will be once the capstan.dev/paused annotation goes", key, what, done)
	case now == "":
		return fmt.Errorf("addon %s: %s request was removed before it was %s", key, what, done)
	case now != req:
		return fmt.Errorf("addon %s: %s request was replaced by %q before it was %s; its outcome is that request's", key, what, now, done)
	}
	return nil
}
