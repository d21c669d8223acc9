// Package catalog is what "Add from the catalog" offers: a few well-known
// add-ons with their chart, a default namespace and typed fields at dotted
// value paths, and the entries an operator adds without rebuilding Capstan,
// as ConfigMaps.
package catalog

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Label marks a ConfigMap, in the controller's namespace, whose key
// EntryKey holds one catalog entry as YAML.
const (
	Label    = "capstan.dev/catalog"
	EntryKey = "entry.yaml"
)

// Entry is one add-on the catalog offers.
type Entry struct {
	// ID names the entry in links: lower-case letters, digits and dashes.
	ID string `json:"id"`
	// Title and Description are shown on the card.
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Chart is the chart to install; empty for "any Helm chart" and for a
	// git folder, which the person names.
	Chart *capstanv1.ChartSource `json:"chart,omitempty"`
	// Kind is "chart" (the default), "any-chart" or "git-folder".
	Kind string `json:"kind,omitempty"`
	// Namespace is the namespace the form suggests.
	Namespace string `json:"namespace,omitempty"`
	// Fields are the typed values the form asks for.
	Fields []Field `json:"fields,omitempty"`
	// Source says where the entry comes from: "built-in" or the ConfigMap.
	Source string `json:"-"`
}

// Field is one typed value of an entry, at a dotted values path.
type Field struct {
	Path        string `json:"path"`
	Label       string `json:"label"`
	Type        string `json:"type"` // string, integer, number or boolean
	Default     string `json:"default,omitempty"`
	Description string `json:"description,omitempty"`
}

// BuiltIn are the entries every Capstan offers.
var BuiltIn = []Entry{
	{ID: "longhorn", Title: "Longhorn", Description: "Distributed block storage for Kubernetes.",
		Chart: &capstanv1.ChartSource{Repo: "https://charts.longhorn.io/", Name: "longhorn", Version: "1.10.2"}, Namespace: "longhorn-system",
		Fields: []Field{
			{Path: "persistence.defaultClassReplicaCount", Label: "Replicas of each volume", Type: "integer", Default: "3"},
			{Path: "persistence.defaultClass", Label: "Make it the default StorageClass", Type: "boolean", Default: "true"},
			{Path: "defaultSettings.defaultDataPath", Label: "Data path on each node", Type: "string", Default: "/var/lib/longhorn/"},
		}},
	{ID: "hajimari", Title: "Hajimari", Description: "A start page that lists the cluster's apps.",
		Chart: &capstanv1.ChartSource{Repo: "https://hajimari.io/", Name: "hajimari", Version: "2.0.2"}, Namespace: "hajimari",
		Fields: []Field{
			{Path: "hajimari.title", Label: "Title", Type: "string", Default: "Hajimari"},
			{Path: "hajimari.defaultEnable", Label: "Show every Ingress by default", Type: "boolean", Default: "false"},
		}},
	{ID: "uptime-kuma", Title: "Uptime Kuma", Description: "Status checks and a status page.",
		Chart: &capstanv1.ChartSource{Repo: "https://helm.irsigler.cloud/", Name: "uptime-kuma", Version: "2.21.2"}, Namespace: "uptime-kuma",
		Fields: []Field{
			{Path: "volume.size", Label: "Volume size", Type: "string", Default: "4Gi"},
			{Path: "image.tag", Label: "Image tag", Type: "string"},
		}},
	{ID: "cloudnative-pg", Title: "CloudNativePG", Description: "The PostgreSQL operator.",
		Chart: &capstanv1.ChartSource{Repo: "https://cloudnative-pg.github.io/charts/", Name: "cloudnative-pg", Version: "0.26.0"}, Namespace: "cnpg-system",
		Fields: []Field{
			{Path: "replicaCount", Label: "Operator replicas", Type: "integer", Default: "1"},
			{Path: "monitoring.podMonitorEnabled", Label: "PodMonitor for Prometheus", Type: "boolean", Default: "false"},
		}},
	{ID: "any-chart", Kind: "any-chart", Title: "Any Helm chart", Description: "A chart from a link: its form is built from its values.schema.json."},
	{ID: "git-folder", Kind: "git-folder", Title: "Manifests from a git folder", Description: "A kustomization, or plain YAML files, from a folder of a git repository."},
}

var idRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

var (
	ociRE       = regexp.MustCompile(`^oci://[^/]+/.+`)
	digestRE    = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	chartNameRE = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]*$`)
)

// The bounds the Addon's schema sets on spec.chart (the markers of
// api/v1alpha1's ChartSource and LocalObjectReference), in characters:
// the API server refuses an Addon past any of them.
const (
	// maxAddress bounds chart.repo, chart.oci and chart.url.
	maxAddress = 2048
	maxVersion = 128
	// maxName bounds chart.name and the name of a secretRef.
	maxName = 253
)

var fieldTypes = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true}

// Validate says what is wrong with an entry, for the operator who wrote it.
func (e Entry) Validate() error {
	if !idRE.MatchString(e.ID) {
		return fmt.Errorf("id %q: use lower-case letters, digits and dashes", e.ID)
	}
	if e.Title == "" {
		return fmt.Errorf("entry %s: give it a title", e.ID)
	}
	if e.Namespace != "" {
		if errs := validation.IsDNS1123Label(e.Namespace); len(errs) > 0 {
			return fmt.Errorf("entry %s: namespace %q: %s", e.ID, e.Namespace, strings.Join(errs, "; "))
		}
	}
	switch e.Kind {
	case "", "chart":
		if e.Chart == nil {
			return fmt.Errorf("entry %s: name its chart (chart.repo with chart.name, chart.oci or chart.url)", e.ID)
		}
		if msg := chartProblem(e.Chart); msg != "" {
			return fmt.Errorf("entry %s: %s", e.ID, msg)
		}
	case "git-folder":
		// NOTE: the form of a git folder asks for the repository, folder
		// and revision, and builds no values: a chart or fields would be
		// shown and what the person typed in them dropped.
		if e.Chart != nil {
			return fmt.Errorf("entry %s: a git-folder entry takes no chart: the person names the git repository, folder and revision in the form; take chart out", e.ID)
		}
		if len(e.Fields) > 0 {
			return fmt.Errorf("entry %s: a git-folder entry takes no fields: a folder has no values, and its variables come from the Addon's spec.substitute, set once it is added; take fields out", e.ID)
		}
	case "any-chart":
		if e.Chart != nil {
			return fmt.Errorf("entry %s: an any-chart entry takes no chart: the person gives the chart's link on \"Add from a chart link\"; take chart out, or make it a chart entry", e.ID)
		}
		if len(e.Fields) > 0 {
			return fmt.Errorf("entry %s: an any-chart entry takes no fields: its form is built from the chart's values.schema.json; take fields out, or make it a chart entry with its chart", e.ID)
		}
	default:
		return fmt.Errorf("entry %s: kind %q is not chart, any-chart or git-folder", e.ID, e.Kind)
	}
	for i, f := range e.Fields {
		if strings.TrimSpace(f.Label) == "" {
			return fmt.Errorf("entry %s: fields[%d] (path %q) needs a label, the name the form shows beside its input", e.ID, i, f.Path)
		}
		if f.Path == "" || !fieldTypes[f.Type] {
			return fmt.Errorf("entry %s: %s needs a path and a type of string, integer, number or boolean", e.ID, fieldName(i, f))
		}
		if msg := defaultProblem(f); msg != "" {
			return fmt.Errorf("entry %s: %s: %s", e.ID, fieldName(i, f), msg)
		}
		if slices.Contains(strings.Split(f.Path, "."), "") {
			return fmt.Errorf("entry %s: %s: path %q has an empty part: give value keys separated by single dots, such as persistence.size", e.ID, fieldName(i, f), f.Path)
		}
	}
	// NOTE: the form writes each field's value at its path, one after the
	// other, and names its input after the path: two fields at one path,
	// or one inside the other's value, would lose one of the two values.
	for i, f := range e.Fields {
		for j, g := range e.Fields[:i] {
			if f.Path == g.Path || strings.HasPrefix(f.Path, g.Path+".") || strings.HasPrefix(g.Path, f.Path+".") {
				return fmt.Errorf("entry %s: %s and %s: the paths %q and %q overlap, so one value would replace the other: give each field a path of its own, neither inside the other", e.ID, fieldName(j, g), fieldName(i, f), g.Path, f.Path)
			}
		}
	}
	return nil
}

// fieldName names the field at index i of an entry's fields in a message:
// by index and label, as labels may be shared.
func fieldName(i int, f Field) string {
	return fmt.Sprintf("fields[%d] (%q)", i, f.Label)
}

// chartProblem says why the API server would refuse an Addon with chart c,
// by the rules of the Addon's schema, or "" when it would not: the form
// would otherwise offer an entry that can never be added.
func chartProblem(c *capstanv1.ChartSource) string {
	sources := 0
	for _, set := range []bool{c.Repo != "", c.OCI != "", c.URL != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		return "name its chart (chart.repo with chart.name, chart.oci or chart.url)"
	case sources > 1:
		return "set exactly one of chart.repo (with chart.name), chart.oci or chart.url"
	case (c.Repo != "") != (c.Name != ""):
		return "chart.name is required with chart.repo, and only with it"
	case c.Repo != "" && !strings.HasPrefix(c.Repo, "https://"), c.URL != "" && !strings.HasPrefix(c.URL, "https://"):
		return "chart.repo and chart.url are https addresses"
	case c.OCI != "" && !ociRE.MatchString(c.OCI):
		return "chart.oci is an oci:// reference, such as oci://ghcr.io/org/charts/name"
	case c.URL != "" && c.Version != "":
		return "chart.version cannot be set with chart.url: the archive is the version"
	case c.OCI != "" && c.Version == "" && c.Digest == "":
		return "chart.oci needs a chart.version (a tag) or a chart.digest"
	case c.Digest != "" && !digestRE.MatchString(c.Digest):
		return "chart.digest is \"sha256:\" and 64 lower-case hex digits"
	case c.Name != "" && (!chartNameRE.MatchString(c.Name) || tooLong(c.Name, maxName)):
		return fmt.Sprintf("chart.name is the chart's name in the repository: a letter or digit, then letters, digits, '-', '_' or '.', at most %d characters", maxName)
	case tooLong(c.Repo, maxAddress), tooLong(c.OCI, maxAddress), tooLong(c.URL, maxAddress):
		return fmt.Sprintf("chart.repo, chart.oci and chart.url are at most %d characters", maxAddress)
	case tooLong(c.Version, maxVersion):
		return fmt.Sprintf("chart.version is at most %d characters", maxVersion)
	case c.SecretRef != nil && badName(c.SecretRef.Name):
		return fmt.Sprintf("chart.secretRef.name names a Secret: give one, at most %d characters", maxName)
	}
	return verifyProblem(c.Verify)
}

// verifyProblem says why the API server would refuse chart.verify v, or
// "" when it would not: it takes exactly one of provenance or cosign,
// each naming the Secret of its keys.
func verifyProblem(v *capstanv1.ChartVerification) string {
	switch {
	case v == nil:
		return ""
	case (v.Provenance != nil) == (v.Cosign != nil):
		return "chart.verify takes exactly one of provenance (a chart repository or https archive) or cosign (an OCI registry)"
	case v.Provenance != nil && badName(v.Provenance.SecretRef.Name):
		return fmt.Sprintf("chart.verify.provenance.secretRef.name names the Secret of the keyring: give one, at most %d characters", maxName)
	case v.Cosign != nil && badName(v.Cosign.SecretRef.Name):
		return fmt.Sprintf("chart.verify.cosign.secretRef.name names the Secret of the public keys: give one, at most %d characters", maxName)
	}
	return ""
}

// tooLong reports whether s has more than limit characters, as the API
// server counts a string's length: in characters, not bytes.
func tooLong(s string, limit int) bool {
	return utf8.RuneCountInString(s) > limit
}

// badName reports whether a secretRef's name is one the schema refuses:
// empty, or longer than maxName.
func badName(name string) bool {
	return name == "" || tooLong(name, maxName)
}

// defaultProblem says why a field's default is not a value of its type, as
// the form reads it, or "" when it is.
func defaultProblem(f Field) string {
	if f.Default == "" {
		return ""
	}
	switch f.Type {
	case "integer":
		if _, err := strconv.ParseInt(f.Default, 10, 64); err != nil {
			return fmt.Sprintf("default %q is not an integer", f.Default)
		}
	case "number":
		if v, err := strconv.ParseFloat(f.Default, 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprintf("default %q is not a finite number", f.Default)
		}
	case "boolean":
		// NOTE: the form ticks a box whose default is exactly "true"; True
		// or 1 would show it unticked.
		if f.Default != "true" && f.Default != "false" {
			return fmt.Sprintf("default %q is not true or false", f.Default)
		}
	}
	return ""
}

// Problem is an operator's entry that could not be read.
type Problem struct{ ConfigMap, Message string }

// Entries are the built-in entries and those of the ConfigMaps labelled
// Label in namespace, sorted by title, then ID, so that entries of one
// title keep their place from one read to the next. An entry that cannot be
// read is reported, not offered; one that reuses a built-in ID replaces the
// built-in one, and one that reuses the ID of another ConfigMap's entry is
// reported, and the ConfigMap first by name keeps it.
func Entries(ctx context.Context, c client.Reader, namespace string) ([]Entry, []Problem, error) {
	byID := map[string]Entry{}
	for _, e := range BuiltIn {
		e.Source = "built-in"
		byID[e.ID] = e
	}
	var problems []Problem
	if c != nil {
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{Label: "true"}); err != nil {
			return nil, nil, fmt.Errorf("listing the catalog's ConfigMaps in %s: %w", namespace, err)
		}
		slices.SortFunc(list.Items, func(a, b corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
		givenBy := map[string]string{} // an operator entry's ID: its ConfigMap
		for _, cm := range list.Items {
			data, ok := cm.Data[EntryKey]
			if !ok {
				problems = append(problems, Problem{ConfigMap: cm.Name, Message: "it has no key " + EntryKey + ": put the entry there, as YAML"})
				continue
			}
			var e Entry
			if err := yaml.UnmarshalStrict([]byte(data), &e); err != nil {
				problems = append(problems, Problem{ConfigMap: cm.Name, Message: "its " + EntryKey + " is not an entry: " + err.Error()})
				continue
			}
			if err := e.Validate(); err != nil {
				problems = append(problems, Problem{ConfigMap: cm.Name, Message: err.Error()})
				continue
			}
			if first, ok := givenBy[e.ID]; ok {
				problems = append(problems, Problem{ConfigMap: cm.Name,
					Message: fmt.Sprintf("id %s is also given by ConfigMap %s, whose entry is offered: each entry needs an id of its own", e.ID, first)})
				continue
			}
			givenBy[e.ID] = cm.Name
			e.Source = "ConfigMap " + cm.Name
			byID[e.ID] = e
		}
	}
	out := make([]Entry, 0, len(byID))
	for _, e := range byID {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Title, b.Title), strings.Compare(a.ID, b.ID))
	})
	return out, problems, nil
}
