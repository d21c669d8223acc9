package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	orasregistry "oras.land/oras-go/v2/registry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/source"
	addonvalues "capstan.dev/capstan/internal/values"
)

// The cluster side of `capstan addon`: commands that change an Addon in the
// cluster through the operations layer, as the HTTP API does. Git-managed
// add-ons are changed with --gitops instead, by a commit.

// valuesFlags are -f, --set, --set-string and --secret-input.
type valuesFlags struct {
	values       values.Options
	secretInputs []string
}

func (v *valuesFlags) add(cmd *cobra.Command, withFiles bool) {
	f := cmd.Flags()
	if withFiles {
		f.StringArrayVarP(&v.values.ValueFiles, "values", "f", nil, "a values file merged over spec.values (repeatable; later files win)")
	}
	f.StringArrayVar(&v.values.Values, "set", nil, "set a value, as helm --set does: key=value, a.b=c (repeatable); a secret input goes in --secret-input, as spec.values is readable by anyone who may view the Addon")
	f.StringArrayVar(&v.values.StringValues, "set-string", nil, "set a value as a string (repeatable)")
	f.StringArrayVar(&v.secretInputs, "secret-input", nil, "a secret input from a file: path=@file, such as auth.password=@pw.txt; the file is taken byte for byte, except that a file of one line loses its line ending; it goes into a new values Secret and is never shown, edit takes the path out of spec.values, and the values Secret of secret inputs it replaces is deleted once no Addon of the namespace names it, unless git manages the Addon (repeatable)")
}

// read returns the values and the secret inputs of the flags.
func (v *valuesFlags) read() (map[string]any, map[string]string, error) {
	vals, err := v.values.MergeValues(getter.Providers{})
	if err != nil {
		return nil, nil, err
	}
	inputs := map[string]string{}
	for i, s := range v.secretInputs {
		path, file, ok := strings.Cut(s, "=@")
		if !ok || path == "" || file == "" {
			// Only the path before =@ is shown, or the flag's place.
			which := fmt.Sprintf("#%d", i+1)
			if ok && path != "" {
				which = fmt.Sprintf("%q", path+"=@")
			}
			return nil, nil, fmt.Errorf("--secret-input %s: write path=@file, such as auth.password=@password.txt, so that a secret never stands in a command line (the argument is not shown: it may be the secret itself)", which)
		}
		if _, err := addonvalues.PathSegments(path); err != nil {
			return nil, nil, fmt.Errorf("--secret-input %q=@...: %v: name the value as a targetPath, such as auth.password or users[0].password", path, err)
		}
		data, why := readSecretInputFile(file)
		if why != "" {
			return nil, nil, fmt.Errorf("--secret-input %s=@...: %s (the file's name is not shown: it may be the secret itself); give the path of a file that holds the value", path, why)
		}
		inputs[path] = secretInputValue(data)
	}
	total := 0
	for _, value := range inputs {
		total += len(value)
	}
	// NOTE: the bound values.WriteSecretInputs holds to, checked here too,
	// before the cluster is called.
	if total > addonvalues.MaxDocumentBytes {
		return nil, nil, fmt.Errorf("the secret inputs are %d bytes together; at most %d bytes (1 MiB) fit in a Secret", total, addonvalues.MaxDocumentBytes)
	}
	return vals, inputs, nil
}

// secretCheck refuses values of -f and --set that a chart's schema marks
// writeOnly, before anything is written: in spec.values a secret input is
// stored, readable by anyone who may view the Addon (Addons are in the
// view role), before the controller Blocks it. The chart is fetched as
// capstan plan fetches it, through the fetch guard.
type secretCheck struct {
	guard  netguard.Config
	caFile string
	// fetcher is the command's, made once by fetcherFor: each Fetcher
	// keeps what it fetched, so the check, its re-check and the warning
	// of unknown secret inputs download the chart once.
	fetcher *source.Fetcher
	// chart is the command's ChartCheck over fetcher, made once by
	// chartCheckFor: the values check and the warning of unknown secret
	// inputs take the schema it compiled once.
	chart *addons.ChartCheck
	// layered says chart reads the valuesFrom ConfigMaps already
	// (withConfigMaps).
	layered bool
}

// newChartCheck makes a command's ChartCheck; a test replaces it to count
// the schemas compiled.
var newChartCheck = addons.NewChartCheck

// chartCheckFor returns the command's ChartCheck for cfg, made on first
// use.
func (s *secretCheck) chartCheckFor(cfg *rest.Config) (*addons.ChartCheck, error) {
	if s.chart != nil {
		return s.chart, nil
	}
	fetcher, err := s.fetcherFor(cfg)
	if err != nil {
		return nil, err
	}
	s.chart = newChartCheck(func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
		return fetcher.Fetch(ctx, spec, nil)
	})
	return s.chart, nil
}

// fetcherFor returns the command's chart fetcher for cfg, made on first
// use.
func (s *secretCheck) fetcherFor(cfg *rest.Config) (*source.Fetcher, error) {
	if s.fetcher != nil {
		return s.fetcher, nil
	}
	fopts, err := s.fetcherOptions()
	if err != nil {
		return nil, err
	}
	if s.fetcher, err = addons.NewFetcher(cfg, fopts); err != nil {
		return nil, err
	}
	return s.fetcher, nil
}

func (s *secretCheck) add(cmd *cobra.Command) {
	s.guard.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&s.caFile, "ca-file", "", "PEM certificates to trust for the chart repository or registry, read to check the values for secret inputs")
}

// withConfigMaps has check compose spec.values with the ConfigMaps that
// a's valuesFrom names (values.ReadConfigMaps), read with c, the user's
// own client, never more than the API server would take
// (values.MaxValuesFrom). The Secrets it names are not read: the
// controller alone judges what they select. A ConfigMap that cannot be
// read is said on stderr, and the check goes on without it. The profile
// is the one the controller recorded for a; a new Addon has none yet,
// and is read as the cluster profile reads, every ConfigMap that
// valuesFrom names: the restricted profile reads fewer, and Blocks the
// Addon for the others. The ConfigMaps are read once for the command.
func (s *secretCheck) withConfigMaps(cmd *cobra.Command, check *addons.ChartCheck, c client.Reader, a *capstanv1.Addon) {
	if s.layered || c == nil {
		return
	}
	s.layered = true
	profile := a.Status.Profile
	if profile == "" {
		profile = capstanv1.ProfileCluster
	}
	check.Layers(func(ctx context.Context) []addonvalues.Layer {
		if a.Spec.Chart == nil || len(a.Spec.ValuesFrom) == 0 {
			return nil
		}
		layers, unread := addonvalues.ReadConfigMaps(ctx, c, a, profile)
		for _, u := range addonvalues.UnreadNotes(unread) {
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: addon %s: the values were checked for secret inputs without %s\n", client.ObjectKeyFromObject(a), u)
		}
		return layers
	})
}

// checkFlags names the flags add registers: those of the chart's fetch,
// which only the check of the values reads, so that a mode without the
// check (a git folder, install of an Addon of the cluster) refuses them
// rather than ignore them.
func checkFlags() []string {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	(&netguard.Config{}).AddFlags(fs)
	names := []string{"ca-file"}
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// check refuses the values of given, those -f and --set set, that the
// chart marks writeOnly in spec, naming --secret-input. A writeOnly value
// that spec.values held already, and given does not set, is said on
// stderr, with the flag that moves it out, and does not block an edit of
// other values. A chart that cannot be fetched is said on stderr, and the
// controller's own check then holds.
//
// spec.values is judged composed with the ConfigMaps that a's valuesFrom
// names (withConfigMaps), read with c, the user's own client, as the
// controller composes them: a ConfigMap's mode: ldap may make
// ldap.bindPassword writeOnly.
func (s *secretCheck) check(cmd *cobra.Command, cfg *rest.Config, c client.Reader, a *capstanv1.Addon, given map[string]any) error {
	key, spec := client.ObjectKeyFromObject(a), a.Spec
	if spec.Chart == nil || spec.Values == nil {
		return nil
	}
	check, err := s.chartCheckFor(cfg)
	if err != nil {
		return err
	}
	s.withConfigMaps(cmd, check, c, a)
	// NOTE: with no values before, none is held: every one is set.
	paths, _, err := check.SecretValuesChanged(cmd.Context(), spec, nil)
	// NOTE: values that break a rule of their own (more secret values
	// than Capstan hides) still come with the writeOnly paths, refused
	// below; the rest is said, and the controller Blocks the Addon.
	var inv *addonvalues.InvalidError
	if errors.As(err, &inv) {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: addon %s: the controller will Block the Addon for its values: %v\n", key, err)
	} else if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: the chart could not be read to check the values for secret inputs (%v); a value the chart's schema marks writeOnly belongs in --secret-input PATH=@FILE, not in -f or --set\n", err)
		return nil
	}
	stored := map[string]any{}
	// NOTE: values that cannot be read resolve no path, and every path
	// then counts as set where given holds anything at its first segment.
	_ = json.Unmarshal(spec.Values.Raw, &stored)
	var set, held []addonvalues.SecretInputPath
	for _, p := range paths {
		if givenAt(given, stored, p.Segments) {
			set = append(set, p)
		} else {
			held = append(held, p)
		}
	}
	if len(set) > 0 {
		a := adviseSecretInputs(stored, set)
		ways := a.whole
		if a.flags != "" {
			ways = append([]string{"give it as " + a.flags + " instead"}, ways...)
		}
		return fmt.Errorf("addon %s: the chart's schema marks %s writeOnly, a secret input, which -f and --set would write into spec.values, where anyone who may view the Addon reads it: "+
			"%s; nothing was written", key, a.names, strings.Join(ways, "; "))
	}
	if len(held) > 0 {
		a := adviseSecretInputs(stored, held)
		var ways []string
		if a.flags != "" {
			ways = append(ways, "move it with "+a.flags+", which takes it out of spec.values")
		}
		for _, w := range a.whole {
			ways = append(ways, w+", and take it out of spec.values yourself (kubectl edit addon): naming that Secret does not remove it, and capstan cannot name it")
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: addon %s: spec.values already holds %s, which the chart's schema marks writeOnly, a secret input readable there by anyone who may view the Addon, "+
			"and the controller Blocks the Addon for it: %s\n", key, a.names, strings.Join(ways, "; "))
	}
	return nil
}

// warnUnknown says on stderr which secret inputs the chart of spec has no
// place for (addons.UnknownSecretInputs): a misspelt path is stored and
// then never read, and the chart renders its default instead. The chart
// and its schema come from the ChartCheck check used, not fetched or
// compiled again. A chart that cannot be fetched is said on stderr too;
// nothing is refused.
func (s *secretCheck) warnUnknown(cmd *cobra.Command, cfg *rest.Config, key client.ObjectKey, spec capstanv1.AddonSpec, inputs map[string]string) {
	if spec.Chart == nil || len(inputs) == 0 {
		return
	}
	check, err := s.chartCheckFor(cfg)
	if err == nil {
		var msgs []string
		msgs, err = check.UnknownSecretInputs(cmd.Context(), spec, inputs)
		for _, m := range msgs {
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: addon %s: %s\n", key, m)
		}
	}
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: addon %s: the chart could not be read to check the paths of the secret inputs against its schema (%v)\n", key, err)
	}
}

// secretInputAdvice is how to give the secret inputs at some paths.
type secretInputAdvice struct {
	// names names the paths: a targetPath, or the JSON pointer of a path
	// with an empty key.
	names string
	// flags are the --secret-input flags of the scalars at paths a
	// targetPath names, or "".
	flags string
	// whole says how to give the others, in a Secret of one's own that
	// valuesFrom merges whole: an object or a list, which --secret-input
	// would give as one string the controller then Blocks, and a path
	// with an empty key, which no --secret-input can name.
	whole []string
}

// adviseSecretInputs sorts the secret inputs at paths of stored, the
// spec.values checked, by how each is given.
func adviseSecretInputs(stored map[string]any, paths []addonvalues.SecretInputPath) secretInputAdvice {
	var names, flags, objects, emptyKeys []string
	for _, p := range paths {
		if !p.Named {
			// NOTE: the Name of a path no targetPath can name may carry
			// advice after its pointer; the bare pointer is written again.
			ptr, _ := addonvalues.TargetPathIn(nil, p.Segments)
			names = append(names, ptr)
			emptyKeys = append(emptyKeys, ptr)
			continue
		}
		names = append(names, p.Name)
		switch v, _ := addonvalues.Lookup(stored, p.Segments); v.(type) {
		case map[string]any, []any:
			objects = append(objects, p.Name)
		default:
			flags = append(flags, "--secret-input "+p.Name+"=@FILE")
		}
	}
	a := secretInputAdvice{names: strings.Join(names, ", "), flags: strings.Join(flags, ", ")}
	if len(objects) > 0 {
		a.whole = append(a.whole, addons.NonScalarSecrets(objects))
	}
	if len(emptyKeys) > 0 {
		a.whole = append(a.whole, addons.EmptyKeySecrets(emptyKeys))
	}
	return a
}

// givenAt says whether given, the values of -f and --set, sets the value
// at segs, a writeOnly path found in stored, the spec.values checked. The
// path is compared by its segments, never by a name parsed back. It fails
// closed: a path that does not resolve in stored counts as set whenever
// given holds anything at its first segment, as a secret wrongly let
// through is stored in spec.values, readable by anyone who may view the
// Addon, while one wrongly refused costs only a --secret-input.
func givenAt(given, stored map[string]any, segs []string) bool {
	if len(segs) == 0 {
		return len(given) > 0
	}
	if _, ok := addonvalues.Lookup(given, segs); ok {
		return true
	}
	if _, ok := addonvalues.Lookup(stored, segs); ok {
		return false
	}
	_, ok := given[segs[0]]
	return ok
}

// gitCheck is the CheckValues of a --gitops commit: it refuses a
// definition whose values set or change a secret input, which the commit
// would keep in git's history for good. The chart is fetched through the
// fetch guard of the flags, as check fetches it. A chart that cannot be
// fetched refuses the commit (addons.UncheckedValuesError); a chart behind
// spec.chart.secretRef, which is not fetched, and a secret input the file
// in git holds already, are said on stderr, and the commit goes on.
func (s *secretCheck) gitCheck(cmd *cobra.Command) (func(ctx context.Context, next, cur *gitops.Definition) error, error) {
	fopts, err := s.fetcherOptions()
	if err != nil {
		return nil, err
	}
	fetcher, err := source.NewFetcher(source.Options{Guard: fopts.Guard, CABundle: fopts.CABundle})
	if err != nil {
		return nil, err
	}
	return addons.GitValuesCheck(func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
		return fetcher.Fetch(ctx, spec, nil)
	}, func(msg string) { fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", msg) }), nil
}

// fetcherOptions returns the options of the chart's fetch that the flags
// give: the fetch guard, and the certificates of --ca-file.
func (s *secretCheck) fetcherOptions() (addons.FetcherOptions, error) {
	o := addons.FetcherOptions{Guard: s.guard}
	if s.caFile != "" {
		var err error
		if o.CABundle, err = os.ReadFile(s.caFile); err != nil {
			return o, err
		}
	}
	return o, nil
}

// valueAt returns the value at a targetPath (auth.password,
// users[0].password, a\.b) of vals, and whether vals holds one there.
func valueAt(vals map[string]any, path string) (any, bool) {
	segs, err := addonvalues.PathSegments(path)
	if err != nil {
		return nil, false
	}
	return addonvalues.Lookup(vals, segs)
}

// lookupMap returns the map at segs of vals.
func lookupMap(vals map[string]any, segs []string) (map[string]any, bool) {
	v, ok := addonvalues.Lookup(vals, segs)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// dropSecretInputPaths takes out of spec.values the values at the paths
// that inputs sets, as secret inputs now hold them (a list's element is
// set to null, and a list left with nulls only is taken out whole): a
// secret left in spec.values would stay readable there, and the controller
// Blocks an Addon with a writeOnly value in it. A path that vals, the
// values of -f and --set, sets too is refused: it is given twice.
func dropSecretInputPaths(key client.ObjectKey, a *capstanv1.Addon, vals map[string]any, inputs map[string]string) error {
	if len(inputs) == 0 || a.Spec.Values == nil || len(a.Spec.Values.Raw) == 0 {
		return nil
	}
	current, err := exactSpecValues(a)
	if err != nil || current == nil {
		return nil
	}
	dropped := false
	// lists holds the lists a secret input's path ends in.
	lists := map[string][]string{}
	for p := range inputs {
		if _, ok := valueAt(vals, p); ok {
			return fmt.Errorf("addon %s: %s is given both by -f or --set and by --secret-input: give it once, as --secret-input %s=@FILE if it is a secret", key, p, p)
		}
		segs, index, err := addonvalues.PathIndexes(p)
		if err != nil {
			continue
		}
		parent, ok := addonvalues.Lookup(current, segs[:len(segs)-1])
		if !ok {
			continue
		}
		last := segs[len(segs)-1]
		switch c := parent.(type) {
		case map[string]any:
			if _, has := c[last]; has {
				delete(c, last)
				dropped = true
			}
		case []any:
			// NOTE: an element is set to null, not taken out, so that
			// the indexes of the others stay where the secret inputs'
			// targetPaths put them. A path that writes the element as a
			// key (apiKeys.0) sets a map's key, not the element: the
			// element stays, and the controller names it.
			if i, err := strconv.Atoi(last); err == nil && index[len(index)-1] && i < len(c) {
				c[i] = nil
				dropped = true
				lists[strings.Join(segs[:len(segs)-1], "\x00")] = segs[:len(segs)-1]
			}
		}
	}
	// A list left with nulls only is taken out whole: it holds nothing,
	// and the secret inputs' targetPaths make it again.
	for _, at := range lists {
		elems, _ := addonvalues.Lookup(current, at)
		if e, ok := elems.([]any); !ok || slices.ContainsFunc(e, func(v any) bool { return v != nil }) {
			continue
		}
		if m, ok := lookupMap(current, at[:len(at)-1]); ok {
			delete(m, at[len(at)-1])
		}
	}
	if !dropped {
		return nil
	}
	if len(current) == 0 {
		a.Spec.Values = nil
		return nil
	}
	raw, err := json.Marshal(current)
	if err != nil {
		return err
	}
	a.Spec.Values = &apiextensionsv1.JSON{Raw: raw}
	return nil
}

// waitFlags are --wait and --timeout.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

// add registers the flags; until says what --wait waits for, as "the
// add-on is Synced".
func (w *waitFlags) add(cmd *cobra.Command, until string) {
	cmd.Flags().BoolVar(&w.wait, "wait", true, "wait until "+until+", showing progress")
	cmd.Flags().DurationVar(&w.timeout, "timeout", 10*time.Minute, "how long --wait waits; a positive duration")
}

// check refuses a --timeout that would end the wait before it starts. It
// runs before the command connects: the request would be written, and the
// command then fail at once, as if the request had not been made.
func (w waitFlags) check() error {
	if w.wait && w.timeout <= 0 {
		return fmt.Errorf("--timeout %s: give a positive duration, or --wait=false not to wait", w.timeout)
	}
	return nil
}

func newAddonAddCommand() *cobra.Command {
	f := &clusterFlags{}
	v := &valuesFlags{}
	var secrets secretCheck
	var src capstanv1.ChartSource
	var git capstanv1.GitSource
	var target string
	var manualSync bool
	cmd := &cobra.Command{
		Use:   "add NAME (--chart-url URL | --repo URL --chart NAME | --oci REF | --git URL --path DIR) [flags]",
		Short: "Create an Addon, suspended: it is planned and nothing is applied until you install the plan",
		Example: `  capstan addon add blog -n tenant --oci oci://registry.example/charts/blog --version 1.2.0 \
      --set replicas=2 --secret-input auth.password=@password.txt
  capstan addon get blog -n tenant --diff   # prints the install command with the plan's hash
  capstan addon install blog -n tenant --plan sha256:…`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := capstanv1.AddonSpec{TargetNamespace: target, ManualSync: manualSync}
			if err := addName(args[0]); err != nil {
				return err
			}
			if err := sourceCredentials(src, git); err != nil {
				return err
			}
			switch {
			case git.URL != "" && (src.URL != "" || src.Repo != "" || src.OCI != ""):
				return errors.New("give one source: a chart (--chart-url, --repo with --chart, --oci) or --git")
			case git.URL != "":
				if err := onlyWith(cmd, "--git", "chart", "version", "digest"); err != nil {
					return err
				}
				if err := refuseFlags(cmd, "--%[1]s sets how the chart is fetched to check the values, and a folder of git has neither chart nor values: leave it out", checkFlags()...); err != nil {
					return err
				}
				if err := refuseFlags(cmd, gitHasNoValues, "values", "set", "set-string", "secret-input"); err != nil {
					return err
				}
				spec.Git = &git
			case src.URL != "" || src.Repo != "" || src.OCI != "":
				if err := onlyWith(cmd, "a chart source", "path", "revision"); err != nil {
					return err
				}
				if err := chartFlags(cmd, src); err != nil {
					return err
				}
				spec.Chart = &src
			default:
				return errors.New("give a source: --chart-url, --repo with --chart, --oci, or --git with --path")
			}
			vals, inputs, err := v.read()
			if err != nil {
				return err
			}
			if p := givenTwice(vals, inputs); p != "" {
				return fmt.Errorf("addon %s: %s is given both by -f or --set and by --secret-input: give it once, as --secret-input %s=@FILE if it is a secret", args[0], p, p)
			}
			if len(vals) > 0 {
				raw, err := json.Marshal(vals)
				if err != nil {
					return err
				}
				spec.Values = &apiextensionsv1.JSON{Raw: raw}
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: Scheme()})
			if err != nil {
				return err
			}
			a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: args[0]}, Spec: spec}
			if err := secrets.check(cmd, cfg, c, a, vals); err != nil {
				return err
			}
			secrets.warnUnknown(cmd, cfg, client.ObjectKeyFromObject(a), spec, inputs)
			if _, err := addons.Add(cmd.Context(), c, a, inputs); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Created Addon %s/%s, suspended. Review its plan with `capstan addon get %s -n %s --diff%s`: it prints the command that installs exactly that plan, `capstan addon install %s -n %s --plan sha256:…%s`.\n",
				f.namespace, args[0], args[0], f.namespace, f.suffix(), args[0], f.namespace, f.suffix())
			return nil
		},
	}
	f.add(cmd)
	v.add(cmd, true)
	secrets.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&src.URL, "chart-url", "", "an https chart archive (.tgz)")
	fl.StringVar(&src.Repo, "repo", "", "an https chart repository (with --chart)")
	fl.StringVar(&src.Name, "chart", "", "the chart's name in --repo")
	fl.StringVar(&src.OCI, "oci", "", "an OCI chart reference, oci://…")
	fl.StringVar(&src.Version, "version", "", "the chart's version")
	fl.StringVar(&src.Digest, "digest", "", "pin the archive: sha256:…")
	fl.StringVar(&git.URL, "git", "", "a git repository")
	fl.StringVar(&git.Path, "path", "", "the folder in --git")
	fl.StringVar(&git.Revision, "revision", "", "the branch, tag or commit of --git")
	fl.StringVar(&target, "target-namespace", "", "where a cluster-profile add-on installs (default: its own namespace)")
	fl.BoolVar(&manualSync, "manual-sync", false, "after the install, every change waits for capstan addon sync")
	return cmd
}

// refuseGitManaged refuses to change in the cluster an Addon that git
// manages: the syncer would undo the change, and git is its truth. An
// Addon whose AddonRepository is suspended or gone may be changed, with a
// note on stderr of what happens to the change: no syncer undoes it until
// the repository is resumed, or ever, once it is gone.
func refuseGitManaged(cmd *cobra.Command, c client.Client, key client.ObjectKey) error {
	ctx := cmd.Context()
	a, err := addons.Get(ctx, c, key)
	if err != nil {
		return err
	}
	name := a.Labels[gitops.ManagedByGitLabel]
	if name == "" {
		return nil
	}
	repo := &capstanv1.AddonRepository{}
	err = c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, repo)
	if apierrors.IsNotFound(err) {
		repo = nil
	} else if err != nil {
		return fmt.Errorf("addon %s is managed by git (AddonRepository %s, which cannot be read: %w): change it with --gitops, by a commit", key, name, err)
	}
	note, err := gitManagedChange(key, name, repo)
	if note != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), note)
	}
	return err
}

// gitManagedChange decides whether an Addon that the AddonRepository name
// manages may be changed in the cluster; repo is nil when it is gone. It
// answers a note for the person, or the refusal.
func gitManagedChange(key client.ObjectKey, name string, repo *capstanv1.AddonRepository) (string, error) {
	switch {
	case repo == nil:
		return fmt.Sprintf("Note: addon %s carries the %s label, but its AddonRepository %s is gone: the change is made in the cluster, and no repository manages the Addon any more.", key, gitops.ManagedByGitLabel, name), nil
	case repo.Spec.Suspend:
		return fmt.Sprintf("Note: AddonRepository %s, which manages addon %s, is suspended: the change is made in the cluster, and the next resume applies git's version again; commit the change to git too to keep it.", name, key), nil
	}
	return "", fmt.Errorf("addon %s is managed by git (AddonRepository %s): change it with --gitops, by a commit, or suspend the AddonRepository (spec.suspend) to change it in the cluster for a while", key, name)
}

// installCluster installs a suspended add-on with exactly the plan that
// --plan names, or with --yes whichever plan is in status.
func installCluster(cmd *cobra.Command, f *clusterFlags, name, hash string, yes bool, w waitFlags) error {
	if err := w.check(); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: f.namespace, Name: name}
	if err := refuseGitManaged(cmd, c, key); err != nil {
		return err
	}
	current, err := addons.Get(cmd.Context(), c, key)
	if err != nil {
		return err
	}
	if err := requireReview(current, "install", hash, yes, f.suffix()); err != nil {
		return err
	}
	a, err := addons.Install(cmd.Context(), c, key, hash)
	if err != nil {
		return phaseHint(err, key, f.suffix())
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Installing plan %s: %s\n", a.Hash, a.Summary)
	return waitSynced(cmd, c, key, w, f.suffix())
}

// editCluster changes an Addon's values, version and secret inputs. The
// values merge over spec.values as Helm merges --set over -f: maps key by
// key, anything else replaced, and a null kept as a null, which deletes
// the chart's default. So spec.values is written whole, by a JSON Patch
// that tests the resourceVersion that was read (addons.Update): in a
// merge patch, a null would only delete the key from spec.values.
func editCluster(cmd *cobra.Command, f *clusterFlags, name string, v *valuesFlags, secrets *secretCheck, version, digest string) error {
	vals, inputs, err := v.read()
	if err != nil {
		return err
	}
	if len(vals) == 0 && version == "" && digest == "" && len(inputs) == 0 {
		return errors.New("nothing to change: give -f, --set, --secret-input, --version or --digest")
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: f.namespace, Name: name}
	if err := refuseGitManaged(cmd, c, key); err != nil {
		return err
	}
	ctx := addons.WithWarn(cmd.Context(), func(msg string) { fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", msg) })
	change := func(a *capstanv1.Addon) error {
		if a.Spec.Git != nil && (len(vals) > 0 || len(inputs) > 0) {
			return fmt.Errorf("addon %s: -f, --set, --set-string and --secret-input set chart values, and %s; the controller would Block the Addon (git-source): leave them out", key, folderHasNoValues)
		}
		if len(vals) > 0 {
			merged, err := mergeOverSpecValues(a, vals)
			if err != nil {
				return fmt.Errorf("addon %s: %w", key, err)
			}
			a.Spec.Values = &apiextensionsv1.JSON{Raw: merged}
		}
		if err := dropSecretInputPaths(key, a, vals, inputs); err != nil {
			return err
		}
		if version != "" || digest != "" {
			return moveChart(key, a.Spec.Chart, version, digest)
		}
		return nil
	}
	// NOTE: the chart is fetched, to check the values, before
	// addons.Update reads the Addon whose resourceVersion its write tests:
	// a fetch may take seconds, and any status write of the controller
	// meanwhile would refuse the edit, and again when run again. Update
	// fetches once more only when the Addon's chart or values changed
	// since this read.
	var checked *capstanv1.AddonSpec
	if len(vals) > 0 {
		first, err := addons.Get(ctx, c, key)
		if err != nil {
			return err
		}
		if err := change(first); err != nil {
			return err
		}
		if err := secrets.check(cmd, cfg, c, first, vals); err != nil {
			return err
		}
		checked = &first.Spec
	}
	a, err := addons.Update(ctx, c, key, func(a *capstanv1.Addon) error {
		// NOTE: checked here, on the Addon read, before addons.Update
		// writes a values Secret of the secret inputs.
		if err := change(a); err != nil {
			return err
		}
		if len(vals) == 0 || sameChartAndValues(checked, &a.Spec) {
			return nil
		}
		return secrets.check(cmd, cfg, c, a, vals)
	}, inputs)
	if err != nil {
		return err
	}
	secrets.warnUnknown(cmd, cfg, key, a.Spec, inputs)
	fmt.Fprintf(cmd.OutOrStdout(), "Edited Addon %s/%s (generation %d); a new plan follows.\n", a.Namespace, a.Name, a.Generation)
	return nil
}

// sameChartAndValues says whether spec has the chart and values of
// checked, which a check of its values read already.
func sameChartAndValues(checked, spec *capstanv1.AddonSpec) bool {
	return checked != nil && apiequality.Semantic.DeepEqual(checked.Chart, spec.Chart) && apiequality.Semantic.DeepEqual(checked.Values, spec.Values)
}

// moveChart sets a chart's version and digest pin for edit. A digest
// names one chart, so a new version of a pinned chart needs the new
// digest with it: without, the fetch would fail the pin (spec.chart.digest)
// or pull the old chart again (a manifest digest in spec.chart.oci). A new
// digest takes the place of a manifest digest in spec.chart.oci, as
// spec.chart.digest, which pins a manifest as well as an archive. A new
// version takes the place of a tag in spec.chart.oci: the fetch refuses a
// tag that is not spec.chart.version.
func moveChart(key client.ObjectKey, c *capstanv1.ChartSource, version, digest string) error {
	if c == nil {
		return fmt.Errorf("addon %s renders a folder of git, which has no chart version or digest: leave --version and --digest out (spec.git.revision chooses the commit)", key)
	}
	ref, pinned := "", ""
	if c.OCI != "" {
		if i := strings.LastIndex(c.OCI, "@"); i > 0 {
			ref, pinned = c.OCI[:i], c.OCI[i+1:]
		}
	}
	if pinned == "" {
		pinned = c.Digest
	}
	if version != "" && digest == "" && pinned != "" {
		return fmt.Errorf("addon %s pins its chart by digest (%s), which names one version: give the digest of version %s with --digest too, "+
			"the chart archive's sha256 or, for OCI, its manifest's", key, pinned, version)
	}
	if digest != "" {
		if ref != "" {
			c.OCI = ref
		}
		c.Digest = digest
	}
	if version != "" {
		c.Version = version
		if repo, ok := ociRepository(c.OCI); ok {
			c.OCI = repo
		}
	}
	return nil
}

// ociRepository returns an OCI chart reference without its tag and
// manifest digest (oci://registry:5000/charts/blog of
// oci://registry:5000/charts/blog:1.2.0), and false when oci is not one.
func ociRepository(oci string) (string, bool) {
	raw, ok := strings.CutPrefix(oci, "oci://")
	if !ok {
		return "", false
	}
	ref, err := orasregistry.ParseReference(raw)
	if err != nil {
		return "", false
	}
	return "oci://" + ref.Registry + "/" + ref.Repository, true
}

// mergeOverSpecValues returns the JSON of vals merged over the Addon's
// spec.values, with Helm's merge of values files: nested maps key by key,
// and every other value, a null included, in the place of the old one.
func mergeOverSpecValues(a *capstanv1.Addon, vals map[string]any) ([]byte, error) {
	current := map[string]any{}
	if a.Spec.Values != nil && len(a.Spec.Values.Raw) > 0 {
		exact, err := exactSpecValues(a)
		if err != nil {
			return nil, fmt.Errorf("spec.values is not an object (%w); fix it with kubectl edit", err)
		}
		if exact != nil {
			current = exact
		}
	}
	return json.Marshal(loader.MergeMaps(current, vals))
}

// exactSpecValues reads the Addon's spec.values as a map whose numbers are
// json.Number, nil for no values or a null.
//
// NOTE: edit writes spec.values whole, and a float64 holds no integer past
// 2^53 and writes 1e+23 for 100000000000000000000000: a number the edit
// does not touch would be saved rounded or respelled, the chart would
// render another ID or quota, and a GitOps tool that compares spec.values
// would see drift. A json.Number marshals back to the digits it was read
// from, and Helm's merge copies it as any other leaf.
func exactSpecValues(a *capstanv1.Addon) (map[string]any, error) {
	if a.Spec.Values == nil || len(a.Spec.Values.Raw) == 0 {
		return nil, nil
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.Spec.Values.Raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// waitSynced waits, with w, until the Addon is Synced at its generation,
// printing each change of phase, hook and progress on one line. A Blocked,
// Failed, Degraded, suspended or paused add-on, and one whose approval was
// not taken up (stale, without a plan, or a prune that needs its own
// approval), ends the wait with an error; flags end the commands it names
// (clusterFlags.suffix).
func waitSynced(cmd *cobra.Command, c client.Client, key client.ObjectKey, w waitFlags, flags string) error {
	if !w.wait {
		return nil
	}
	return poll(cmd, w.timeout, func(ctx context.Context) (bool, string, error) {
		a, err := readAddon(ctx, c, key)
		if err != nil {
			return false, "", err
		}
		done, err := syncOutcome(a, key, flags)
		return done, progressLine(a), err
	})
}

// syncOutcome says whether a sync of the Addon is done, or, as an error,
// why it will not be soon; flags end the commands it names.
func syncOutcome(a *capstanv1.Addon, key client.ObjectKey, flags string) (bool, error) {
	// NOTE: before the generation check: a paused Addon is not reconciled,
	// so its status never catches up, and the wait would run to its end.
	switch {
	case a.Annotations[capstanv1.PausedAnnotation] == "true":
		if err := addons.RefuseHeld(a, key); err != nil {
			// NOTE: the hold outlasts the pause, and uses up an
			// approval it finds: nothing stands to apply.
			return false, err
		}
		return false, fmt.Errorf("addon %s is paused (annotation %s=true), and a paused add-on applies nothing; the approval stands, and applies once the annotation goes: `kubectl annotate addon %s -n %s %s-%s`",
			key, capstanv1.PausedAnnotation, key.Name, key.Namespace, capstanv1.PausedAnnotation, flags)
	case a.Spec.Suspend:
		return false, addons.RefuseSuspended(a, key, flags)
	}
	if a.Status.ObservedGeneration != a.Generation {
		return false, nil
	}
	switch a.Status.Phase {
	case capstanv1.PhaseSynced:
		return true, nil
	case capstanv1.PhaseBlocked, capstanv1.PhaseFailed, capstanv1.PhaseDegraded:
		return false, fmt.Errorf("addon %s is %s: %s", key, a.Status.Phase, readyMessage(a))
	case capstanv1.PhaseOutOfSync:
		if readyReason(a) == plan.ReasonSyncWindow {
			// NOTE: the request stands; the windows may open in days.
			return false, fmt.Errorf("addon %s is held by its sync windows, and applies when they open: %s", key, readyMessage(a))
		}
		if a.Spec.SyncRequest <= a.Status.LastSyncRequest {
			return false, fmt.Errorf("addon %s waits for approval: %s", key, readyMessage(a))
		}
		if heldByGate(a) {
			// NOTE: the controller saw the request's generation and did
			// not take the request up: the plan changed since it was
			// approved, or it prunes more than a person must confirm. It
			// stays so until a person approves again, which no wait sees.
			return false, fmt.Errorf("addon %s did not apply the approval, and waits for a person (%s): %s", key, readyReason(a), readyMessage(a))
		}
	}
	return false, nil
}

// waitGone waits until the Addon is deleted. A removal that waits for a
// person (removeOutcome) ends the wait with an error.
func waitGone(cmd *cobra.Command, c client.Client, key client.ObjectKey, w waitFlags) error {
	if !w.wait {
		return nil
	}
	return poll(cmd, w.timeout, func(ctx context.Context) (bool, string, error) {
		a, err := readAddon(ctx, c, key)
		if apierrors.IsNotFound(err) {
			return true, "removed", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, progressLine(a), removeOutcome(a, key)
	})
}

// removeOutcome says, as an error, why the removal of an Addon will not
// end until a person acts: its uninstall failed for good (Failed and
// Stalled: a pre-delete hook failed), or waits for an add-on that depends
// on it and is not being removed (WaitingForDependents and Stalled). Both
// name what to do in the Ready message. A transient failure, which the
// controller retries, and dependents being removed too, which leave on
// their own, are waited out.
//
// NOTE: only a status of the deleting generation counts: the API server
// moves the generation when it sets deletionTimestamp, so an add-on that
// was Failed before its removal is not taken for one whose uninstall
// failed.
func removeOutcome(a *capstanv1.Addon, key client.ObjectKey) error {
	if a.DeletionTimestamp == nil || a.Status.ObservedGeneration != a.Generation {
		return nil
	}
	why := strings.TrimSuffix(readyMessage(a), ".")
	stalled := apimeta.IsStatusConditionTrue(a.Status.Conditions, capstanv1.ConditionStalled)
	switch {
	case readyReason(a) == controller.ReasonWaitingForDependents && stalled:
		return fmt.Errorf("addon %s is not removed yet, and waits for a person: %s. The removal stands, and goes on once they are gone", key, why)
	case a.Status.Phase == capstanv1.PhaseFailed && stalled:
		return fmt.Errorf("addon %s is not removed: its uninstall failed, and waits for a person: %s. The removal stands, and goes on once that is fixed", key, why)
	}
	return nil
}

// poll calls check every second until it is done, fails, or the timeout
// ends, printing its line whenever the line changes: the same plain lines
// on a terminal and in a log. A read that fails for a while (readError)
// is said once on stderr and waited out; a read cut short by the end of
// the wait ends it as the wait's end does.
//
// NOTE: the request the wait follows is written before the wait starts,
// and the controller goes on with it whatever the CLI reads: an API
// server that restarts, a 429 of priority and fairness, or a dropped
// connection must not end a wait of ten minutes as if the request failed.
func poll(cmd *cobra.Command, timeout time.Duration, check func(context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	out := cmd.OutOrStdout()
	last, failed := "", ""
	for {
		done, line, err := check(ctx)
		if line != "" && line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		switch {
		case done:
			return err
		case err == nil:
			failed = ""
		case ctx.Err() != nil && (transientRead(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			// The wait ended during the read: said below.
		case transientRead(err):
			if msg := err.Error(); msg != failed {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: cannot read the add-on now, and the wait goes on: %s\n", msg)
				failed = msg
			}
		default:
			return err
		}
		select {
		case <-ctx.Done():
			if cmd.Context().Err() != nil {
				// Interrupted: the request stands, only the wait ends.
				return fmt.Errorf("stopped waiting when interrupted; the request stands, and the controller goes on (the last state: %s)", last)
			}
			return fmt.Errorf("gave up waiting after %s; the request stands, and the controller goes on (the last state: %s)", timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// readError is a failed read of the Addon that a wait follows.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// readAddon reads the Addon that a wait follows; an error is a readError.
func readAddon(ctx context.Context, c client.Client, key client.ObjectKey) (*capstanv1.Addon, error) {
	a := &capstanv1.Addon{}
	if err := c.Get(ctx, key, a); err != nil {
		return nil, readError{err}
	}
	return a, nil
}

// transientRead reports whether err is a failed read that a later read
// may not repeat: not an Addon that is gone, nor an account that may not
// read it, which no wait mends.
func transientRead(err error) bool {
	var r readError
	return errors.As(err, &r) && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err)
}

// folderHasNoValues says why values are refused for an Addon of a git
// folder, in the same words wherever they are.
const folderHasNoValues = "a folder of git has no values (spec.substitute sets its ${variables})"

// gitHasNoValues refuses a values flag for an Addon of a git folder: the
// controller would Block it (git-source).
const gitHasNoValues = "--%[1]s sets chart values, and " + folderHasNoValues + "; the controller would Block the Addon (git-source): leave it out"

// onlyWith refuses flags that belong to the other kind of source, which
// the Addon would silently leave out.
func onlyWith(cmd *cobra.Command, source string, other ...string) error {
	return refuseFlags(cmd, "--%[1]s does not go with "+source+"; leave it out, or give the source it belongs to", other...)
}

// refuseFlags refuses the first of names that was given: the command, as
// it runs, would silently leave it out. why says so, with the flag's name
// as %[1]s.
func refuseFlags(cmd *cobra.Command, why string, names ...string) error {
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf(why, name)
		}
	}
	return nil
}

// progressLine is one line of an Addon's progress: phase, reason, the hook
// that runs, and the plan's size.
func progressLine(a *capstanv1.Addon) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", a.Status.Phase)
	if r := readyReason(a); r != "" {
		fmt.Fprintf(&b, " (%s)", r)
	}
	if h := a.Status.Hook; h != nil {
		fmt.Fprintf(&b, ", hook %s %s/%s", h.Event, h.Kind, h.Name)
	}
	if wv := a.Status.Wave; wv != nil && wv.Deleting {
		fmt.Fprintf(&b, ", wave %d waits to be deleted", wv.Wave)
	} else if wv != nil {
		fmt.Fprintf(&b, ", wave %d waits", wv.Wave)
	}
	if p := a.Status.Plan; p != nil {
		fmt.Fprintf(&b, ", plan %s", plan.String(p))
	}
	fmt.Fprintf(&b, ", %d objects in the inventory", len(a.Status.Inventory))
	return b.String()
}

func readyReason(a *capstanv1.Addon) string {
	if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func readyMessage(a *capstanv1.Addon) string {
	if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); c != nil {
		return c.Message
	}
	return string(a.Status.Phase)
}

// removeCluster deletes an Addon, with --uninstall and --keep-values.
func removeCluster(cmd *cobra.Command, c client.Client, key client.ObjectKey, o addons.RemoveOptions, w waitFlags) error {
	if err := refuseGitManaged(cmd, c, key); err != nil {
		return err
	}
	if err := addons.Remove(cmd.Context(), c, key, o); errors.Is(err, addons.ErrNoValuesToKeep) {
		return fmt.Errorf("addon %s is in the cluster profile, whose values Secrets (generated ones too) stay when it is removed: run it again without --keep-values", key)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Deleting Addon %s.\n", key)
	return waitGone(cmd, c, key, w)
}
