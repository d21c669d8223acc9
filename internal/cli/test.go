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

func newAddonTestCommand() *cobra.Command {
	f := &clusterFlags{}
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "test NAME",
		Short: "Run the chart's test hooks once, as helm test does, and print how they went",
		Long: `test asks the controller to run the chart's test hooks (helm.sh/hook:
test) once, as 'helm test' runs them: one at a time, in their order, with
their delete policies, once every object the add-on runs is Current. It
writes the capstan.dev/test annotation and waits until status.lastTest
answers it; it fails when a test failed.

The tests run once the add-on is in sync and healthy: a suspended add-on,
or one whose plan waits for approval or a sync window, runs them once
that is over. Without spec.test.enable, a test that fails here changes no
phase, as helm test leaves a release deployed. To run the tests after
every install and upgrade, set spec.test.enable: then a test that fails,
here too, makes the add-on Failed (TestFailed) until another render or
another run passes, unless spec.test.ignoreFailures is set.
spec.test.filters chooses the tests that run, by name, as helm test's
--filter does.`,
		Example: `  capstan addon test ingress -n platform
  capstan addon test ingress --wait=false`,
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
			req, err := addons.RequestTest(cmd.Context(), c, key, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Requested test %s of %s.\n", req, key)
			return waitTested(cmd, c, key, req, w)
		},
	}
	f.add(cmd)
	w.add(cmd, "the tests ran, failing when one failed")
	return cmd
}

// waitTested waits until the controller ran the tests that req asked for,
// and says how they went: an error for a test that failed, and for an
// add-on that cannot run them now.
func waitTested(cmd *cobra.Command, c client.Client, key client.ObjectKey, req string, w waitFlags) error {
	if !w.wait {
		return nil
	}
	return poll(cmd, w.timeout, func(ctx context.Context) (bool, string, error) {
		a, err := readAddon(ctx, c, key)
		if err != nil {
			return false, "", err
		}
		t := a.Status.LastTest
		if t == nil || t.Request != req {
			if err := requestStands(a, key, capstanv1.TestAnnotation, req, "the test", "run"); err != nil {
				return false, "", err
			}
			switch {
			case a.Status.Phase == capstanv1.PhaseBlocked, a.Status.Phase == capstanv1.PhaseFailed && readyReason(a) != "TestFailed",
				a.Status.Phase == capstanv1.PhaseSuspended, a.Status.Phase == capstanv1.PhaseOutOfSync && heldByGate(a):
				// NOTE: the tests run once the add-on is in sync and
				// healthy; a gate that holds its plan holds them too.
				return false, "", fmt.Errorf("addon %s is %s, and the tests run once it is in sync and what it runs is healthy; the request stays, and is taken up then: %s",
					key, a.Status.Phase, readyMessage(a))
			}
			return false, "waiting for the tests, which run once every object is Current: " + progressLine(a), nil
		}
		line := fmt.Sprintf("%s: %s", t.Result, t.Message)
		if t.Result == capstanv1.TestFailed {
			return false, "", fmt.Errorf("addon %s failed its tests: %s", key, t.Message)
		}
		return true, line, nil
	})
}

// heldByGate reports whether an OutOfSync add-on waits for a person or a
// sync window, which hold its tests too; it is not one whose drift or
// held prune is about to be handled.
func heldByGate(a *capstanv1.Addon) bool {
	switch readyReason(a) {
	case plan.ReasonAwaitApproval, plan.ReasonPruneApproval, plan.ReasonApprovalStale, plan.ReasonApprovalNoPlan, plan.ReasonSyncWindow:
		return true
	}
	return false
}
