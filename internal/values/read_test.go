package values

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// These tests check Read's decisions: which objects it may read and how it
// reports problems. The reads themselves are plain gets, so a fake reader
// stands in for the API server here; the integration tests use a real one.

const ns = "tenant"

func secret(name string, labels map[string]string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func configMap(name string, labels map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: data}
}

func addonWith(name string, values string, refs ...capstanv1.ValuesReference) *capstanv1.Addon {
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "uid-" + "1"}}
	if values != "" {
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
	a.Spec.ValuesFrom = refs
	return a
}

func mine(addon string) map[string]string { return map[string]string{capstanv1.AddonLabel: addon} }

func TestReadRules(t *testing.T) {
	big := strings.Repeat("a: b\n", MaxDocumentBytes/5+10) // just over 1 MiB
	objects := []client.Object{
		secret("app-values-ok", mine("app"), map[string]string{"values.yaml": "auth: {password: p4ss}", "pin": "0123"}),
		secret("app-values-unlabelled", nil, map[string]string{"values.yaml": "a: 1"}),
		secret("app-values-released", nil, map[string]string{"values.yaml": "a: 1"}),
		secret("app-values-other", mine("app-values"), map[string]string{"values.yaml": "a: 1"}),
		secret("app-values-notyaml", mine("app"), map[string]string{"values.yaml": "a: [unclosed\n  b: hunter2"}),
		secret("app-values-scalar", mine("app"), map[string]string{"values.yaml": "hunter2"}),
		secret("app-values-big", mine("app"), map[string]string{"values.yaml": big}),
		secret("app-generated", mine("app"), map[string]string{"values.yaml": "g: x"}),
		secret("db-credentials", nil, map[string]string{"values.yaml": "a: 1"}),
		configMap("app-values-cm", mine("app"), map[string]string{"values.yaml": "replicas: 2"}),
		configMap("shared-config", nil, map[string]string{"values.yaml": "replicas: 3"}),
	}
	released := objects[2].(*corev1.Secret)
	released.Annotations = map[string]string{ReleasedAnnotation: "app"}
	r := fake.NewClientBuilder().WithObjects(objects...).Build()

	ref := func(kind, name string, mods ...func(*capstanv1.ValuesReference)) capstanv1.ValuesReference {
		v := capstanv1.ValuesReference{Kind: kind, Name: name}
		for _, m := range mods {
			m(&v)
		}
		return v
	}
	key := func(k string) func(*capstanv1.ValuesReference) {
		return func(v *capstanv1.ValuesReference) { v.ValuesKey = k }
	}
	target := func(p string) func(*capstanv1.ValuesReference) {
		return func(v *capstanv1.ValuesReference) { v.TargetPath = p }
	}
	optional := func(v *capstanv1.ValuesReference) { v.Optional = true }

	tests := []struct {
		name     string
		profile  capstanv1.Profile
		ref      capstanv1.ValuesReference
		wantRule string // empty: no error
		wantMsg  string
	}{
		{name: "own labelled Secret", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-ok")},
		{name: "own Secret, targetPath", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-ok", key("pin"), target("auth.pin"))},
		{name: "own ConfigMap", profile: capstanv1.ProfileRestricted, ref: ref("ConfigMap", "app-values-cm")},
		{name: "generated Secret", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-generated")},
		{name: "released by an add-on of the same name", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-released")},
		{name: "another Secret", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "db-credentials"),
			wantRule: "valuesFrom.restricted", wantMsg: "reads only its own values objects, named app-values-*"},
		{name: "another add-on's Secret with a prefix that matches", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-other"),
			wantRule: "valuesFrom.restricted", wantMsg: "belongs to the add-on app-values"},
		{name: "unlabelled Secret with the right name", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-unlabelled"),
			wantRule: "valuesFrom.restricted", wantMsg: "is not labelled capstan.dev/addon=app"},
		{name: "another ConfigMap", profile: capstanv1.ProfileRestricted, ref: ref("ConfigMap", "shared-config"),
			wantRule: "valuesFrom.restricted"},
		{name: "the bare prefix is no values name", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-"),
			wantRule: "valuesFrom.restricted"},
		{name: "cluster profile reads any Secret", profile: capstanv1.ProfileCluster, ref: ref("Secret", "db-credentials")},
		{name: "cluster profile reads any ConfigMap", profile: capstanv1.ProfileCluster, ref: ref("ConfigMap", "shared-config")},
		{name: "missing object", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-nope"),
			wantRule: "valuesFrom.missing", wantMsg: "the Secret does not exist"},
		{name: "missing key", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-ok", key("nokey")),
			wantRule: "valuesFrom.missing", wantMsg: "has no key nokey"},
		{name: "optional missing object", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-nope", optional)},
		// NOTE: optional covers a missing object only, as in Flux: a
		// misspelt key in one that exists must not render without it.
		{name: "optional missing key", profile: capstanv1.ProfileCluster, ref: ref("ConfigMap", "shared-config", key("nokey"), optional),
			wantRule: "valuesFrom.missing", wantMsg: "the ConfigMap has no key nokey; add the key, or correct valuesKey (optional covers a missing object, not a missing key)"},
		{name: "optional missing key, targetPath", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-ok", key("pasword"), target("auth.password"), optional),
			wantRule: "valuesFrom.missing", wantMsg: "the Secret has no key pasword"},
		{name: "not YAML", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-notyaml"),
			wantRule: "values.notYAML", wantMsg: "Secret app-values-notyaml, key values.yaml) is not valid YAML"},
		{name: "YAML but not a map", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-scalar"),
			wantRule: "values.notMap", wantMsg: "is not a map of values"},
		{name: "10 MiB is too large", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-big"),
			wantRule: "valuesFrom.tooLarge", wantMsg: "at most 1048576 bytes"},
		{name: "empty targetPath segment", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-ok", key("pin"), target("auth..pin")),
			wantRule: "valuesFrom.targetPath", wantMsg: "spec.valuesFrom[0] (Secret app-values-ok, key pin): targetPath \"auth..pin\" has an empty segment"},
		{name: "unclosed bracket", profile: capstanv1.ProfileRestricted, ref: ref("Secret", "app-values-ok", key("pin"), target("hosts[0")),
			wantRule: "valuesFrom.targetPath", wantMsg: "unclosed '['"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := Read(context.Background(), r, addonWith("app", "", tt.ref), tt.profile)
			if tt.wantRule == "" {
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if len(src.From) != 1 {
					t.Fatalf("got %d layers, want 1", len(src.From))
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Read error = %v, want an *InvalidError", err)
			}
			if len(ie.Errors) != 1 || ie.Errors[0].Rule != tt.wantRule || ie.Errors[0].Path != "spec.valuesFrom[0]" ||
				!strings.Contains(ie.Errors[0].Message, tt.wantMsg) {
				t.Fatalf("errors = %+v, want one at spec.valuesFrom[0] with rule %s and a message containing %q", ie.Errors, tt.wantRule, tt.wantMsg)
			}
			for _, secretish := range []string{"hunter2", "p4ss", "[unclosed"} {
				if strings.Contains(ie.Error(), secretish) {
					t.Errorf("error %q shows the content %q", ie.Error(), secretish)
				}
			}
		})
	}
}

func TestReadKeepsRawStringsAndOrder(t *testing.T) {
	r := fake.NewClientBuilder().WithObjects(
		secret("app-values-1", mine("app"), map[string]string{"pin": "0123", "flag": "true", "list": "[a]", "values.yaml": "a: 1"}),
	).Build()
	addon := addonWith("app", `{"a": 0, "b": "x"}`,
		capstanv1.ValuesReference{Kind: "Secret", Name: "app-values-1"},
		capstanv1.ValuesReference{Kind: "Secret", Name: "app-values-1", ValuesKey: "pin", TargetPath: "auth.pin"},
		capstanv1.ValuesReference{Kind: "Secret", Name: "app-values-1", ValuesKey: "flag", TargetPath: "feature.enabled"},
		capstanv1.ValuesReference{Kind: "Secret", Name: "app-values-1", ValuesKey: "list", TargetPath: "hosts"},
		capstanv1.ValuesReference{Kind: "Secret", Name: "app-values-gone", Optional: true},
	)
	src, err := Read(context.Background(), r, addon, capstanv1.ProfileRestricted)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compose(Inputs{Sources: src})
	if err != nil {
		t.Fatal(err)
	}
	assertYAML(t, "effective", res.Effective, `{a: 1, b: x, auth: {pin: "0123"}, feature: {enabled: "true"}, hosts: "[a]"}`)
	if !src.From[4].Missing {
		t.Fatalf("the optional missing entry is not marked missing: %+v", src.From[4])
	}
}

func TestReadReportsEveryProblemAtOnce(t *testing.T) {
	r := fake.NewClientBuilder().Build()
	addon := addonWith("app", `{"a": 1}`,
		capstanv1.ValuesReference{Kind: "Secret", Name: "other"},
		capstanv1.ValuesReference{Kind: "Secret", Name: "app-values-x", TargetPath: "a..b"},
		capstanv1.ValuesReference{Kind: "Secret", Name: "app-values-gone"},
	)
	_, err := Read(context.Background(), r, addon, capstanv1.ProfileRestricted)
	var ie *InvalidError
	if !errors.As(err, &ie) || len(ie.Errors) != 3 {
		t.Fatalf("error = %v, want three problems", err)
	}
	for i, e := range ie.Errors {
		if want := "spec.valuesFrom[" + string(rune('0'+i)) + "]"; e.Path != want {
			t.Errorf("problem %d at %s, want %s", i, e.Path, want)
		}
	}
}

func TestParseDocument(t *testing.T) {
	if _, err := parseDocument(bytes.Repeat([]byte("x"), 10<<20), "big"); err == nil || err.Errors[0].Rule != "values.tooLarge" {
		t.Fatalf("a 10 MiB document: error = %v, want values.tooLarge", err)
	}
	doc, err := parseDocument([]byte("a: 1\n---\nb: 2\n---\na: 3\n"), "multi")
	if err != nil {
		t.Fatal(err)
	}
	assertYAML(t, "multi-document", doc, `{a: 3, b: 2}`)
	if doc, err := parseDocument([]byte("  \n"), "blank"); err != nil || len(doc) != 0 {
		t.Fatalf("a blank document: %v, %v; want an empty map", doc, err)
	}
	// A YAML bomb: the parser's alias limits must stop it quickly.
	bomb := `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`
	if _, err := parseDocument([]byte(bomb), "bomb"); err == nil {
		t.Fatal("a YAML alias bomb parsed; want an error")
	}
}

// countingReader counts the gets that reach the reader it wraps.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// Many entries naming one values document read the object once and parse
// the document once; documents past MaxTotalBytes together are refused,
// with the cap and the documents named, before they are parsed.
func TestReadEachDocumentOnceWithinATotalCap(t *testing.T) {
	var small, big strings.Builder
	for i := 0; small.Len() < 16<<10; i++ {
		fmt.Fprintf(&small, "k%d: 0\n", i)
	}
	for i := 0; big.Len() < MaxDocumentBytes-32; i++ {
		fmt.Fprintf(&big, "k%d: 0\n", i)
	}
	r := &countingReader{Reader: fake.NewClientBuilder().WithObjects(
		configMap("app-values-small", mine("app"), map[string]string{"values.yaml": small.String()}),
		configMap("app-values-big", mine("app"), map[string]string{"values.yaml": big.String()}),
	).Build()}
	refs := func(name string, n int) []capstanv1.ValuesReference {
		out := make([]capstanv1.ValuesReference, n)
		for i := range out {
			out[i] = capstanv1.ValuesReference{Kind: "ConfigMap", Name: name}
		}
		return out
	}

	src, err := Read(context.Background(), r, addonWith("app", "", refs("app-values-small", 64)...), capstanv1.ProfileRestricted)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if r.gets != 1 {
		t.Errorf("64 entries naming one ConfigMap read it %d times, want once", r.gets)
	}
	if len(src.From) != 64 {
		t.Fatalf("got %d layers, want 64", len(src.From))
	}
	for _, l := range src.From[1:] {
		if reflect.ValueOf(l.Doc).Pointer() != reflect.ValueOf(src.From[0].Doc).Pointer() {
			t.Fatal("the layers of one document each hold a parse of their own")
		}
	}

	r.gets = 0
	start := time.Now()
	_, err = Read(context.Background(), r, addonWith("app", `{"a": 1}`, refs("app-values-big", 64)...), capstanv1.ProfileRestricted)
	var ie *InvalidError
	if !errors.As(err, &ie) || len(ie.Errors) != 1 || ie.Errors[0].Rule != "valuesFrom.tooLarge" {
		t.Fatalf("Read = %v, want one valuesFrom.tooLarge error", err)
	}
	for _, want := range []string{"at most 2097152 bytes (2 MiB)", "ConfigMap app-values-big, key values.yaml (", "bytes, named by 64 entries)", "spec.values (8 bytes)"} {
		if !strings.Contains(ie.Errors[0].Message, want) {
			t.Errorf("message %q does not say %q", ie.Errors[0].Message, want)
		}
	}
	if r.gets != 1 {
		t.Errorf("read the ConfigMap %d times, want once", r.gets)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Read took %v: documents past the cap were parsed", d)
	}
}

// ReadConfigMaps, which runs before the API server sees the Addon, reads
// no entry past the CRD's bound on valuesFrom (MaxValuesFrom, which must
// be the CRD's maxItems), and UnreadNotes names the first 10 entries left
// out and counts the rest in one more note.
func TestReadConfigMapsStopsAtTheCRDsBound(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/capstan.dev_addons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	from := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["valuesFrom"]
	if from.MaxItems == nil || *from.MaxItems != MaxValuesFrom {
		t.Fatalf("the CRD's maxItems on spec.valuesFrom is %v; MaxValuesFrom is %d", from.MaxItems, MaxValuesFrom)
	}

	const given = 1000
	refs := make([]capstanv1.ValuesReference, given)
	for i := range refs {
		refs[i] = capstanv1.ValuesReference{Kind: "ConfigMap", Name: fmt.Sprintf("app-values-%d", i)}
	}
	r := &countingReader{Reader: fake.NewClientBuilder().Build()}
	layers, unread := ReadConfigMaps(context.Background(), r, addonWith("app", `{}`, refs...), capstanv1.ProfileRestricted)
	if r.gets != MaxValuesFrom || len(layers) != 0 {
		t.Errorf("%d entries: %d reads and %d layers; want %d reads, none past the bound, and no layer", given, r.gets, len(layers), MaxValuesFrom)
	}
	if len(unread) != MaxValuesFrom+1 || !strings.Contains(unread[MaxValuesFrom].Reason, "valuesFrom has 1000 entries, and an Addon may have at most 64") {
		t.Fatalf("unread has %d entries, the last %+v; want %d missing and one saying the list is past the bound", len(unread), unread[len(unread)-1], MaxValuesFrom)
	}

	notes := UnreadNotes(unread)
	if len(notes) != 11 || notes[10] != fmt.Sprintf("and %d more valuesFrom entries, which could not be read either", len(unread)-10) {
		t.Errorf("UnreadNotes gave %d notes, the last %q; want 10 and one counting the other %d", len(notes), notes[len(notes)-1], len(unread)-10)
	}
	for _, n := range notes[:10] {
		if !strings.Contains(n, "which could not be read (the ConfigMap does not exist)") {
			t.Errorf("note %q does not say why the entry was not read", n)
		}
	}
	if got := UnreadNotes(unread[:3]); len(got) != 3 {
		t.Errorf("3 entries left out gave %d notes; want one each", len(got))
	}
}
