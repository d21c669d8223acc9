package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"filippo.io/age"
	"github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"
	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/mask"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/prepare"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/sops"
	"capstan.dev/capstan/internal/source"
	addonvalues "capstan.dev/capstan/internal/values"
)

// renderOptions are the flags of `capstan render`.
type renderOptions struct {
	namespace   string
	values      values.Options
	showHooks   bool
	upgrade     bool
	kubeVersion string
	apiVersions []string
	skipSchema  bool
	restricted  bool
	guard       netguard.Config
	caFile      string
	stdout      io.Writer
	stderr      io.Writer
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render NAME CHART | render -f ADDON.yaml | render -f addons/NAME.yaml",
		Short: "Print the objects a chart, an Addon or a gitops definition renders to, as helm template does",
		Long: `Render prints, as multi-document YAML, the objects that Capstan would apply.

With NAME and CHART (a chart folder or .tgz archive), it works like
"helm template NAME CHART --include-crds --skip-tests": -f adds values files,
--set sets values, and the objects of the chart's crds/ folder come first.
Hooks are printed only with --show-hooks; test hooks never.

With -f ADDON.yaml, it renders an Addon file, read strictly: one document
of apiVersion capstan.dev/v1alpha1, each key once, and a field the Addon
has not is an error. Its source is fetched through the fetch guard
(--fetch-allow and the other --fetch-* flags, --ca-file). What the
controller would Block it for fails the command too: values for a git
folder, substitute or decryption for a chart. spec.chart.verify and a
secretRef name Secrets, which capstan render does not read: they are errors.

With -f addons/NAME.yaml, a definition file of a gitops repository, it
reads the file as the gitops syncer does, every problem named with its
line, and renders the Addon the syncer would make of it, as an Addon file.
A git.path without git.url is a folder of the gitops repository: it is
rendered from the git checkout that holds the file, at its HEAD commit.
What the file is, it says itself: an Addon has kind: Addon, a definition
has name: and a source, helm: or git: with url: or path:, and any other
file (values with a top-level name: or git: block, say) is refused.

Values are checked against the chart's values.schema.json, as helm template
does. A template error names the template, line and column, never the
message, because the message can carry a value.

The render is checked as the controller checks it: a sync wave must be a
whole number. With --restricted, an Addon renders in its own namespace
under its own name, as a restricted add-on does, and its spec, its chart's
Chart.yaml, the values the chart makes at random and every object and hook
are checked with the restricted profile's guardrails. Violations are
printed after the objects, on stderr, and the command fails.`,
		Example: `  capstan render demo ./charts/demo --namespace demo -f values.yaml --set replicas=2
  capstan render demo demo-1.2.0.tgz --show-hooks --kube-version v1.33.0 --api-versions monitoring.coreos.com/v1`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			relaxGC()
			o.stdout, o.stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			switch len(args) {
			case 2:
				return o.runChart(cmd, args[0], args[1])
			case 0:
				return o.runAddon(cmd)
			}
			return errors.New("give a release name and a chart (capstan render NAME CHART), or an Addon or definition file (capstan render -f addon.yaml)")
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "default", "namespace the chart is rendered for (.Release.Namespace)")
	f.StringArrayVarP(&o.values.ValueFiles, "values", "f", nil, "values file, or an Addon file when no chart is given (repeatable; later files win)")
	f.StringArrayVar(&o.values.Values, "set", nil, "set a value, as helm --set does: key=value, a.b=c, list={a,b} (repeatable)")
	f.StringArrayVar(&o.values.StringValues, "set-string", nil, "set a value as a string, as helm --set-string does (repeatable)")
	f.BoolVar(&o.showHooks, "show-hooks", false, "print the hooks too (test hooks never)")
	f.BoolVar(&o.upgrade, "is-upgrade", false, "render for an upgrade: .Release.IsUpgrade true, .Release.IsInstall false")
	f.StringVar(&o.kubeVersion, "kube-version", "", "Kubernetes version for .Capabilities.KubeVersion, such as v1.33.0 (default: Helm's)")
	f.StringSliceVarP(&o.apiVersions, "api-versions", "a", nil, "API versions to add to .Capabilities.APIVersions, such as monitoring.coreos.com/v1 (repeatable or comma-separated)")
	f.BoolVar(&o.skipSchema, "skip-schema-validation", false, "do not check the values against the chart's values.schema.json (a secret input written in spec.values still fails, as the controller Blocks it)")
	f.BoolVar(&o.restricted, "restricted", false, "check the render as the controller checks a restricted Addon: its own namespace and name, its spec, its chart and the guardrails")
	f.StringVar(&o.caFile, "ca-file", "", "with -f ADDON.yaml: PEM certificates to trust for chart repositories, registries and git")
	// NOTE: the fetch guard's flags, as capstan plan and the controller
	// have them: an Addon file's source is fetched through the guard, and
	// its refusal names --fetch-allow.
	o.guard.AddFlags(f)
	return cmd
}

// relaxGC lets the heap grow to five times its live size between
// collections instead of twice, unless GOGC says otherwise. A render is one
// short process that allocates some 40 MiB over a live heap of under 10:
// with Go's default, a 330-object chart took nine collections, a fifth of
// the command's CPU time; with this, two, for about 13 MiB more peak memory.
func relaxGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// runChart renders a local chart folder or archive.
func (o *renderOptions) runChart(cmd *cobra.Command, name, chartPath string) error {
	loaded, err := source.LoadChart(chartPath)
	if err != nil {
		return err
	}
	ch := loaded.Chart
	// NOTE: values files and --set are merged by Helm's own code; with no
	// getters, a values file given as a URL is refused instead of fetched.
	vals, err := o.values.MergeValues(getter.Providers{})
	if err != nil {
		return err
	}
	caps := &render.Capabilities{KubeVersion: o.kubeVersion, APIVersions: o.apiVersions}
	if !o.skipSchema {
		if err := o.validateValues(ch, vals); err != nil {
			// NOTE: Helm's schema errors quote the value, such as one
			// that breaks a pattern; they are masked as fail messages are.
			return errors.New(givenValuesHidden(vals)(err.Error()))
		}
	}
	opts := render.Options{
		ReleaseName:  name,
		Namespace:    o.namespace,
		Capabilities: caps,
		Upgrade:      o.upgrade,
		Source:       render.SourceIdentity{Digest: loaded.Digest},
		Mask:         givenValuesHidden(vals),
	}
	var res *render.Result
	if o.restricted {
		// NOTE: render.Render renders as render.Helm does, and renders a
		// chart that names a generator twice, to find the fields it makes
		// at random, which the restricted profile refuses.
		res, err = render.Render(cmd.Context(), &source.Artifact{Chart: loaded, Identity: opts.Source}, vals, opts)
	} else {
		res, err = render.Helm(cmd.Context(), ch, vals, opts)
	}
	if err != nil {
		return err
	}
	// The chart is checked as an Addon of its name in --namespace would be.
	addon := &capstanv1.Addon{}
	addon.Name, addon.Namespace = name, o.namespace
	return o.finish(cmd, res, addon, ch.Metadata)
}

// finish checks the render as the controller checks an Addon of it, then
// prints it. In every profile a sync wave must be a whole number; with
// --restricted, the Addon's spec (guard.CheckSpec), its chart
// (guard.CheckChart, chart is nil for a git folder), the fields the chart
// makes at random and every object and hook (guard.Check) must keep the
// restricted profile's guardrails. Violations are printed after the
// objects, on stderr, and make the command fail: the controller would
// Block the Addon.
func (o *renderOptions) finish(cmd *cobra.Command, res *render.Result, addon *capstanv1.Addon, chart *chartv2.Metadata) error {
	for _, n := range res.Notices {
		fmt.Fprintf(o.stderr, "Warning: %s %s\n", n.Path, n.Message)
	}
	violations, err := o.check(cmd, res, addon, chart)
	if err != nil {
		return err
	}
	if err := o.print(res); err != nil {
		return err
	}
	if len(violations) == 0 {
		return nil
	}
	for _, v := range violations {
		ref := v.Object.Kind + " " + v.Object.Name
		if v.Path != "" {
			ref += " " + v.Path
		}
		fmt.Fprintf(o.stderr, "Violation: %s: %s (%s)\n", ref, v.Message, v.Rule)
	}
	if o.restricted {
		return fmt.Errorf("the render breaks %d guardrails of the restricted profile; a restricted Addon of it would be Blocked", len(violations))
	}
	return fmt.Errorf("the render has %d violations; an Addon of it would be Blocked", len(violations))
}

// check returns what the controller would Block an Addon of the render
// for. Without --restricted that is a sync wave that is not a whole
// number, on the objects the controller would apply (apply.Ignored marks
// the others).
//
// With --restricted, the objects are prepared as the controller prepares
// them (in the Addon's namespace, labelled, owned by the Addon), on copies,
// and checked as the controller checks them; the printed objects are the
// render's, hardened. A kind is taken for unknown, as capstan render reads
// no cluster: an object without a namespace is checked as one applied into
// the Addon's. The ownership rule, which reads the live objects, is left
// out.
func (o *renderOptions) check(cmd *cobra.Command, res *render.Result, addon *capstanv1.Addon, chart *chartv2.Metadata) ([]capstanv1.Violation, error) {
	if !o.restricted {
		applied := make([]*unstructured.Unstructured, 0, len(res.Objects))
		for _, obj := range res.Objects {
			if apply.Ignored(obj) == "" {
				applied = append(applied, obj)
			}
		}
		return apply.WaveViolations(applied), nil
	}
	prepared, err := prepare.Prepare(prepare.Input{Addon: addon, Profile: capstanv1.ProfileRestricted, Namespace: addon.Namespace, Render: res,
		Scope: func(schema.GroupVersionKind) (bool, bool, error) { return false, false, nil }})
	if err != nil {
		return nil, err
	}
	violations := guard.CheckSpec(addon)
	violations = append(violations, apply.WaveViolations(prepared.Objects)...)
	objs := slices.Clone(res.Objects)
	for _, h := range res.Hooks {
		if !h.TestOnly() {
			objs = append(objs, h.Object)
		}
	}
	// NOTE: Harden's error names templates of an unexpected shape, which
	// Check reports as violations too; the violations are what is shown.
	_ = guard.Harden(objs)
	guarded := slices.Clone(prepared.Objects)
	for _, h := range prepared.Hooks {
		if !h.TestOnly() {
			guarded = append(guarded, h.Object)
		}
	}
	violations = append(violations, prepare.RandomValues(prepared.Generated, prepared.Objects, prepared.Hooks, addon.Namespace)...)
	if chart != nil {
		violations = append(violations, guard.CheckChart(addon, guard.ChartMetadata{APIVersion: chart.APIVersion, Type: chart.Type, Annotations: chart.Annotations})...)
	}
	return append(violations, guard.Check(cmd.Context(), guarded, guard.Context{Namespace: addon.Namespace, AddonName: addon.Name})...), nil
}

// validateValues checks the values against the chart's schemas, over the
// chart's defaults, as helm template does before it renders.
func (o *renderOptions) validateValues(ch *chartv2.Chart, vals map[string]any) error {
	resolved, coalesced, err := render.ChartValues(ch, vals)
	if err != nil {
		return err
	}
	if err := commonutil.ValidateAgainstSchema(resolved, coalesced); err != nil {
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%w", err)
	}
	return nil
}

// runAddon renders an Addon file, or the Addon of a gitops definition: its chart or git folder is fetched through
// the fetch guard, its spec.values are validated against the chart's schema,
// and --set values go over them. valuesFrom names objects in a cluster,
// which capstan render does not read: their values are missing, and a
// warning says so. spec.chart.verify names keys there too: the signature
// is not checked, and a warning says so.
func (o *renderOptions) runAddon(cmd *cobra.Command) (err error) {
	if len(o.values.ValueFiles) != 1 {
		return errors.New("give a release name and a chart (capstan render NAME CHART), or one Addon or definition file (capstan render -f addon.yaml)")
	}
	file := o.values.ValueFiles[0]
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	addon, definition, err := o.readRenderFile(file, data)
	if err != nil {
		return err
	}
	if definition {
		note := &specPathNote{w: o.stderr, line: fmt.Sprintf("Note: %s is a gitops definition, and the messages here name the fields of the Addon it makes: "+
			"spec.chart is its helm, spec.git its git, spec.values its values, spec.valuesFrom its valuesFrom, and any other spec.FIELD its FIELD\n", file)}
		o.stderr = note
		defer func() {
			if err != nil && !note.noted && strings.Contains(err.Error(), "spec.") {
				err = fmt.Errorf("%w\n%s", err, strings.TrimSuffix(strings.TrimPrefix(note.line, "Note: "), "\n"))
			}
		}()
	}
	spec := addon.Spec
	if (spec.Chart == nil) == (spec.Git == nil) {
		return fmt.Errorf("%s: set exactly one source, spec.chart or spec.git", file)
	}
	if (spec.Chart != nil && spec.Chart.SecretRef != nil) || (spec.Git != nil && spec.Git.SecretRef != nil) {
		return fmt.Errorf("%s names credentials in a Secret, which capstan render does not read: render a copy of the chart with capstan render NAME CHART", file)
	}
	if spec.Chart != nil && spec.Chart.Verify != nil {
		// NOTE: the controller accepts such an Addon in every profile and
		// Blocks it only on a signature that is missing or wrong, which
		// is the signature's and the keys', not the render's: the render
		// is what the controller would apply once the signature is good.
		fmt.Fprintf(o.stderr, "Warning: spec.chart.verify names a Secret of public keys, which capstan render does not read: the chart's signature is not checked, "+
			"and the controller Blocks the Addon if it is missing or wrong; check it with helm verify or cosign verify\n")
	}
	// Inputs the source has no use for Block the Addon; they are not
	// dropped here either.
	if errs := addonvalues.FieldErrors(&spec, spec.Chart != nil); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(o.stderr, "Values error: %s: %s (%s)\n", e.Path, e.Message, e.Rule)
		}
		return fmt.Errorf("%s: %d fields do not apply to its source; an Addon with them would be Blocked", file, len(errs))
	}
	if err := o.addonNamespace(cmd, file, addon); err != nil {
		return err
	}
	ns := o.namespace
	profile := capstanv1.ProfileCluster
	if o.restricted {
		profile = capstanv1.ProfileRestricted
	}
	release := addon.ReleaseNameIn(profile)
	fopts := source.Options{Guard: o.guard, AllowFileGit: true}
	if o.caFile != "" {
		if fopts.CABundle, err = os.ReadFile(o.caFile); err != nil {
			return err
		}
	}
	fetcher, err := source.NewFetcher(fopts)
	if err != nil {
		return err
	}
	art, err := fetcher.Fetch(cmd.Context(), spec, nil)
	if err != nil {
		return err
	}
	opts := render.Options{
		ReleaseName:  release,
		Namespace:    ns,
		Capabilities: &render.Capabilities{KubeVersion: o.kubeVersion, APIVersions: o.apiVersions},
		Upgrade:      o.upgrade,
		PostRender:   render.PostRenderFor(&spec),
	}
	if !art.IsChart() {
		if len(o.values.Values) > 0 || len(o.values.StringValues) > 0 {
			return fmt.Errorf("%s: --set and --set-string set chart values, and %s: leave them out", file, folderHasNoValues)
		}
		if spec.Substitute != nil || len(spec.SubstituteFrom) > 0 {
			opts.Variables = map[string]string{}
			for i, ref := range spec.SubstituteFrom {
				fmt.Fprintf(o.stderr, "Warning: spec.substituteFrom[%d] (%s %s) is in a cluster, which capstan render does not read; its variables are missing\n", i, ref.Kind, ref.Name)
			}
			for k, v := range spec.Substitute {
				opts.Variables[k] = render.VariableValue(v)
			}
		}
		var decrypter *sops.Decrypter
		if spec.Decryption != nil {
			ids, err := localAgeKeys()
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				return fmt.Errorf("%s decrypts with the age keys of Secret %s, which is in a cluster and which capstan render does not read: "+
					"give the key as sops does, in SOPS_AGE_KEY_FILE, SOPS_AGE_KEY or the sops/age/keys.txt of your configuration folder", file, spec.Decryption.SecretRef.Name)
			}
			decrypter = &sops.Decrypter{IDs: ids}
			opts.Decrypt = decrypter.File
		}
		res, err := render.Render(cmd.Context(), art, nil, opts)
		if err := decrypter.Err(); err != nil {
			return err
		}
		if err != nil {
			return err
		}
		return o.finish(cmd, res, addon, nil)
	}
	fetched := art.Chart
	for i, ref := range spec.ValuesFrom {
		fmt.Fprintf(o.stderr, "Warning: spec.valuesFrom[%d] (%s %s) is in a cluster, which capstan render does not read; its values are missing\n", i, ref.Kind, ref.Name)
	}
	specValues := map[string]any{}
	if spec.Values != nil && len(spec.Values.Raw) > 0 {
		if err := yaml.Unmarshal(spec.Values.Raw, &specValues); err != nil {
			return fmt.Errorf("%s: spec.values is not an object: %w", file, err)
		}
	}
	// --set and --set-string go over spec.values, and are validated with them.
	extra := values.Options{Values: o.values.Values, StringValues: o.values.StringValues}
	set, err := extra.MergeValues(getter.Providers{})
	if err != nil {
		return err
	}
	specValues = loader.MergeMaps(specValues, set)
	composed, err := addonvalues.Compose(addonvalues.Inputs{
		Chart:   fetched.Chart,
		Sources: addonvalues.Sources{Spec: specValues, From: nil},
	})
	if err != nil {
		return err
	}
	vals := composed.Values
	opts.Mask = givenValuesHidden(specValues)
	valuesErrs := composed.Errors
	if o.skipSchema {
		// NOTE: the flag skips values.schema.json; a secret input written
		// in spec.values is Capstan's rule, and Blocks the Addon whatever
		// the flag says.
		valuesErrs = nil
		for _, e := range composed.Errors {
			if e.Rule == "writeOnly" {
				valuesErrs = append(valuesErrs, e)
			}
		}
	}
	if len(valuesErrs) > 0 {
		for _, e := range valuesErrs {
			fmt.Fprintf(o.stderr, "Values error: %s: %s (%s)\n", e.Path, e.Message, e.Rule)
		}
		return fmt.Errorf("%s: %d values break the chart's schema or Capstan's rules; an Addon with them would be Blocked", file, len(valuesErrs))
	}
	res, err := render.Render(cmd.Context(), art, vals, opts)
	if err != nil {
		return err
	}
	return o.finish(cmd, res, addon, fetched.Chart.Metadata)
}

// addonNamespace sets the namespace the Addon file renders for, and the
// Addon's own when the file names none, as kubectl apply would put it in
// --namespace. Without --restricted it is --namespace when given, else
// the Addon's target namespace, else its own, else default. A restricted
// add-on installs into its own namespace, as the controller renders it, so
// --restricted renders for the Addon's namespace, and refuses a
// --namespace that names another.
func (o *renderOptions) addonNamespace(cmd *cobra.Command, file string, addon *capstanv1.Addon) error {
	given := cmd.Flags().Changed("namespace")
	if addon.Namespace == "" {
		addon.Namespace = o.namespace
	}
	if o.restricted {
		if given && o.namespace != addon.Namespace {
			return fmt.Errorf("%s: the Addon is in namespace %s, which a restricted add-on renders for; leave out --namespace %s", file, addon.Namespace, o.namespace)
		}
		o.namespace = addon.Namespace
		return nil
	}
	if !given {
		o.namespace = addon.TargetNamespaceIn(capstanv1.ProfileCluster)
	}
	return nil
}

// renderAccepts says what capstan render -f renders, for the errors that
// refuse a file.
const renderAccepts = "capstan render -f renders an Addon (apiVersion: capstan.dev/v1alpha1, kind: Addon) " +
	"or a definition of a gitops repository (addons/NAME.yaml, with name: and a source: helm:, or git: with url: or path:)"

// specPathNote writes line once, before the first message that names a
// field of an Addon's spec, so that the user of a gitops definition, whose
// fields have other paths, can find the field named.
type specPathNote struct {
	w     io.Writer
	line  string
	noted bool
}

// Write implements io.Writer.
func (n *specPathNote) Write(p []byte) (int, error) {
	if !n.noted && bytes.Contains(p, []byte("spec.")) {
		n.noted = true
		if _, err := io.WriteString(n.w, n.line); err != nil {
			return 0, err
		}
	}
	return n.w.Write(p)
}

// readRenderFile reads the file of capstan render -f, and returns the Addon
// to render, and whether it is the Addon of a gitops definition. Which of the two the file is, it says itself: a Kubernetes
// object has apiVersion and kind, and must be an Addon (decodeAddonFile);
// a definition names its source (namesASource), and becomes the Addon the
// gitops syncer would make of it (addonOfDefinition). Anything else is refused,
// with what the file holds.
func (o *renderOptions) readRenderFile(file string, data []byte) (*capstanv1.Addon, bool, error) {
	docs, err := yamlDocuments(data)
	if err != nil {
		return nil, false, fmt.Errorf("%s is not YAML (%v): %s", file, err, renderAccepts)
	}
	if len(docs) > 1 {
		return nil, false, fmt.Errorf("%s holds %d YAML documents: capstan render -f renders one Addon or definition; put each in a file of its own", file, len(docs))
	}
	if len(docs) == 0 {
		return nil, false, fmt.Errorf("%s is empty: %s", file, renderAccepts)
	}
	var top any
	if err := yaml.Unmarshal(docs[0], &top); err != nil {
		return nil, false, fmt.Errorf("%s is not YAML (%v): %s", file, err, renderAccepts)
	}
	fields, ok := top.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("%s holds %s, not a mapping of fields: %s", file, yamlKind(top), renderAccepts)
	}
	_, hasKind := fields["kind"]
	_, hasAPIVersion := fields["apiVersion"]
	if hasKind || hasAPIVersion {
		addon, err := decodeAddonFile(file, docs[0])
		return addon, false, err
	}
	if namesASource(fields) {
		addon, err := o.addonOfDefinition(file, data)
		return addon, true, err
	}
	keys := slices.Sorted(maps.Keys(fields))
	if len(keys) > 5 {
		keys = append(keys[:5], "...")
	}
	return nil, false, fmt.Errorf("%s holds a mapping of %s, which is neither an Addon (it has no kind) nor a gitops definition (it has no source: no helm:, and no git: with url: or path:): %s; "+
		"if the file holds values, to render a chart, give its release name and path: capstan render NAME CHART -f %s", file, strings.Join(keys, ", "), renderAccepts, file)
}

// namesASource reports whether a mapping is a gitops definition: one that
// names its source, helm: or a git: with url: or path:.
//
// NOTE: name: alone is not enough, nor is a git: that holds neither url
// nor path: chart values often have a top-level name:, or a git: block
// (of a git server's chart, say), and such a file is values to give to a
// chart, not a broken definition.
func namesASource(fields map[string]any) bool {
	if _, ok := fields["helm"]; ok {
		return true
	}
	git, ok := fields["git"].(map[string]any)
	if !ok {
		return false
	}
	_, url := git["url"]
	_, path := git["path"]
	return url || path
}

// yamlKind names what a YAML document that is not a mapping holds.
func yamlKind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case nil:
		return "nothing"
	}
	return "a single value"
}

// yamlDocuments splits a YAML stream into its documents, leaving out the
// empty ones and those of only comments.
func yamlDocuments(data []byte) ([][]byte, error) {
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if j, err := yaml.YAMLToJSON(doc); err == nil && string(j) == "null" {
			continue // an empty document, or only comments
		}
		docs = append(docs, doc)
	}
}

// addonOfDefinition reads a definition of a gitops repository as the
// syncer reads it (gitops.Parse, whose problems name the file and line)
// and converts it to the Addon the syncer applies (Definition.Addon). The
// Addon's namespace is the AddonRepository's, which the file does not
// name: --namespace stands in for it, as for an Addon file without one.
//
// A git.path without git.url is a folder of the gitops repository itself,
// which the syncer fetches at the commit of the definition: here, the git
// checkout that holds the file, at its HEAD commit, checked against that
// commit's tree as the syncer checks it. The working tree is neither
// checked nor rendered: a folder not committed is missing, as it is to
// the syncer, and one committed but not checked out (a sparse checkout)
// renders.
func (o *renderOptions) addonOfDefinition(file string, data []byte) (*capstanv1.Addon, error) {
	def, err := gitops.Parse(file, data)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s is a gitops definition that the syncer would not apply: fix the problems above", err, file)
	}
	origin := gitops.Origin{File: file}
	if def.Git != nil && def.Git.URL == "" {
		root, commit, tree, err := checkoutOf(file)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		if resolved, err := filepath.EvalSymlinks(abs); err == nil {
			abs = resolved
		}
		if rel, err := filepath.Rel(root, abs); err == nil {
			origin.File = filepath.ToSlash(rel)
		}
		if err := gitops.CheckSource(def, origin.File, tree); err != nil {
			return nil, err
		}
		origin.URL, origin.Commit = "file://"+root, commit
		fmt.Fprintf(o.stderr, "Rendering git.path %s of the git checkout %s at its HEAD commit %s, as the syncer renders it at the definition's commit: "+
			"the folder is rendered as committed at HEAD, changes not committed left out; the definition file as it is on disk\n",
			def.Git.Path, root, commit)
	}
	return def.Addon(origin)
}

// checkoutOf returns the root of the git checkout that holds file, its
// HEAD commit, and the tree of that commit.
func checkoutOf(file string) (root, commit string, tree gitops.Tree, err error) {
	notInGit := fmt.Errorf("%s renders git.path, a folder of the gitops repository, but the file is in no git checkout with a commit: "+
		"render the definition in a clone of the gitops repository", file)
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", "", nil, err
	}
	repo, err := git.PlainOpenWithOptions(filepath.Dir(abs), &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return "", "", nil, notInGit
	}
	head, err := repo.Head()
	if err != nil {
		return "", "", nil, notInGit
	}
	c, err := repo.CommitObject(head.Hash())
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: cannot read the HEAD commit %s of its checkout: %w", file, head.Hash(), err)
	}
	t, err := c.Tree()
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: cannot read the tree of the HEAD commit %s of its checkout: %w", file, head.Hash(), err)
	}
	return repositoryRoot(filepath.Dir(abs)), head.Hash().String(), gitops.CommitTree(t), nil
}

// decodeAddonFile reads an Addon file strictly, as kubectl apply does: a
// field the Addon has not (a misspelt spec.value) is an error that names
// it, where a lenient read would drop it and render the chart's defaults.
// A key given twice is an error too. The apiVersion must be the one the
// API server serves Addons at, and a Kubernetes object of another kind is
// refused, named.
func decodeAddonFile(file string, doc []byte) (*capstanv1.Addon, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		if _, lenient := yaml.YAMLToJSON(doc); lenient == nil {
			// NOTE: only the strict read failed: a key given twice.
			return nil, fmt.Errorf("%s: %w: give each field once", file, err)
		}
		return nil, fmt.Errorf("%s is not an Addon: %s", file, renderAccepts)
	}
	var meta struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := json.Unmarshal(j, &meta); err != nil || meta.Kind != "Addon" {
		what := "an object with no kind"
		if k, ok := meta.Kind.(string); ok && k != "" {
			what = "a " + k
			if v, ok := meta.APIVersion.(string); ok && v != "" {
				what += " (" + v + ")"
			}
		}
		return nil, fmt.Errorf("%s holds %s, not an Addon: %s; to render a chart, give its release name and path: capstan render NAME CHART", file, what, renderAccepts)
	}
	addon := &capstanv1.Addon{}
	strictErrs, err := sigsjson.UnmarshalStrict(j, addon)
	if err != nil {
		return nil, fmt.Errorf("%s is not an Addon (%v): fix the field named", file, err)
	}
	if want := capstanv1.GroupVersion.String(); addon.APIVersion != want {
		return nil, fmt.Errorf("%s: apiVersion is %q; an Addon's is %s", file, addon.APIVersion, want)
	}
	if len(strictErrs) == 0 {
		return addon, nil
	}
	msgs := make([]string, len(strictErrs))
	for i, e := range strictErrs {
		msgs[i] = e.Error()
	}
	return nil, fmt.Errorf("%s: %s: the Addon has no such field, and the API server would refuse or drop it; fix its spelling and indentation (spec.values, spec.chart, ...)",
		file, strings.Join(msgs, "; "))
}

// print writes the objects, then the hooks if asked, as helm template does.
func (o *renderOptions) print(res *render.Result) error {
	var buf bytes.Buffer
	for _, obj := range res.Objects {
		if err := writeDocument(&buf, obj, ""); err != nil {
			return err
		}
	}
	for _, h := range res.Hooks {
		if !h.Runnable() {
			// NOTE: a folder's hook of no phase Capstan runs is in the
			// render's notices, printed first.
			if len(h.UnknownEvents) > 0 {
				fmt.Fprintf(o.stderr, "Warning: hook %s %s (%s) names hook events Helm does not know (%s); it is left out and never run\n",
					h.Object.GetKind(), h.Object.GetName(), h.Template, strings.Join(quoteAll(h.UnknownEvents), ", "))
			}
			continue
		}
		if o.showHooks && !h.TestOnly() {
			// NOTE: as helm template --skip-tests: the tests run only when
			// asked (capstan addon test).
			if err := writeDocument(&buf, h.Object, h.Template); err != nil {
				return err
			}
		}
	}
	_, err := o.stdout.Write(buf.Bytes())
	return err
}

// writeDocument writes one object as a YAML document, after a comment that
// names the template file it came from, if any.
//
// NOTE: the file name is the chart's, and Helm's loader takes any name an
// archive holds. Written raw, a newline in it would end the comment and
// put documents of the chart author's choosing into the stream, which no
// guardrail checked (--restricted saw only the real objects), and an
// escape would reach the terminal past the manifests. Such a name is
// written quoted, so that the comment stays one line of printable text.
func writeDocument(w io.Writer, obj *unstructured.Unstructured, source string) error {
	data, err := marshalObject(obj.Object)
	if err != nil {
		return fmt.Errorf("write %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	fmt.Fprintln(w, "---")
	if source != "" {
		fmt.Fprintf(w, "# Source: %s\n", commentText(source))
	}
	_, err = w.Write(data)
	return err
}

// commentText is s as it may stand in a one-line YAML comment: s itself
// when it is valid UTF-8 without a control character or a line or
// paragraph separator (which YAML 1.1 reads as line breaks), else s
// quoted as a Go string, whose escapes (\n, \x1b, \xff) are printable.
func commentText(s string) string {
	breaks := func(r rune) bool { return unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) }
	if utf8.ValidString(s) && !strings.ContainsFunc(s, breaks) {
		return s
	}
	return strconv.Quote(s)
}

// marshalObject returns the YAML that sigs.k8s.io/yaml.Marshal gives for
// obj, in less than half the time. That Marshal encodes to JSON, decodes the
// JSON with the YAML decoder and encodes the result with the YAML encoder;
// for the printed objects, the JSON round trip was most of `capstan render`'s
// time. For maps, lists, strings of valid UTF-8, int64s, bools and nulls it
// gives the encoder back values that encode as the originals do, so obj
// goes to the same encoder directly. An object with any other value takes
// the round trip.
//
// NOTE: floats are why: the JSON text of a float can come back as another
// type (1.5e19 is written out in full, read back as an unsigned integer and
// printed as 15000000000000000000, where the encoder prints the float as
// 1.5e+19). json.Marshal also replaces invalid UTF-8, which the encoder
// would print as !!binary.
func marshalObject(obj map[string]any) ([]byte, error) {
	if !encodesAsJSON(obj) {
		return yaml.Marshal(obj)
	}
	return yamlv2.Marshal(obj)
}

// encodesAsJSON reports whether v holds only values that come back from the
// JSON round trip of sigs.k8s.io/yaml.Marshal as they went in.
func encodesAsJSON(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if !utf8.ValidString(k) || !encodesAsJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !encodesAsJSON(e) {
				return false
			}
		}
		return true
	case string:
		return utf8.ValidString(v)
	case int64, bool, nil:
		return true
	}
	return false
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// givenValuesHidden masks, in a chart's required and fail messages, every
// string the user gave: capstan render knows no Secret and no schema may
// mark them all, and its output often lands in a CI log. The chart's own
// words, and its defaults, still show.
func givenValuesHidden(given map[string]any) func(string) string {
	return mask.New(mask.Strings(given)).String
}

// localAgeKeys are the age keys sops itself would use: SOPS_AGE_KEY_FILE,
// SOPS_AGE_KEY, and sops/age/keys.txt in the user's configuration folder.
func localAgeKeys() ([]age.Identity, error) {
	var ids []age.Identity
	add := func(name string, data []byte) error {
		found, err := sops.ParseKeys(name, data)
		if err != nil {
			return err
		}
		ids = append(ids, found...)
		return nil
	}
	if file := os.Getenv("SOPS_AGE_KEY_FILE"); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("SOPS_AGE_KEY_FILE: %w", err)
		}
		if err := add("SOPS_AGE_KEY_FILE", data); err != nil {
			return nil, err
		}
	}
	if key := os.Getenv("SOPS_AGE_KEY"); key != "" {
		if err := add("SOPS_AGE_KEY", []byte(key)); err != nil {
			return nil, err
		}
	}
	if dir, err := os.UserConfigDir(); err == nil {
		file := filepath.Join(dir, "sops", "age", "keys.txt")
		if data, err := os.ReadFile(file); err == nil {
			if err := add(file, data); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}
