package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/plan"
)

// clusterFlags are the flags of commands that talk to a cluster.
type clusterFlags struct {
	kubeconfig  string
	kubeContext string
	namespace   string
	// allNamespaces says the command reads every namespace (-A), and
	// needs none.
	allNamespaces bool
	// cmd is the command of the flags, whose stderr shows the API
	// server's warnings.
	cmd *cobra.Command
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "A kubeconfig file; default: $KUBECONFIG, else ~/.kube/config, else in-cluster, as kubectl.")
	cmd.Flags().StringVar(&f.kubeContext, "context", "", "The kubeconfig context to use; default: its current context.")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "The Addon's namespace; default: the kubeconfig context's, as kubectl's.")
}

// config is the connection of the flags, once --namespace is known to be
// a namespace's name. Without --namespace, the namespace is the one the
// kubeconfig's context names, as for kubectl; both come from the one
// kubeconfig that kubeConfig finds.
//
// NOTE: never a fixed default: with one, `capstan addon remove web
// --uninstall` typed in a context set to a tenant's namespace would remove
// the controller namespace's web, and its software.
func (f *clusterFlags) config() (*rest.Config, error) {
	kc := kubeConfig(f.kubeconfig, f.kubeContext)
	switch {
	case f.allNamespaces:
	case f.namespace == "":
		ns, err := contextNamespace(kc, f.kubeconfig)
		if err != nil {
			return nil, err
		}
		if len(validation.IsDNS1123Label(ns)) > 0 {
			name := f.kubeContext
			if raw, err := kc.RawConfig(); err == nil && name == "" {
				name = raw.CurrentContext
			}
			return nil, fmt.Errorf("the namespace %q of kubeconfig context %q is not a namespace name: fix the context's namespace, or give --namespace", ns, name)
		}
		f.namespace = ns
	// NOTE: the API server answers a read in a namespace that cannot
	// exist with "not found", which sends a person looking for the Addon.
	case len(validation.IsDNS1123Label(f.namespace)) > 0:
		return nil, fmt.Errorf("--namespace %q is not a namespace name: use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", f.namespace)
	}
	cfg, err := restConfig(kc, f.kubeconfig)
	if err != nil {
		return nil, err
	}
	// NOTE: as kubectl prints them, once each, on stderr: a deprecated
	// API, a duplicate port or a PodSecurity level a chart's object would
	// violate, which a dry run of the plan hears too (the plan's clients
	// copy this config).
	stderr := io.Writer(terminalText(os.Stderr))
	if f.cmd != nil {
		stderr = f.cmd.ErrOrStderr()
	}
	cfg.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
	return cfg, nil
}

// suffix is the --kubeconfig and --context this command was given, each
// shell-quoted when it must be, to end every command it prints for a
// person to run next. Without them, a pasted command would act in the
// kubeconfig's current context, which may be another cluster by then,
// where an add-on of the same name may even have a plan of the same hash.
func (f *clusterFlags) suffix() string {
	var b strings.Builder
	if f.kubeconfig != "" {
		b.WriteString(" --kubeconfig " + shellQuote(f.kubeconfig))
	}
	if f.kubeContext != "" {
		b.WriteString(" --context " + shellQuote(f.kubeContext))
	}
	return b.String()
}

// shellQuote is s as one word of a POSIX shell: as it is when it holds
// only characters no shell treats specially, single-quoted otherwise.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (f *clusterFlags) client() (client.Client, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: Scheme()})
}

// addon reads the Addon name of the flags' namespace.
func (f *clusterFlags) addon(ctx context.Context, name string) (*capstanv1.Addon, error) {
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	a := &capstanv1.Addon{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: name}, a); err != nil {
		return nil, err
	}
	return a, nil
}

func newAddonCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "addon",
		Short: "List, add, plan, install, edit, sync, refresh, suspend, resume and remove Addons; git-managed ones by committing (--gitops)",
	}
	cmd.AddCommand(newAddonListCommand(), newAddonGetCommand(), newAddonAddCommand(), newPlanCommand(), newAddonSyncCommand(), newAddonRefreshCommand(), newAddonTestCommand(), newAddonHistoryCommand())
	cmd.AddCommand(newAddonGitopsCommands()...)
	return cmd
}

func newAddonListCommand() *cobra.Command {
	f := &clusterFlags{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List Addons with their phase, source, version and readiness",
		Example: `  capstan addon list -n tenant
  capstan addon list -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var list capstanv1.AddonList
			opts := []client.ListOption{}
			if !f.allNamespaces {
				opts = append(opts, client.InNamespace(f.namespace))
			}
			if err := c.List(cmd.Context(), &list, opts...); err != nil {
				return err
			}
			where := ""
			if !f.allNamespaces {
				where = " in namespace " + f.namespace
			}
			return printAddonList(cmd.OutOrStdout(), list.Items, where)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "List the Addons of every namespace.")
	return cmd
}

// printAddonList prints items as a table, or says that there are none
// where they were looked for ("" for everywhere): a bare header would leave
// a person to wonder whether the namespace was the one meant.
func printAddonList(w io.Writer, items []capstanv1.Addon, where string) error {
	if len(items) == 0 {
		_, err := fmt.Fprintf(w, "No Addons found%s.\n", where)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tPHASE\tSOURCE\tVERSION\tREADY\tHEALTHY\tMESSAGE")
	for _, a := range items {
		ready, healthy, msg := "Unknown", "Unknown", ""
		if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); c != nil {
			ready, msg = string(c.Status), c.Message
		}
		if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionHealthy); c != nil {
			healthy = string(c.Status)
		}
		msg = oneLine(msg, 80)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Namespace, a.Name, a.Status.Phase, a.Status.Source, a.Status.Version, ready, healthy, msg)
	}
	return tw.Flush()
}

// oneLine is msg on one line of a table, its line breaks made spaces, cut
// to at most width characters, never within one.
func oneLine(msg string, width int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if r := []rune(msg); len(r) > width {
		msg = string(r[:width-3]) + "..."
	}
	return msg
}

func newAddonGetCommand() *cobra.Command {
	f := &clusterFlags{}
	var gf gitopsOptions
	var diffs bool
	var output string
	cmd := &cobra.Command{
		Use:   "get NAME | get NAME --gitops URL",
		Short: "Show an Addon's status and plan: objects and actions, hooks, violations, values errors; with --gitops, its definition in git",
		Long: `Show an Addon's status and plan: objects and actions, hooks, violations
and values errors.

With --gitops, print the add-on's definition file as the head of the
branch holds it (--branch, --folder), and on standard error its git blob
hash: give it as --base to "capstan addon edit --gitops", which then
refuses to replace a file that someone changed since.`,
		Example: `  capstan addon get blog -n tenant --diff
  capstan addon get blog -n tenant -o json | jq .status.plan.hash
  capstan addon get longhorn --gitops https://git.example/ops.git > longhorn.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := gf.refuseEmptyURL(cmd); err != nil {
				return err
			}
			if gf.url != "" {
				if err := refuseFlags(cmd, "--%[1]s does not go with --gitops: it reads the Addon in the cluster, and --gitops prints the add-on's definition in git instead; leave --%[1]s out", "diff", "output", "namespace", "kubeconfig", "context"); err != nil {
					return err
				}
				return printDefinition(cmd, &gf, args[0])
			}
			if err := refuseFlags(cmd, "--%[1]s says where in git to read the definition, and only --gitops reads git: give --gitops URL, or leave --%[1]s out", "branch", "folder"); err != nil {
				return err
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			a, err := f.addon(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output != "" {
				return printObject(cmd.OutOrStdout(), output, reapplicable(a))
			}
			printAddon(cmd.OutOrStdout(), a, a.Status.Plan, diffs, false)
			if next := nextCommand(a, f.suffix()); next != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "To apply exactly this plan: %s\n", next)
			}
			return nil
		},
	}
	f.add(cmd)
	gf.registerRead(cmd)
	cmd.Flags().BoolVar(&diffs, "diff", false, "Print every object's diff.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json: print the whole Addon")
	return cmd
}

// printAddon prints an Addon and a plan for a person: the plan in its
// status, or a whole plan computed on demand (whole).
func printAddon(w io.Writer, a *capstanv1.Addon, p *capstanv1.Plan, diffs, whole bool) {
	fmt.Fprintf(w, "Addon %s/%s: %s (%s profile)\n", a.Namespace, a.Name, a.Status.Phase, a.Status.Profile)
	for _, c := range a.Status.Conditions {
		fmt.Fprintf(w, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if h := a.Status.Hook; h != nil {
		fmt.Fprintf(w, "  running hook %s %s/%s since %s\n", h.Event, h.Kind, h.Name, h.Since.Format("15:04:05"))
	}
	if wv := a.Status.Wave; wv != nil && wv.Deleting {
		fmt.Fprintf(w, "  wave %d waits since %s to be deleted, until the waves after it are gone: %s\n", wv.Wave, wv.Since.Format("15:04:05"), wv.Waiting)
	} else if wv != nil {
		fmt.Fprintf(w, "  wave %d waits since %s for the waves before it: %s\n", wv.Wave, wv.Since.Format("15:04:05"), wv.Waiting)
	}
	if h := a.Status.PendingHook; h != nil && h.Failed != nil {
		fmt.Fprintf(w, "  the %s hooks stopped at %s/%s after the apply; the next sync of this render runs them again from it\n", h.Event, h.Failed.Kind, h.Failed.Name)
	} else if h != nil && a.Status.Hook == nil {
		fmt.Fprintf(w, "  the %s hooks have not all succeeded since the apply; the next sync of this render runs those that did not\n", h.Event)
	}
	if t := a.Status.LastTest; t != nil {
		fmt.Fprintf(w, "Last test: %s at %s: %s\n", t.Result, t.FinishedAt.UTC().Format(time.RFC3339), t.Message)
	}
	if a.Status.AppliedHash == "" {
		fmt.Fprintf(w, "Inventory: %d objects; nothing applied yet\n", len(a.Status.Inventory))
	} else {
		fmt.Fprintf(w, "Inventory: %d objects; applied %s\n", len(a.Status.Inventory), a.Status.AppliedHash)
	}
	switch {
	case p == nil && a.Status.AppliedHash == "":
		fmt.Fprintln(w, "No plan yet: the controller has not planned this add-on; its conditions say why.")
		return
	case p == nil:
		fmt.Fprintln(w, "No pending plan: the last sync applied everything.")
		return
	}
	src := p.Source
	fmt.Fprintf(w, "Plan %s (generation %d): %s\n", p.Hash, p.Generation, plan.String(p))
	fmt.Fprintf(w, "  source: %s %s %s %s %s\n", src.URL, src.Chart, src.Version, src.Digest, strings.TrimSpace(src.Commit+" "+src.Path))
	for _, wl := range p.Workloads {
		fmt.Fprintf(w, "  workload %s/%s images=%s\n", wl.Kind, wl.Name, strings.Join(wl.Images, ","))
	}
	for _, o := range p.Objects {
		if o.Action == capstanv1.ActionUnchanged && !diffs {
			continue
		}
		line := fmt.Sprintf("  %-9s %s %s", o.Action, o.APIVersion+"/"+o.Kind, strings.TrimPrefix(o.Namespace+"/"+o.Name, "/"))
		if o.Adopted {
			line += " (adopted)"
		}
		if o.Recreate {
			line += " (deleted and created anew)"
		}
		if o.Wave != 0 {
			line += fmt.Sprintf(" (wave %d)", o.Wave)
		}
		if o.ManagedBy != "" {
			line += " (belongs to Addon " + o.ManagedBy + ")"
		}
		if o.Error != "" {
			line += ": " + o.Error
		}
		fmt.Fprintln(w, line)
		if diffs && o.Diff != "" {
			fmt.Fprintln(w, indent(o.Diff, "      "))
		}
	}
	for _, h := range p.Hooks {
		fmt.Fprintf(w, "  hook %s %s/%s weight %d\n", strings.Join(h.Events, ","), h.Kind, h.Name, h.Weight)
	}
	for _, v := range p.Violations {
		fmt.Fprintf(w, "  VIOLATION %s %s/%s %s: %s\n", v.Rule, v.Object.Kind, v.Object.Name, v.Path, v.Message)
	}
	for _, e := range p.ValuesErrors {
		fmt.Fprintf(w, "  VALUES %s %s: %s\n", e.Path, e.Rule, e.Message)
	}
	for _, n := range p.Notices {
		fmt.Fprintf(w, "  note %s: %s\n", n.Path, n.Message)
	}
	switch {
	case p.DiffsTruncated && whole:
		fmt.Fprintf(w, "Some diffs were cut at %d KiB each, the most of one object's diff a whole plan shows: each says how much of it is left out.\n", plan.MaxFullDiffBytes>>10)
	case p.DiffsTruncated:
		fmt.Fprintf(w, "Some diffs were cut to keep the Addon small: `capstan plan NAME` computes the whole plan, with each diff up to %d KiB.\n", plan.MaxFullDiffBytes>>10)
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// nextCommand is the command that applies exactly the plan in an Addon's
// status, with its hash, when a person's approval is what it waits for: a
// suspended add-on's install, or a sync of one that is OutOfSync (a manual
// sync, a prune to confirm, a window). It is empty when there is no plan
// for the current generation, when the plan is blocked, and for a
// suspended add-on that git manages, which a commit resumes. flags end the
// command (clusterFlags.suffix).
func nextCommand(a *capstanv1.Addon, flags string) string {
	p, err := addons.Reviewable(a, "")
	if err != nil {
		return ""
	}
	switch {
	case a.Spec.Suspend && a.Labels[gitops.ManagedByGitLabel] == "":
		return fmt.Sprintf("capstan addon install %s -n %s --plan %s%s", a.Name, a.Namespace, p.Hash, flags)
	case !a.Spec.Suspend && a.Status.Phase == capstanv1.PhaseOutOfSync:
		return fmt.Sprintf("capstan addon sync %s -n %s --plan %s%s", a.Name, a.Namespace, p.Hash, flags)
	}
	return ""
}

// requireReview refuses to approve an Addon's plan for verb (install or
// sync) unless the person names the plan they reviewed with --plan, or
// says with --yes that whichever plan is in status will do. A plan that no
// approval could apply (addons.Blocked), and an add-on whose sync is held
// since its profile changed (addons.RefuseHeld), are refused saying why.
// flags end the commands it names (clusterFlags.suffix).
//
// NOTE: "the plan in status now" is not the plan that was reviewed: a plan
// changes without the generation changing (a valuesFrom Secret edited, a
// version range that resolves to a newer chart), so it could apply a plan
// nobody saw. The page and the API take the hash only; the CLI asks for it
// as Terraform's apply asks unless -auto-approve.
func requireReview(a *capstanv1.Addon, verb, hash string, yes bool, flags string) error {
	if hash != "" || yes {
		return nil
	}
	key := a.Namespace + "/" + a.Name
	// NOTE: before --plan is suggested, as for a blocked plan below.
	if err := addons.RefuseHeld(a, client.ObjectKeyFromObject(a)); err != nil {
		return err
	}
	review := fmt.Sprintf("capstan addon get %s -n %s --diff%s", a.Name, a.Namespace, flags)
	if p := a.Status.Plan; p != nil && p.Generation == a.Generation {
		// NOTE: before --plan is suggested: a blocked plan named by its
		// hash is refused too, so the command would not do what it says.
		if err := addons.Blocked(p); err != nil {
			return fmt.Errorf("addon %s: %w", key, err)
		}
		return fmt.Errorf("addon %s: %s applies the plan you reviewed, named by its hash: the plan now is %s (%s); review it with `%s`, "+
			"then run `capstan addon %s %s -n %s --plan %s%s`; or give --yes to approve whichever plan is in status when the command runs",
			key, verb, p.Hash, plan.String(p), review, verb, a.Name, a.Namespace, p.Hash, flags)
	}
	return fmt.Errorf("addon %s: %s applies the plan you reviewed, named by its hash, and there is no plan for generation %d yet; "+
		"wait for it, and review it with `%s`, which prints the command that applies it", key, verb, a.Generation, review)
}

func newAddonSyncCommand() *cobra.Command {
	f := &clusterFlags{}
	var hash string
	var yes bool
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "sync NAME (--plan HASH | --yes)",
		Short: "Approve the Addon's reviewed plan (manual sync): it applies exactly that plan",
		Long: `sync approves the plan you reviewed, named by its hash with --plan, and
raises spec.syncRequest. If the plan in status is another one, nothing is
approved; if it changes before the controller applies it, nothing is
applied and the Addon says why. ` + "`capstan addon get NAME --diff`" + ` shows the
plan and prints the command with its hash. --yes approves whichever plan
is in status when the command runs, unseen.`,
		Example: `  capstan addon get hello-kustomize --diff
  capstan addon sync hello-kustomize --plan sha256:…`,
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
			a, err := addons.Get(cmd.Context(), c, key)
			if err != nil {
				return err
			}
			if err := addons.RefuseSuspended(a, key, f.suffix()); err != nil {
				return err
			}
			if err := requireReview(a, "sync", hash, yes, f.suffix()); err != nil {
				return err
			}
			if err := approve(cmd.Context(), cmd.OutOrStdout(), c, key, hash, f.suffix()); err != nil {
				return err
			}
			return waitSynced(cmd, c, key, w, f.suffix())
		},
	}
	f.add(cmd)
	w.add(cmd, "the add-on is Synced")
	cmd.Flags().StringVar(&hash, "plan", "", "The plan hash you reviewed (addon get --diff prints it).")
	cmd.Flags().BoolVar(&yes, "yes", false, "Approve whichever plan is in status when the command runs, without naming it.")
	cmd.MarkFlagsMutuallyExclusive("plan", "yes")
	return cmd
}

func approve(ctx context.Context, w io.Writer, c client.Client, key client.ObjectKey, hash, flags string) error {
	a, err := addons.Approve(ctx, c, key, hash)
	if err != nil {
		return phaseHint(err, key, flags)
	}
	if a.Summary != "" {
		fmt.Fprintf(w, "Approving plan %s: %s\n", a.Hash, a.Summary)
	}
	fmt.Fprintf(w, "Requested sync %d of %s.\n", a.SyncRequest, key)
	return nil
}

// phaseHint ends an error that there is no plan yet with the command that
// shows the add-on's phase, naming its namespace and flags, the cluster
// flags of this command: pasted as is, it reads this Addon, not one of
// the same name in whatever context is current.
func phaseHint(err error, key client.ObjectKey, flags string) error {
	if !errors.Is(err, addons.ErrNoPlan) {
		return err
	}
	return fmt.Errorf("%w; check its phase with `capstan addon get %s -n %s%s`", err, key.Name, key.Namespace, flags)
}

// checkOutput refuses an -o that printObject cannot print, before the
// command reads or computes anything.
func checkOutput(format string) error {
	switch format {
	case "", "yaml", "json":
		return nil
	}
	return fmt.Errorf("-o %q: give yaml or json", format)
}

// reapplicable is the Addon as kubectl get -o prints it: with its
// apiVersion and kind, which the client's decoding leaves out, and
// without the managed fields, which an apply of the printed file refuses.
func reapplicable(a *capstanv1.Addon) *capstanv1.Addon {
	a = a.DeepCopy()
	a.APIVersion, a.Kind = capstanv1.GroupVersion.String(), "Addon"
	a.ManagedFields = nil
	return a
}

// printObject prints v as yaml or json, for scripts.
func printObject(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return fmt.Errorf("-o %q: give yaml or json", format)
}
