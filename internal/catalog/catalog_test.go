package catalog

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/config"
)

func TestBuiltInEntriesAreValid(t *testing.T) {
	for _, e := range BuiltIn {
		if err := e.Validate(); err != nil {
			t.Errorf("built-in entry %s: %v", e.ID, err)
		}
	}
}

func TestOperatorEntries(t *testing.T) {
	cm := func(name, entry string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: name, Labels: map[string]string{Label: "true"}},
			Data: map[string]string{EntryKey: entry}}
	}
	c := fake.NewClientBuilder().WithObjects(
		cm("grafana", "id: grafana\ntitle: Grafana\nchart: {repo: 'https://grafana.github.io/helm-charts', name: grafana, version: 10.1.0}\nfields: [{path: replicas, label: Replicas, type: integer}]\n"),
		cm("broken", "id: Broken!\ntitle: x\n"),
		cm("typo", "id: typo\ntitel: Typo\n"),
		cm("longhorn", "id: longhorn\ntitle: Longhorn (our mirror)\nchart: {url: 'https://mirror.example/longhorn-1.10.2.tgz'}\n"),
		cm("apps", "id: apps\ntitle: Apps\nkind: git-folder\nfields: [{path: replicas, label: Replicas, type: integer}]\n"),
	).Build()
	entries, problems, err := Entries(context.Background(), c, "capstan-system")
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]string{}
	for _, e := range entries {
		titles[e.ID] = e.Title + " / " + e.Source
	}
	if titles["grafana"] != "Grafana / ConfigMap grafana" || titles["longhorn"] != "Longhorn (our mirror) / ConfigMap longhorn" || titles["hajimari"] == "" {
		t.Errorf("entries = %v; want the operator's added, the built-in Longhorn replaced, the others kept", titles)
	}
	if _, offered := titles["apps"]; offered {
		t.Errorf("the git-folder entry with fields is offered; want it reported: its form would drop what is typed in them")
	}
	var all string
	for _, p := range problems {
		all += p.ConfigMap + ": " + p.Message + "\n"
	}
	if len(problems) != 3 || !strings.Contains(all, "lower-case") || !strings.Contains(all, "titel") ||
		!strings.Contains(all, "apps: entry apps: a git-folder entry takes no fields") {
		t.Errorf("problems = %+v; want the bad id, the unknown field and the git folder's fields reported", problems)
	}
}

// TestValidate refuses the entries whose Addon the API server would
// refuse, or whose form could not be read, and accepts one of each source.
func TestValidate(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	chart := func(c capstanv1.ChartSource) Entry { return Entry{ID: "e", Title: "E", Chart: &c} }
	field := func(typ, def string) Entry {
		e := chart(capstanv1.ChartSource{URL: "https://charts.example/e-1.0.0.tgz"})
		e.Fields = []Field{{Path: "p", Label: "P", Type: typ, Default: def}}
		return e
	}
	withPaths := func(paths ...string) Entry {
		e := chart(capstanv1.ChartSource{URL: "https://charts.example/e-1.0.0.tgz"})
		for _, p := range paths {
			e.Fields = append(e.Fields, Field{Path: p, Label: p, Type: "string"})
		}
		return e
	}
	withFields := func(fields ...Field) Entry {
		e := chart(capstanv1.ChartSource{URL: "https://charts.example/e-1.0.0.tgz"})
		e.Fields = fields
		return e
	}
	ofKind := func(kind string, c *capstanv1.ChartSource, fields []Field) Entry {
		return Entry{ID: "e", Title: "E", Kind: kind, Chart: c, Fields: fields}
	}
	withNamespace := func(ns string) Entry {
		e := chart(capstanv1.ChartSource{URL: "https://charts.example/e-1.0.0.tgz"})
		e.Namespace = ns
		return e
	}
	for _, tc := range []struct {
		name  string
		entry Entry
		want  string // a part of the error; "" for none
	}{
		{"repo with name", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", Version: "1.0.0"}), ""},
		{"a path with an empty part", withPaths("a..b"), `path "a..b" has an empty part`},
		{"a path ending with a dot", withPaths("a."), `path "a." has an empty part`},
		{"one path twice", withPaths("x", "x"), `the paths "x" and "x" overlap`},
		{"a path inside another", withPaths("a", "a.b"), `the paths "a" and "a.b" overlap`},
		{"a path around another", withPaths("a.b", "a"), `the paths "a.b" and "a" overlap`},
		{"paths that share a start", withPaths("a.b", "a.c", "ab"), ""},
		{"repo, newest version", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e"}), ""},
		{"oci with version", chart(capstanv1.ChartSource{OCI: "oci://ghcr.io/org/e", Version: "1.0.0"}), ""},
		{"oci with digest", chart(capstanv1.ChartSource{OCI: "oci://ghcr.io/org/e", Digest: digest}), ""},
		{"url", chart(capstanv1.ChartSource{URL: "https://charts.example/e-1.0.0.tgz"}), ""},
		{"no chart", Entry{ID: "e", Title: "E"}, "name its chart"},
		{"empty chart", chart(capstanv1.ChartSource{}), "name its chart"},
		{"repo without name", chart(capstanv1.ChartSource{Repo: "https://charts.example/"}), "chart.name is required"},
		{"name without repo", chart(capstanv1.ChartSource{URL: "https://charts.example/e-1.0.0.tgz", Name: "e"}), "chart.name is required"},
		{"repo and url", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", URL: "https://charts.example/e-1.0.0.tgz"}), "exactly one"},
		{"oci and url", chart(capstanv1.ChartSource{OCI: "oci://ghcr.io/org/e", Version: "1", URL: "https://charts.example/e.tgz"}), "exactly one"},
		{"url with version", chart(capstanv1.ChartSource{URL: "https://charts.example/e-1.0.0.tgz", Version: "1.0.0"}), "cannot be set with chart.url"},
		{"oci without version or digest", chart(capstanv1.ChartSource{OCI: "oci://ghcr.io/org/e"}), "needs a chart.version"},
		{"plain http repo", chart(capstanv1.ChartSource{Repo: "http://charts.example/", Name: "e"}), "https"},
		{"oci without a registry", chart(capstanv1.ChartSource{OCI: "ghcr.io/org/e", Version: "1"}), "oci://"},
		{"short digest", chart(capstanv1.ChartSource{OCI: "oci://ghcr.io/org/e", Digest: "sha256:abc"}), "chart.digest"},
		{"chart name with a dot and a dash", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "kube-prometheus_stack.v2"}), ""},
		{"chart name with a slash", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "org/e"}), "chart.name"},
		{"chart name starting with a dash", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "-e"}), "chart.name"},
		{"chart name too long", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: strings.Repeat("e", 254)}), "at most 253"},
		{"chart name at its bound", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: strings.Repeat("e", 253)}), ""},
		{"repo too long", chart(capstanv1.ChartSource{Repo: "https://" + strings.Repeat("r", 2041), Name: "e"}), "at most 2048"},
		{"url at its bound", chart(capstanv1.ChartSource{URL: "https://" + strings.Repeat("u", 2040)}), ""},
		{"url too long", chart(capstanv1.ChartSource{URL: "https://" + strings.Repeat("u", 2041)}), "at most 2048"},
		{"oci too long", chart(capstanv1.ChartSource{OCI: "oci://ghcr.io/" + strings.Repeat("o", 2040), Version: "1"}), "at most 2048"},
		{"version too long", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", Version: strings.Repeat("1", 129)}), "at most 128"},
		{"version of 128 characters, not bytes", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", Version: strings.Repeat("é", 128)}), ""},
		{"secretRef without a name", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", SecretRef: &capstanv1.LocalObjectReference{}}), "chart.secretRef.name"},
		{"verify by provenance", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", Verify: &capstanv1.ChartVerification{
			Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "keyring"}}}}), ""},
		{"verify by cosign", chart(capstanv1.ChartSource{OCI: "oci://ghcr.io/org/e", Version: "1", Verify: &capstanv1.ChartVerification{
			Cosign: &capstanv1.CosignVerification{SecretRef: capstanv1.LocalObjectReference{Name: "keys"}}}}), ""},
		{"verify by nothing", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", Verify: &capstanv1.ChartVerification{}}), "exactly one of provenance"},
		{"verify by both", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", Verify: &capstanv1.ChartVerification{
			Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "keyring"}},
			Cosign:     &capstanv1.CosignVerification{SecretRef: capstanv1.LocalObjectReference{Name: "keys"}}}}), "exactly one of provenance"},
		{"verify's keys unnamed", chart(capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e", Verify: &capstanv1.ChartVerification{
			Provenance: &capstanv1.ProvenanceVerification{}}}), "provenance.secretRef.name"},
		{"git folder needs no chart", Entry{ID: "e", Title: "E", Kind: "git-folder"}, ""},
		{"git folder with fields", ofKind("git-folder", nil, []Field{{Path: "replicas", Label: "Replicas", Type: "integer"}}),
			"a git-folder entry takes no fields: a folder has no values, and its variables come from the Addon's spec.substitute"},
		{"git folder with a chart", ofKind("git-folder", &capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e"}, nil),
			"a git-folder entry takes no chart"},
		{"any chart", ofKind("any-chart", nil, nil), ""},
		{"any chart with fields", ofKind("any-chart", nil, []Field{{Path: "replicas", Label: "Replicas", Type: "integer"}}),
			"an any-chart entry takes no fields: its form is built from the chart's values.schema.json"},
		{"any chart with a chart", ofKind("any-chart", &capstanv1.ChartSource{Repo: "https://charts.example/", Name: "e"}, nil),
			"an any-chart entry takes no chart"},
		{"a field without a label", withFields(Field{Path: "a", Label: "A", Type: "string"}, Field{Path: "b", Type: "string"}),
			`fields[1] (path "b") needs a label`},
		{"a field whose label is blank", withFields(Field{Path: "a", Label: " ", Type: "string"}), `fields[0] (path "a") needs a label`},
		{"a field without a type, named by index", withFields(Field{Path: "a", Label: "Size", Type: "string"}, Field{Path: "b", Label: "Size"}),
			`fields[1] ("Size") needs a path and a type`},
		{"a field without a path, named by index", withFields(Field{Label: "Size", Type: "string"}), `fields[0] ("Size") needs a path`},
		{"a bad default, named by index", withFields(Field{Path: "a", Label: "A", Type: "string"}, Field{Path: "b", Label: "B", Type: "integer", Default: "x"}),
			`fields[1] ("B"): default "x" is not an integer`},
		{"an empty part, named by index", withFields(Field{Path: "a..b", Label: "A", Type: "string"}), `fields[0] ("A"): path "a..b" has an empty part`},
		{"overlapping fields of one label, named by index", withFields(Field{Path: "a", Label: "Size", Type: "string"}, Field{Path: "a.b", Label: "Size", Type: "string"}),
			`fields[0] ("Size") and fields[1] ("Size"): the paths "a" and "a.b" overlap`},
		{"namespace", withNamespace("apps"), ""},
		{"namespace that is not a label", withNamespace("Apps_1"), "namespace"},
		{"integer default", field("integer", "3"), ""},
		{"integer default that is not", field("integer", "three"), "not an integer"},
		{"fractional integer default", field("integer", "1.5"), "not an integer"},
		{"number default", field("number", "0.5"), ""},
		{"number default that is not", field("number", "half"), "not a finite number"},
		{"number default NaN", field("number", "NaN"), "not a finite number"},
		{"boolean default", field("boolean", "false"), ""},
		{"boolean default not spelled true", field("boolean", "True"), "not true or false"},
		{"string default", field("string", "anything: at all"), ""},
		{"no default", field("integer", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.entry.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v; want one that says %q", err, tc.want)
			}
		})
	}
}

// TestChartBoundsAreTheCRDs reads the Addon's CRD as it is installed: the
// bounds and the pattern chartProblem checks are the schema's, and the
// schema still takes one signature check only, so an entry Validate
// accepts is one the API server takes.
func TestChartBoundsAreTheCRDs(t *testing.T) {
	raw, err := fs.ReadFile(config.FS, "crd/bases/capstan.dev_addons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	chart := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["chart"]
	maxLength := func(p apiextensionsv1.JSONSchemaProps) int {
		if p.MaxLength == nil {
			return -1
		}
		return int(*p.MaxLength)
	}
	for field, want := range map[string]int{"repo": maxAddress, "oci": maxAddress, "url": maxAddress, "version": maxVersion, "name": maxName} {
		if got := maxLength(chart.Properties[field]); got != want {
			t.Errorf("the CRD bounds chart.%s at %d; chartProblem at %d", field, got, want)
		}
	}
	if got := maxLength(chart.Properties["secretRef"].Properties["name"]); got != maxName {
		t.Errorf("the CRD bounds chart.secretRef.name at %d; chartProblem at %d", got, maxName)
	}
	if got := chart.Properties["name"].Pattern; got != chartNameRE.String() {
		t.Errorf("the CRD's pattern of chart.name is %q; chartProblem's %q", got, chartNameRE.String())
	}
	verify := chart.Properties["verify"]
	if len(verify.XValidations) != 1 || verify.XValidations[0].Rule != "has(self.provenance) != has(self.cosign)" {
		t.Errorf("the CRD's rules of chart.verify are %+v; chartProblem checks exactly one of provenance or cosign", verify.XValidations)
	}
}

// TestOperatorEntriesOfOneIDAndTitle: two ConfigMaps that give one id are
// reported, the first by name kept; entries of one title come back ordered
// by id on every read; a ConfigMap without entry.yaml says so.
func TestOperatorEntriesOfOneIDAndTitle(t *testing.T) {
	cm := func(name, entry string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: name, Labels: map[string]string{Label: "true"}}}
		if entry != "" {
			c.Data = map[string]string{EntryKey: entry}
		}
		return c
	}
	c := fake.NewClientBuilder().WithObjects(
		cm("b-web", "id: web\ntitle: Web (b)\nchart: {url: 'https://charts.example/b-1.0.0.tgz'}\n"),
		cm("a-web", "id: web\ntitle: Web (a)\nchart: {url: 'https://charts.example/a-1.0.0.tgz'}\n"),
		cm("longhorn-b", "id: longhorn-b\ntitle: Longhorn\nchart: {url: 'https://charts.example/longhorn-b.tgz'}\n"),
		cm("longhorn-a", "id: longhorn-a\ntitle: Longhorn\nchart: {url: 'https://charts.example/longhorn-a.tgz'}\n"),
		cm("empty", ""),
	).Build()
	var first []string
	for i := range 20 {
		entries, problems, err := Entries(context.Background(), c, "capstan-system")
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, e := range entries {
			order = append(order, e.ID+" "+e.Title+" "+e.Source)
		}
		if i == 0 {
			first = order
			got := map[string]string{}
			for _, p := range problems {
				got[p.ConfigMap] = p.Message
			}
			if len(problems) != 2 || !strings.Contains(got["b-web"], "id web is also given by ConfigMap a-web") || !strings.Contains(got["empty"], "has no key entry.yaml") {
				t.Errorf("problems = %+v; want b-web's id reported as a-web's, and empty's missing key", problems)
			}
			var longhorns []string
			for _, o := range order {
				if strings.Contains(o, " Longhorn ") {
					longhorns = append(longhorns, strings.Fields(o)[0])
				}
			}
			if want := []string{"longhorn", "longhorn-a", "longhorn-b"}; !slices.Equal(longhorns, want) {
				t.Errorf("the entries titled Longhorn come as %v; want %v", longhorns, want)
			}
			if !slices.Contains(order, "web Web (a) ConfigMap a-web") {
				t.Errorf("entries = %v; want web from ConfigMap a-web", order)
			}
			continue
		}
		if !slices.Equal(order, first) {
			t.Fatalf("read %d gives the entries in another order:\n%v\nwas\n%v", i, order, first)
		}
	}
}
