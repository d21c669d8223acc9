package render

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	"capstan.dev/capstan/internal/source"
)

// notesSuffix names the files Helm renders as release notes and never applies.
const notesSuffix = "NOTES.txt"

// Helm renders a chart as `helm template --include-crds` does, client-only
// and in memory: values are the user's final values, which Helm coalesces
// over the chart's defaults; lookup returns nothing; NOTES.txt is dropped;
// hooks come back apart, the chart's tests among them (Hook.IsTest), which
// run only when asked: a caller that runs hooks with a sync leaves out
// those for which Hook.TestOnly is true. The chart is not
// changed, so one loaded chart can be rendered many times, also at once.
//
// Helm's own values.schema.json check does not run here: the values package
// validates values against the same schema before they get here, and Helm's
// check would fetch the schema's http(s) and file:// references without the
// fetch guard. A template error is a *TemplateError, which holds the template
// file, line and column, and the chart's own message only through
// opts.Mask.
func Helm(ctx context.Context, ch *chartv2.Chart, values map[string]any, opts Options) (*Result, error) {
	res, err := helm(ctx, ch, values, opts)
	if err != nil {
		return nil, err
	}
	id := opts.Source
	if id == (SourceIdentity{}) && ch.Metadata != nil {
		id = SourceIdentity{Name: ch.Name(), Version: ch.Metadata.Version}
	}
	res.Hash, err = Hash(id, values, opts.ReleaseName, opts.Namespace)
	if err != nil {
		return nil, err
	}
	res.Upgrade = opts.Upgrade
	return res, nil
}

// helm renders a chart, without the hash.
func helm(ctx context.Context, ch *chartv2.Chart, values map[string]any, opts Options) (*Result, error) {
	if ch == nil || ch.Metadata == nil {
		return nil, errors.New("render: the chart is empty: load it with its Chart.yaml")
	}
	if err := chartutil.ValidateReleaseName(opts.ReleaseName); err != nil {
		return nil, fmt.Errorf("render: release name %q: %w", opts.ReleaseName, err)
	}
	if opts.Namespace == "" {
		return nil, errors.New("render: no namespace given: a chart is rendered for a release namespace")
	}
	if t := ch.Metadata.Type; t != "" && t != "application" {
		return nil, fmt.Errorf("render: chart %s is a %s chart, which cannot be installed: render the chart that depends on it", ch.Name(), t)
	}
	// NOTE: Helm 4's install and upgrade take only charts of API v1 and
	// v2; its loader reads a v3 chart (still experimental) into another
	// type and refuses any other. Helm's v2 loader, which Capstan uses,
	// reads any apiVersion as v2, and an empty one as v1.
	switch v := ch.Metadata.APIVersion; v {
	case "", chartv2.APIVersionV1, chartv2.APIVersionV2:
	default:
		return nil, fmt.Errorf("render: chart %s has Chart.yaml apiVersion %q, which Helm 4 cannot install (only %s and %s): use a chart of apiVersion %s",
			ch.Name(), v, chartv2.APIVersionV1, chartv2.APIVersionV2, chartv2.APIVersionV2)
	}
	caps, err := opts.Capabilities.helm()
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("render: chart %s requires Kubernetes %s, and the cluster runs %s: pick a chart version for this cluster",
			ch.Name(), kv, caps.KubeVersion.Version)
	}
	if missing := missingDependencies(ch); len(missing) > 0 {
		return nil, fmt.Errorf("render: chart %s lists dependencies that are not in its charts/ folder: %s: package the chart with them (helm dependency build)",
			ch.Name(), strings.Join(missing, ", "))
	}
	if values == nil {
		values = map[string]any{}
	}

	var out *templateOutput
	if opts.Sandbox != nil {
		out, err = opts.Sandbox.execute(ctx, ch, values, opts)
	} else {
		out, err = executeTemplates(ctx, ch, values, opts)
	}
	if err != nil {
		return nil, maskChartMessage(err, opts.Mask)
	}
	return decodeOutput(out, ch.Name(), opts)
}

// decodeOutput turns a chart's output into its objects and hooks, after
// its documents are counted against opts.MaxObjects.
func decodeOutput(out *templateOutput, chart string, opts Options) (*Result, error) {
	files := out.Files
	docs, err := documentsOf(out, chart, opts.MaxObjects)
	if err != nil {
		return nil, err
	}
	// decoded counts the objects decoded, a List's items each: a List
	// is one document of many objects.
	decoded := 0
	tooMany := func(n int) error {
		if decoded += n; opts.MaxObjects > 0 && decoded > opts.MaxObjects {
			return &LimitError{Chart: chart, Bound: "objects", Objects: opts.MaxObjects}
		}
		return nil
	}

	res := &Result{}
	written := newSources(opts.Namespace)
	for _, crd := range out.CRDs {
		objs, err := decodeFile(crd.Name, string(crd.Data))
		if err != nil {
			return nil, err
		}
		if err := tooMany(len(objs)); err != nil {
			return nil, err
		}
		for _, o := range objs {
			first, err := written.addCRD(o, crd.Name)
			if err != nil {
				return nil, err
			}
			if first != "" {
				res.Notices = append(res.Notices, Notice{Path: crd.Name, Message: fmt.Sprintf(
					"the CustomResourceDefinition %s is in %s too: that copy is applied and this one left out, as helm install keeps the first it installs",
					o.GetName(), first)})
				continue
			}
			res.Objects = append(res.Objects, o)
		}
	}
	var manifests []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for i, doc := range docs[name] {
			objs, list, err := decodeCached([]byte(doc))
			if err != nil {
				return nil, yamlError(name, i+1, err)
			}
			if err := tooMany(len(objs)); err != nil {
				return nil, err
			}
			installed, err := asInstalled(doc, objs)
			if err != nil {
				return nil, yamlError(name, i+1, err)
			}
			if list != nil {
				// NOTE: a List never reaches the API server, only its
				// items; Helm reads its own annotations into strings,
				// a weight of 5 as "5", and so does Capstan.
				list = withStringAnnotations(list)
				if err := checkAnnotations(list); err != nil {
					return nil, yamlError(name, i+1, err)
				}
			}
			for j, obj := range objs {
				if err := CheckMetadata(obj); err != nil {
					te := yamlError(name, i+1, err)
					te.Problem = err.Error()
					return nil, te
				}
				// NOTE: Helm's manifest sorter reads a List document's
				// own metadata, not its items': a List that is a hook
				// makes every item one of its events, and the items of
				// one that is not are manifests, hook annotations or not.
				head := obj
				if list != nil {
					head = list
				}
				if h, ok := parseHook(head, name); ok {
					// NOTE: test hooks too: they run only when a person
					// or spec.test asks (TestEvent), never with a sync.
					h.Object, h.List = obj, list != nil
					res.Hooks = append(res.Hooks, h)
					continue
				}
				if err := written.add(obj, fmt.Sprintf("%s (document %d)", name, i+1)); err != nil {
					return nil, err
				}
				manifests = append(manifests, installed[j])
			}
		}
	}
	rank := kindRank(releaseutil.InstallOrder)
	slices.SortStableFunc(manifests, func(a, b *unstructured.Unstructured) int {
		return compareKinds(rank, a.GetKind(), b.GetKind())
	})
	slices.SortStableFunc(res.Hooks, func(a, b Hook) int {
		return compareKinds(rank, a.Object.GetKind(), b.Object.GetKind())
	})
	res.Objects = append(res.Objects, manifests...)
	return res, nil
}

// documentsOf splits each template's output that is applied into its
// documents, and counts the documents that hold more than comments, with the CRD
// files', against max (none when max is zero): more is a *LimitError,
// before any document is decoded. A template of a kilobyte can loop out
// hundreds of thousands of tiny objects, and decoding each costs far more
// than splitting it off.
func documentsOf(out *templateOutput, chart string, max int) (map[string][]string, error) {
	docs := make(map[string][]string, len(out.Files))
	n := 0
	count := func(d []string) error {
		for _, doc := range d {
			if holdsContent([]byte(doc)) {
				n++
			}
		}
		if max > 0 && n > max {
			return &LimitError{Chart: chart, Bound: "objects", Objects: max}
		}
		return nil
	}
	for _, crd := range out.CRDs {
		if err := count(helmDocuments(string(crd.Data))); err != nil {
			return nil, err
		}
	}
	for name, content := range out.Files {
		if strings.HasSuffix(name, notesSuffix) || strings.HasPrefix(path.Base(name), "_") || strings.TrimSpace(content) == "" {
			continue
		}
		docs[name] = helmDocuments(content)
		if err := count(docs[name]); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// templateOutput is what a chart's templates produce: each template's
// output by its name, and the CRD files of the chart and of its enabled
// subcharts, each named as Helm names it.
type templateOutput struct {
	Files map[string]string
	CRDs  []*common.File
}

// executeTemplates runs a chart's templates for values, in this process.
// It is the part of a render whose time and memory the chart decides, so a
// Sandbox runs it in a worker process instead; everything before and after
// it is bounded by the chart's size.
func executeTemplates(ctx context.Context, ch *chartv2.Chart, values map[string]any, opts Options) (*templateOutput, error) {
	caps, err := opts.Capabilities.helm()
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	// NOTE: Helm's dependency processing disables subcharts, renames aliased
	// ones and imports values by changing the chart in place; it works on a
	// copy so that a cached chart stays as it was loaded.
	c := source.CloneChart(ch)
	if err := chartutil.ProcessDependencies(c, values); err != nil {
		return nil, fmt.Errorf("render: chart %s: resolve its dependencies: %w", ch.Name(), err)
	}
	if opts.Capabilities != nil && opts.Capabilities.ExactAPIVersions {
		// NOTE: `helm install` applies crds/ before it reads the cluster's
		// capabilities, so a template that checks for the chart's own
		// CRD finds it on the first install. Capstan applies crds/ with the
		// rest, after the render, so their APIs are added here when the
		// capabilities are a cluster's; `helm template` adds none.
		caps.APIVersions = append(caps.APIVersions, crdAPIVersions(c.CRDObjects())...)
	}
	release := common.ReleaseOptions{
		Name:      opts.ReleaseName,
		Namespace: opts.Namespace,
		Revision:  1,
		IsInstall: !opts.Upgrade,
		IsUpgrade: opts.Upgrade,
	}
	top, err := commonutil.ToRenderValuesWithSchemaValidation(c, values, release, caps, true)
	if err != nil {
		return nil, fmt.Errorf("render: chart %s: merge the values over the chart's defaults: %w", ch.Name(), err)
	}
	e := engine.Engine{CustomTemplateFuncs: templateFuncs()}
	files, err := e.RenderWithContext(ctx, c, top)
	if err != nil {
		return nil, redactTemplateError(err, templateNames(c))
	}
	out := &templateOutput{Files: files}
	for _, crd := range c.CRDObjects() {
		out.CRDs = append(out.CRDs, &common.File{Name: crd.Filename, Data: crd.File.Data})
	}
	return out, nil
}

// ChartValues resolves a chart's dependencies for vals (conditions, tags,
// aliases and import-values) and returns the resolved chart and the values
// its templates would see as .Values: vals coalesced over the chart's
// defaults. It is what Helm checks against the values.schema.json of the
// chart and of each enabled subchart. ch is not changed.
func ChartValues(ch *chartv2.Chart, vals map[string]any) (*chartv2.Chart, map[string]any, error) {
	if vals == nil {
		vals = map[string]any{}
	}
	c := source.CloneChart(ch)
	if err := chartutil.ProcessDependencies(c, vals); err != nil {
		return nil, nil, fmt.Errorf("render: chart %s: resolve its dependencies: %w", ch.Name(), err)
	}
	coalesced, err := commonutil.CoalesceValues(c, vals)
	if err != nil {
		return nil, nil, fmt.Errorf("render: chart %s: merge the values over the chart's defaults: %w", ch.Name(), err)
	}
	return c, coalesced, nil
}

// keepChomping finds a YAML block scalar that keeps its final line
// breaks (|+ or >+, with or without an indentation indicator).
var keepChomping = regexp.MustCompile(`[|>][1-9]?\+[ \t]*(#.*)?\n`)

// asInstalled returns the objects of a template's document as helm install
// applies them. Helm joins the documents into the release manifest, each
// followed by a line break, and parses that: a block scalar that keeps its
// final line breaks (|+) at the end of a document gains one. Hooks are
// parsed from the document alone, and keep what it has. Only a document
// with such a scalar is parsed again.
func asInstalled(doc string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	// NOTE: the pattern has no literal prefix, so Go's regexp tries it at
	// every byte: on a 330-object chart that was 7% of a cold render. Every
	// match has a '+', and few documents do.
	if !strings.Contains(doc, "+") || !keepChomping.MatchString(doc) {
		return objs, nil
	}
	installed, _, err := decodeCached([]byte(doc + "\n"))
	if err != nil {
		return nil, err
	}
	if len(installed) != len(objs) {
		return objs, nil
	}
	return installed, nil
}

// decodeFile decodes every document of a rendered file, in order.
func decodeFile(name, content string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i, doc := range helmDocuments(content) {
		objs, _, err := decodeCached([]byte(doc))
		if err != nil {
			return nil, yamlError(name, i+1, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// missingDependencies lists the dependencies of Chart.yaml that the chart
// does not carry, as Helm's action.CheckDependencies does before `helm template`.
func missingDependencies(c *chartv2.Chart) []string {
	var missing []string
	for _, d := range c.Metadata.Dependencies {
		if d == nil {
			continue
		}
		if !slices.ContainsFunc(c.Dependencies(), func(sub *chartv2.Chart) bool { return sub.Name() == d.Name }) {
			missing = append(missing, d.Name)
		}
	}
	return missing
}

// templateNames lists every template of the chart and its subcharts as
// Helm's engine names them, and every CRD file: the only names a redacted
// error may carry.
func templateNames(c *chartv2.Chart) map[string]bool {
	names := map[string]bool{}
	var walk func(*chartv2.Chart)
	walk = func(c *chartv2.Chart) {
		for _, t := range c.Templates {
			if t != nil {
				names[path.Join(c.ChartFullPath(), t.Name)] = true
			}
		}
		for _, d := range c.Dependencies() {
			walk(d)
		}
	}
	walk(c)
	return names
}
