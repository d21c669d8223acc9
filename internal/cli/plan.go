package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
)

func newPlanCommand() *cobra.Command {
	f := &clusterFlags{}
	var config controller.Config
	var caFile, output string
	var allowFileGit bool
	var guard netguard.Config
	var remoteAllow []string
	var renderTimeout time.Duration
	var renderMemory string
	cmd := &cobra.Command{
		Use:   "plan NAME",
		Short: "Compute an Addon's whole plan against the cluster now, every diff uncut up to 128 KiB, changing nothing",
		Long: `plan runs the controller's pipeline up to the preview for one Addon: it
fetches and renders the source, resolves the values, checks the guardrails,
dry-runs every object on the API server and diffs it with what runs. Nothing
is applied and no status is written. Cluster-profile add-ons are previewed by
impersonating the add-ons service account, so your account needs the right
to impersonate it (or use restricted add-ons, previewed as you).

Each object's diff is shown whole up to 128 KiB, the most status keeps of
all diffs together; a larger one (a ConfigMap of megabytes) is cut at a
line's end and says how many lines and bytes are left out.

The plan is the controller's, with the hash of the plan in status, only when
--controller-namespace, --trusted-namespaces, --addons-service-account,
--platform-configmap and --platform-key are what the controller runs with:
they decide the add-on's profile and the platform's facts its chart reads.
Your account reads the platform ConfigMap itself. Flags that place the
add-on in another profile than status.profile says the controller placed
it in are refused, naming the flags to give.

plan exits 0 when the plan would pass the gates that refuse a plan for
good, 2 when the controller would make the add-on Blocked (guardrail
violations, values errors, objects of another add-on or to adopt) or
Failed (a dry run refused), saying why on stderr after the plan, and 1
when no plan could be computed.

An Addon with spec.kubeConfig is planned against the cluster its
kubeconfig names, through the egress guard the controller has: this
cluster's own API server, loopback, link-local and metadata addresses are
refused (and private ones with --fetch-deny-private) unless
--remote-cluster-allow names them, which never opens this cluster's API
server.

The chart's templates run in a worker process bounded by --render-timeout
and --render-memory-limit, as in the controller: a chart that loops for
ever or takes all memory fails the plan instead of your machine.`,
		Example: `  capstan plan blog -n tenant
  capstan addon plan blog -n tenant -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			// NOTE: the sandbox reads 0 as its default bounds; a 0 meant
			// as "no bound" is refused, as the controller refuses it.
			if err := checkRenderBounds(controller.DefaultMaxObjects, renderTimeout, renderMemory, 1); err != nil {
				return err
			}
			// NOTE: read as the controller reads them, so that the
			// controller's flags give its plan.
			if err := checkPlanConfig(&config, "--controller-namespace"); err != nil {
				return err
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: Scheme()})
			if err != nil {
				return err
			}
			// NOTE: the Addon is read first, so that a cluster out of
			// reach, a bad kubeconfig or a missing Addon is said as it is,
			// not as a read of the guard's endpoints.
			key := client.ObjectKey{Namespace: f.namespace, Name: args[0]}
			current, err := addons.Get(cmd.Context(), c, key)
			if err != nil {
				return err
			}
			// NOTE: the guards the controller has, on this cluster's API
			// server and its endpoints too: an Addon's source or
			// kubeconfig that names them is refused here as there.
			fetchGuard, remote, err := planGuards(cmd.Context(), cfg, c, guard, remoteAllow)
			if err != nil {
				return err
			}
			config.RemoteGuard = remote
			fopts := addons.FetcherOptions{Guard: fetchGuard, AllowFileGit: allowFileGit}
			if caFile != "" {
				if fopts.CABundle, err = os.ReadFile(caFile); err != nil {
					return err
				}
			}
			fetcher, err := addons.NewFetcher(cfg, fopts)
			if err != nil {
				return err
			}
			// NOTE: the chart is whoever wrote the Addon's, a tenant's
			// perhaps, and its templates can loop for ever or take any
			// memory: they run bounded, as in the controller, never in
			// the process of the person who plans.
			if config.Sandbox, err = renderSandbox(renderTimeout, renderMemory, 1); err != nil {
				return err
			}
			defer config.Sandbox.Close()
			if err := sameProfile(current, config.WithDefaults()); err != nil {
				return err
			}
			planner := addons.Planner{Client: c, RestConfig: cfg, Fetcher: fetcher, Config: config}
			a, p, err := planner.Plan(cmd.Context(), key)
			if err != nil {
				return err
			}
			if output != "" {
				err = printObject(cmd.OutOrStdout(), output, p)
			} else {
				printAddon(cmd.OutOrStdout(), a, p, true, true)
			}
			if err != nil {
				return err
			}
			if v := planVerdict(a, p); v.Phase == capstanv1.PhaseBlocked || v.Phase == capstanv1.PhaseFailed {
				fmt.Fprintf(cmd.ErrOrStderr(), "The controller would not apply this plan: the add-on would be %s (%s): %s\n", v.Phase, v.Reason, v.Message)
				return exitError{code: exitPlanRefused}
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&config.Namespace, "controller-namespace", "capstan-system", "The controller's namespace (its --namespace): its Addons use the cluster profile, and the platform ConfigMap and the add-ons service account are there.")
	addPlanConfigFlags(cmd.Flags(), &config)
	cmd.Flags().StringVar(&caFile, "ca-file", "", "PEM certificates to trust for chart repositories, registries and git.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json: print the plan")
	// NOTE: off by default: whoever wrote the Addon chose its URL, and a
	// file:// one would read the disk of the person who plans it.
	cmd.Flags().BoolVar(&allowFileGit, "allow-file-git", false, "Read file:// git repositories from this machine's disk, such as capstan dev's samples.")
	guard.AddFlags(cmd.Flags())
	addRemoteClusterAllowFlag(cmd.Flags(), &remoteAllow)
	cmd.Flags().DurationVar(&renderTimeout, "render-timeout", render.DefaultRenderTimeout, "The longest the chart's templates may run, in a worker process; past it the plan fails, as the controller's render would.")
	cmd.Flags().StringVar(&renderMemory, "render-memory-limit", "512Mi", "The most memory the render worker may use, as a Kubernetes quantity; past it the plan fails.")
	return cmd
}

// sameProfile refuses to plan Addon a with flags that place it in another
// profile than the controller did, as status.profile records: such a plan
// is not the controller's, and for an add-on installed under the cluster
// profile it would even say that the sync is held (ProfileChanged) and
// that the Addon should be deleted, while its controller syncs it. The
// controller's placement is known when the inventory is empty (status
// then follows the placement) and, for a cluster-profile install, unless
// the controller itself reports the hold. A restricted install that the
// controller trusts now keeps status.profile until its next apply, so
// flags that say cluster are not refused there.
func sameProfile(a *capstanv1.Addon, config controller.Config) error {
	recorded, flags := a.Status.Profile, config.Profile(a)
	switch {
	case recorded == "" || recorded == flags:
		return nil
	case len(a.Status.Inventory) > 0 && (recorded == capstanv1.ProfileRestricted || readyReason(a) == controller.ReasonProfileChanged):
		return nil
	}
	return fmt.Errorf("addon %s/%s: the controller placed it in the %s profile (status.profile), and these flags place it in the %s profile "+
		"(--controller-namespace %s, --trusted-namespaces %s), so the plan would not be the controller's: give the --controller-namespace and "+
		"--trusted-namespaces the controller that selects this Addon runs with (if they changed just now, wait for it to reconcile the Addon)",
		a.Namespace, a.Name, recorded, flags, config.Namespace, strings.Join(config.TrustedNamespaces, ","))
}

// exitPlanRefused is capstan plan's exit code for a plan that the
// controller would not apply until its Addon or chart changes: a script
// that plans before it approves stops there.
const exitPlanRefused = 2

// planVerdict is what the controller's gates would decide on the plan p
// of Addon a, as far as the CLI can tell: the gates that refuse a plan
// (problems, another add-on's objects, adoption) decide on the plan and
// the spec alone. Sync windows, the mass-prune threshold and objects to
// confirm, which only hold a plan for a person, are left out.
func planVerdict(a *capstanv1.Addon, p *capstanv1.Plan) plan.Verdict {
	return plan.Decide(plan.StateOf(a, p))
}
