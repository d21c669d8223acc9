package cli

import (
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/netguard"
)

func newPlanCommand() *cobra.Command {
	f := &clusterFlags{}
	var config controller.Config
	var caFile, output string
	var allowFileGit bool
	var guard netguard.Config
	cmd := &cobra.Command{
		Use:   "plan NAME",
		Short: "Compute an Addon's whole plan against the cluster now, every diff uncut, changing nothing",
		Long: `plan runs the controller's pipeline up to the preview for one Addon: it
fetches and renders the source, resolves the values, checks the guardrails,
dry-runs every object on the API server and diffs it with what runs. Nothing
is applied and no status is written. Cluster-profile add-ons are previewed by
impersonating the add-ons service account, so your account needs the right
to impersonate it (or use restricted add-ons, previewed as you).

The plan is the controller's, with the hash of the plan in status, only when
--controller-namespace, --trusted-namespaces, --addons-service-account,
--platform-configmap and --platform-key are what the controller runs with:
they decide the add-on's profile and the platform's facts its chart reads.
Your account reads the platform ConfigMap itself.`,
		Example: `  capstan plan blog -n tenant
  capstan addon plan blog -n tenant -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
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
			fopts := addons.FetcherOptions{Guard: guard, AllowFileGit: allowFileGit}
			if caFile != "" {
				if fopts.CABundle, err = os.ReadFile(caFile); err != nil {
					return err
				}
			}
			fetcher, err := addons.NewFetcher(cfg, fopts)
			if err != nil {
				return err
			}
			planner := addons.Planner{Client: c, RestConfig: cfg, Fetcher: fetcher, Config: config}
			a, p, err := planner.Plan(cmd.Context(), client.ObjectKey{Namespace: f.namespace, Name: args[0]})
			if err != nil {
				return err
			}
			if output != "" {
				return printObject(cmd.OutOrStdout(), output, p)
			}
			printAddon(cmd.OutOrStdout(), a, p, true)
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
	return cmd
}
