package body

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/config"
)

// TestAddCheckSaysWhatTheBodyLacks checks an empty body's refusal: it says
// the body names no add-on and what to send, not that "" is a bad name.
func TestAddCheckSaysWhatTheBodyLacks(t *testing.T) {
	var a Add
	if err := Decode(strings.NewReader(""), &a); err != nil {
		t.Fatal(err)
	}
	err := a.Check()
	if err == nil || !strings.Contains(err.Error(), "the body names no add-on") {
		t.Fatalf("an empty body: %v", err)
	}
	a.Name = "Bad_Name"
	if err := a.Check(); err == nil || !strings.Contains(err.Error(), `name "Bad_Name"`) {
		t.Fatalf("a bad name: %v", err)
	}
}

// TestDecodeRefusesNotUTF8 checks that a body with bytes that are not UTF-8
// is refused, naming where, rather than decoded with them replaced by
// U+FFFD: a secret input would otherwise reach its Secret as other bytes
// than were sent.
func TestDecodeRefusesNotUTF8(t *testing.T) {
	for _, tc := range []struct {
		body string
		at   string
	}{
		{"{\"name\":\"x\",\"secretInputs\":{\"a\":\"p\xe4ss\"}}", "byte 34"},
		{"{\"name\":\"x\",\"spec\":{\"values\":{\"a\":\"\xff\"}}}", "byte 35"},
	} {
		var a Add
		err := Decode(strings.NewReader(tc.body), &a)
		var bad *Error
		if !errors.As(err, &bad) || !strings.Contains(bad.Message, "not UTF-8 at "+tc.at) {
			t.Errorf("%q: %v", tc.body, err)
		}
	}
	var a Add
	if err := Decode(strings.NewReader(`{"name":"x","secretInputs":{"a":"pässwörd"}}`), &a); err != nil || a.SecretInputs["a"] != "pässwörd" {
		t.Errorf("a UTF-8 body: %v, %q", err, a.SecretInputs["a"])
	}
}

// TestDecodeRefusesLoneSurrogates checks that a string escape that is half
// of a UTF-16 pair without its other half, as Python writes bytes that
// were not UTF-8 (surrogateescape), is refused, naming where, rather than
// decoded as U+FFFD; pairs, a U+FFFD sent as such, and an escaped
// backslash before a u are taken as they are.
func TestDecodeRefusesLoneSurrogates(t *testing.T) {
	for _, tc := range []struct {
		body string
		at   string
	}{
		{`{"name":"x","secretInputs":{"a":"p\udce4ss"}}`, `(\udce4) at byte 34`},
		{`{"name":"x","secretInputs":{"a":"\uD83D"}}`, `(\uD83D) at byte 33`},
		{`{"name":"x","secretInputs":{"a":"\ud83dx\ude00"}}`, `(\ud83d) at byte 33`},
		{`{"name":"x","secretInputs":{"a":"\ude00\ud83d"}}`, `(\ude00) at byte 33`},
		{`{"name":"x","secretInputs":{"a":"\ud83d\ud83d\ude00"}}`, `(\ud83d) at byte 33`},
		{`{"name":"x","secretInputs":{"a":"\\\udce4"}}`, `(\udce4) at byte 35`},
		{`{"name":"x","spec":{"values":{"\udce4":"v"}}}`, `(\udce4) at byte 31`},
	} {
		var a Add
		err := Decode(strings.NewReader(tc.body), &a)
		var bad *Error
		if !errors.As(err, &bad) || !strings.Contains(bad.Message, "lone UTF-16 surrogate "+tc.at) {
			t.Errorf("%s: %v; want a lone surrogate %s", tc.body, err, tc.at)
		}
	}
	for body, want := range map[string]string{
		`{"name":"x","secretInputs":{"a":"\ud83d\ude00"}}`:        "\U0001F600",
		`{"name":"x","secretInputs":{"a":"\uD83D\uDE00"}}`:        "\U0001F600",
		"{\"name\":\"x\",\"secretInputs\":{\"a\":\"p\uFFFDss\"}}": "p\uFFFDss",
		`{"name":"x","secretInputs":{"a":"p\ufffdss"}}`:           "p\uFFFDss",
		`{"name":"x","secretInputs":{"a":"\\udce4"}}`:             `\udce4`,
		`{"name":"x","secretInputs":{"a":"\\\\udce4\"\\"}}`:       `\\udce4"\`,
	} {
		var a Add
		if err := Decode(strings.NewReader(body), &a); err != nil || a.SecretInputs["a"] != want {
			t.Errorf("%s: %v, %q; want %q", body, err, a.SecretInputs["a"], want)
		}
	}
}

// TestNameBoundIsTheCRDs reads the Addon's CRD as it is installed: the
// bound Add.Check holds a name to is the one the CRD's rule holds it to, so
// that a name Check accepts is not refused later, after a chart fetch, as a
// values Secret's label.
func TestNameBoundIsTheCRDs(t *testing.T) {
	raw, err := fs.ReadFile(config.FS, "crd/bases/capstan.dev_addons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("self.metadata.name.size() <= %d", MaxName)
	var rules []string
	for _, v := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.XValidations {
		rules = append(rules, v.Rule)
	}
	if !slices.Contains(rules, want) {
		t.Errorf("the CRD's rules %q hold no %q", rules, want)
	}
	for name, ok := range map[string]bool{
		strings.Repeat("n", MaxName):   true,
		strings.Repeat("n", MaxName+1): false,
		strings.Repeat("n", 70):        false,
	} {
		a := Add{Name: name}
		err := a.Check()
		var bad *Error
		if ok != (err == nil) || (err != nil && (!errors.As(err, &bad) || bad.Field != "name" || !strings.Contains(bad.Message, "at most 53 characters"))) {
			t.Errorf("a name of %d characters: %v", len(name), err)
		}
	}
}

// TestSecretInputsAreCheckedByEveryBody checks that every body that takes
// secret inputs refuses, in its own Check, one whose key is not a
// targetPath, naming that input as the field, and takes targetPaths.
func TestSecretInputsAreCheckedByEveryBody(t *testing.T) {
	bad := `"secretInputs":{"users[0].password":"x","a[":"y"}`
	good := `"secretInputs":{"users[0].password":"x","auth.password":"y","a\\.b":"z"}`
	for _, tc := range []struct {
		what   string
		fresh  func() any
		prefix string
	}{
		{"an add", func() any { return &Add{} }, `{"name":"wiki",`},
		{"a change", func() any { return &Change{} }, `{`},
		{"an edit", func() any { return &Edit{} }, `{"generation":2,`},
	} {
		v := tc.fresh()
		if _, ok := v.(checker); !ok {
			t.Errorf("%s has no Check of its own", tc.what)
			continue
		}
		if err := Decode(strings.NewReader(tc.prefix+bad+"}"), v); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		var refused *Error
		if err := v.(checker).Check(); !errors.As(err, &refused) || refused.Field != `secretInputs["a["]` ||
			!strings.Contains(refused.Message, `secret input "a[": `) || !strings.Contains(refused.Message, "name the value as a targetPath") {
			t.Errorf("%s with a secret input at a[: %v; want it refused, naming the input", tc.what, err)
		}
		v = tc.fresh()
		if err := Decode(strings.NewReader(tc.prefix+good+"}"), v); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if err := v.(checker).Check(); err != nil {
			t.Errorf("%s with secret inputs at targetPaths: %v", tc.what, err)
		}
	}
	var e any = &Edit{Generation: -1, Change: Change{SecretInputs: map[string]string{"a[": "y"}}}
	if err := e.(checker).Check(); err == nil || !strings.Contains(err.Error(), "generation -1") {
		t.Errorf("an edit with a negative generation and a bad secret input: %v; want the generation refused first, as before", err)
	}
}

// checker is a body with a Check of its own.
type checker interface{ Check() error }
