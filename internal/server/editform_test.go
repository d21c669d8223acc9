package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"golang.org/x/net/html"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// editSchema has a field of each kind that a careless round trip changes:
// a secret, a generated value, a boolean without a default and lists.
const editSchema = `{
  "type": "object",
  "properties": {
    "replicas": {"type": "integer"},
    "greeting": {"type": "string", "default": "hello"},
    "config": {"type": "string"},
    "motd": {"type": "string", "default": "line one\nline two\n"},
    "mode": {"type": "string", "enum": ["fast", "safe"]},
    "level": {"type": "integer", "enum": [1, 2, 3]},
    "debug": {"type": "boolean"},
    "metrics": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "ports": {"type": "array", "items": {"type": "integer"}},
    "auth": {"type": "object", "properties": {
      "password": {"type": "string", "writeOnly": true},
      "token": {"type": "string", "x-capstan-generate": {"length": 16}}
    }}
  }
}`

// editValues are values an admin set: a multi-line string (a config file,
// its indent and last line break included), a password and a generated token
// pinned in spec.values, debug false where the chart's values.yaml says
// true, numbers in a list, a comma in a string, and a null that removes a
// chart default.
const editValues = `{"replicas": 1, "greeting": "hi", "config": "  indented: true\nlast: line\n", "mode": "safe", "level": 1, "debug": false,
  "tags": ["a", "b, c"], "ports": [80, 443],
  "auth": {"password": "pinned-password", "token": "pinned-token"},
  "extra": {"x": 1}, "ingress": {"annotations": null}}`

// TestEditFormChangesOnlyWhatChanged builds the edit form from values and a
// schema, renders it, and posts back what a browser sends with one field
// changed: the values the page saves are the old ones with that one field
// changed.
func TestEditFormChangesOnlyWhatChanged(t *testing.T) {
	for _, tc := range []struct {
		name         string
		values       string // editValues when empty
		field, value string
		want         string // the change, as a JSON merge patch of the values
		inputs       map[string]string
	}{
		{"replicas", "", "v.replicas", "3", `{"replicas": 3}`, map[string]string{}},
		// The new password goes to a Secret, which replaces the one in
		// spec.values.
		{"a new secret input", "", "v.auth.password", "new-password", `{"auth": {"password": null}}`,
			map[string]string{"auth.password": "new-password"}},
		// A boolean without a default can be set to false, and unset.
		{"false where nothing was set", "", "v.metrics", "false", `{"metrics": false}`, map[string]string{}},
		{"a false unset", "", "v.debug", "", `{"debug": null}`, map[string]string{}},
		// A list is read with its items' type, and a comma stays in its item.
		{"a list of strings", "", "v.tags", `[x, "y, z"]`, `{"tags": ["x", "y, z"]}`, map[string]string{}},
		{"a list of integers", "", "v.ports", "[8080, 9090]", `{"ports": [8080, 9090]}`, map[string]string{}},
		{"a list in block YAML", "", "v.ports", "- 1\n- 2", `{"ports": [1, 2]}`, map[string]string{}},
		{"an empty list", "", "v.tags", "[]", `{"tags": []}`, map[string]string{}},
		{"an integer enum", "", "v.level", "2", `{"level": 2}`, map[string]string{}},
		// A multi-line string is a text area: its lines are kept, and so
		// are the spaces and line breaks at its ends.
		{"a multi-line string", "", "v.config", "  indented: false\r\nlast: line\r\n", `{"config": "  indented: false\nlast: line\n"}`, map[string]string{}},
		{"a multi-line default", "", "v.motd", "one\r\ntwo", `{"motd": "one\ntwo"}`, map[string]string{}},
		// A select sends back a value that is none of its choices.
		{"a value no select offers", `{"mode": "turbo", "debug": "yes"}`, "v.replicas", "2", `{"replicas": 2}`, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.values == "" {
				tc.values = editValues
			}
			current := jsonMap(t, tc.values)
			post := editRoundTrip(t, current)
			post.Set(tc.field, tc.value)
			got, inputs := postEdit(t, current, post)
			if !reflect.DeepEqual(inputs, tc.inputs) {
				t.Errorf("the secret inputs are %v; want %v", inputs, tc.inputs)
			}
			want, err := jsonpatch.MergePatch([]byte(tc.values), []byte(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			if !equalValues(got, jsonMap(t, string(want))) {
				t.Errorf("after changing %s the values are\n%v\nwant\n%s", tc.field, got, want)
			}
		})
	}
}

// TestEditFormRefusesAListItCannotRead checks that a list that is not YAML
// or JSON, or whose items are not of the schema's type, is refused next to
// its field, and saying how to write it.
func TestEditFormRefusesAListItCannotRead(t *testing.T) {
	for _, raw := range []string{"80, 443", "[80, x]", "[1.5]", "[[1]]", "{a: 1}"} {
		current := jsonMap(t, editValues)
		post := editRoundTrip(t, current)
		post.Set("v.ports", raw)
		r := httptest.NewRequest(http.MethodPost, "/addons/ns/edit/edit", strings.NewReader(post.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		form := editFormOf(t, map[string]any{})
		if _, _, typed, _ := form.read(r, current); typed {
			t.Errorf("ports %q was taken", raw)
		}
		for _, f := range form.Fields {
			if f.Path == "ports" && !strings.Contains(f.Error, "not a list of integers: write it as YAML or JSON") {
				t.Errorf("ports %q: the field says %q", raw, f.Error)
			}
		}
	}
}

// TestEditFormSaysASecretIsKept checks that a secret's field, and a
// generated value's, say that an empty field keeps the value they have.
func TestEditFormSaysASecretIsKept(t *testing.T) {
	form := editFormOf(t, jsonMap(t, editValues))
	page := renderEdit(t, form)
	for _, says := range []string{"left empty, it is kept", "kept as it is"} {
		if !strings.Contains(page, says) {
			t.Errorf("the form does not say %q", says)
		}
	}
	if strings.Contains(page, "pinned-password") || strings.Contains(page, "pinned-token") {
		t.Error("the form shows a secret value")
	}
}

func jsonMap(t *testing.T, doc string) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := json.Unmarshal([]byte(doc), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func editFormOf(t *testing.T, current map[string]any) *editForm {
	t.Helper()
	fields, err := schemaForm([]byte(editSchema))
	if err != nil {
		t.Fatal(err)
	}
	form := &editForm{Fields: fields, HasSchema: true}
	form.fill(current)
	return form
}

func renderEdit(t *testing.T, form *editForm) string {
	t.Helper()
	var buf bytes.Buffer
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "edit"}}
	if err := pages()["edit"].ExecuteTemplate(&buf, "content", pageData{Addon: a, Edit: form, CSRF: "csrf"}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// editRoundTrip renders the edit form of current and returns what a browser
// sends from it untouched.
func editRoundTrip(t *testing.T, current map[string]any) url.Values {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(renderEdit(t, editFormOf(t, current))))
	if err != nil {
		t.Fatal(err)
	}
	return formPost(doc)
}

// postEdit posts the edit form and returns the values that the page saves
// and the secret inputs.
func postEdit(t *testing.T, current map[string]any, post url.Values) (map[string]any, map[string]string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/addons/ns/edit/edit", strings.NewReader(post.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	fields, err := schemaForm([]byte(editSchema))
	if err != nil {
		t.Fatal(err)
	}
	form := &editForm{Fields: fields, HasSchema: true}
	next, inputs, typed, err := form.read(r, current)
	if err != nil || !typed {
		t.Fatalf("the form's values are refused: typed %v, %v, fields %+v", typed, err, form.Fields)
	}
	return next, inputs
}

// equalValues says whether two values are the same JSON: an int64 from the
// form is the float64 that spec.values reads.
func equalValues(a, b map[string]any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// formPost is what a browser sends from the first form in doc.
func formPost(doc *html.Node) url.Values {
	out := url.Values{}
	attr := func(n *html.Node, key string) (string, bool) {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val, true
			}
		}
		return "", false
	}
	text := func(n *html.Node) string {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return b.String()
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		name, named := attr(n, "name")
		switch {
		case n.Type != html.ElementNode || !named:
		case n.Data == "input":
			typ, _ := attr(n, "type")
			v, _ := attr(n, "value")
			if _, checked := attr(n, "checked"); typ != "checkbox" || checked {
				out.Add(name, strings.NewReplacer("\r", "", "\n", "").Replace(v))
			}
		case n.Data == "textarea":
			// A browser sends a text area's line breaks as CRLF.
			out.Add(name, strings.ReplaceAll(text(n), "\n", "\r\n"))
		case n.Data == "select":
			var first, chosen *html.Node
			for o := n.FirstChild; o != nil; o = o.NextSibling {
				if o.Type != html.ElementNode || o.Data != "option" {
					continue
				}
				if first == nil {
					first = o
				}
				if _, sel := attr(o, "selected"); sel && chosen == nil {
					chosen = o
				}
			}
			if chosen == nil {
				chosen = first
			}
			if chosen != nil {
				v, ok := attr(chosen, "value")
				if !ok {
					v = text(chosen)
				}
				out.Add(name, v)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// TestListDefaultIsAList: a list's default, the field's placeholder, is
// written as the field takes a list, and reads back as it was.
func TestListDefaultIsAList(t *testing.T) {
	fields, err := schemaForm([]byte(`{"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "default": ["a", "b, c"]}}}`))
	if err != nil || len(fields) != 1 {
		t.Fatalf("fields %+v, %v", fields, err)
	}
	got, err := parseList(fields[0].Default, "string")
	if err != nil || !reflect.DeepEqual(got, []any{"a", "b, c"}) {
		t.Fatalf("the default %q reads back as %v, %v", fields[0].Default, got, err)
	}
}

// TestSchemaFormLeavesDottedKeysToTheYAML: a property whose name holds
// ".", "[", "]" or "\" (an annotation such as prometheus.io/scrape) is no
// field of the form, since its path would write it nested or as a list
// index; the YAML editor takes it. Its plain siblings are fields, and an
// object left with no field is none either.
func TestSchemaFormLeavesDottedKeysToTheYAML(t *testing.T) {
	fields, err := schemaForm([]byte(`{"type": "object", "properties": {
		"auth.password": {"type": "string", "writeOnly": true},
		"list[0]": {"type": "string"},
		"back\\slash": {"type": "string"},
		"podAnnotations": {"type": "object", "properties": {"prometheus.io/scrape": {"type": "string"}}},
		"service": {"type": "object", "properties": {"port": {"type": "integer"}, "a.b": {"type": "string"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func([]formField)
	walk = func(fs []formField) {
		for _, f := range fs {
			paths = append(paths, f.Path)
			walk(f.Children)
		}
	}
	walk(fields)
	if want := []string{"service", "service.port"}; !slices.Equal(paths, want) {
		t.Errorf("the form's fields are %q; want %q", paths, want)
	}
}
