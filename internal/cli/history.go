package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func newAddonHistoryCommand() *cobra.Command {
	f := &clusterFlags{}
	var output string
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List the renders an Addon applied, newest first: install, upgrades, changes of values",
		Long: `history lists the revisions in the Addon's status.history, newest first
(at most 10): when each render was applied, its chart version or git
commit, the plan that was applied and what it changed. Undoing drift
applies the same render and adds no revision.

To go back, set the version or values of an earlier revision again
(capstan addon edit NAME --version V), or revert the commit in git.`,
		Example: `  capstan addon history ingress -n platform
  capstan addon history ingress -o json | jq '.[1].version'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			a, err := f.addon(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output != "" {
				h := a.Status.History
				if h == nil {
					h = []capstanv1.Revision{}
				}
				return printObject(cmd.OutOrStdout(), output, h)
			}
			return printHistory(cmd.OutOrStdout(), a)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json: print the revisions")
	return cmd
}

// printHistory prints an Addon's revisions as a table, newest first.
func printHistory(w io.Writer, a *capstanv1.Addon) error {
	if len(a.Status.History) == 0 {
		if a.Status.AppliedHash != "" {
			_, err := fmt.Fprintf(w, "Addon %s/%s has no recorded revision: it was last applied by a Capstan that kept no history.\n", a.Namespace, a.Name)
			return err
		}
		_, err := fmt.Fprintf(w, "Addon %s/%s has applied nothing yet.\n", a.Namespace, a.Name)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tAPPLIED\tVERSION\tSOURCE\tPLAN\tCHANGES")
	for _, r := range a.Status.History {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Number, r.AppliedAt.UTC().Format(time.RFC3339), r.Version, r.Source, shortHash(r.PlanHash), changes(r.Changes))
	}
	return tw.Flush()
}

// shortHash is a plan hash cut to what a person compares by eye.
func shortHash(h string) string {
	if len(h) > len("sha256:")+12 {
		return h[:len("sha256:")+12]
	}
	return h
}

func changes(s capstanv1.PlanSummary) string {
	out := fmt.Sprintf("%d created, %d updated, %d deleted", s.Create, s.Update, s.Delete)
	if s.Hooks > 0 {
		out += fmt.Sprintf(", %d hooks", s.Hooks)
	}
	return out
}
