package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/server/body"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/values"
)

// The form from a chart's schema: given a chart link, the server fetches the
// chart through the fetch guard and renders a form from its
// values.schema.json. What the form cannot express ($ref, oneOf, arrays of
// objects, a property whose name holds ".", "[", "]" or "\\") is left to
// the YAML editor under it, which every chart gets.

// maxFormDepth bounds how deep nested objects become nested fieldsets.
const maxFormDepth = 6

// formField is one input of the form, or a fieldset of them.
type formField struct {
	Path, Label, Kind, Description, Pattern string
	Enum                                    []string
	Default, Value, Error                   string
	Required, WriteOnly, Generated          bool
	// Held says that a secret or generated field has a value the form does
	// not show, which an empty field keeps.
	Held     bool
	Min, Max *float64
	Children []formField
	// Item is the type of an array's items.
	Item string
	// enumValues are the enum's values as the schema types them.
	enumValues []any
	// defaultValue is the schema's default as it types it.
	defaultValue any
	// itemKind is the schema's type of an array's items, even when the
	// form takes no list of them.
	itemKind string
}

// Input is the name of the field's input.
func (f formField) Input() string { return "v." + f.Path }

// ID is the id of the field's input, for its label.
func (f formField) ID() string { return "f-" + strings.ReplaceAll(f.Path, ".", "-") }

// schemaNode is the part of a JSON Schema the form reads.
type schemaNode struct {
	Type        any                    `json:"type"`
	Title       string                 `json:"title"`
	Description string                 `json:"description"`
	Properties  map[string]*schemaNode `json:"properties"`
	Required    []string               `json:"required"`
	Enum        []any                  `json:"enum"`
	Default     any                    `json:"default"`
	Minimum     *float64               `json:"minimum"`
	Maximum     *float64               `json:"maximum"`
	Pattern     string                 `json:"pattern"`
	WriteOnly   bool                   `json:"writeOnly"`
	Generate    any                    `json:"x-capstan-generate"`
	Items       *schemaNode            `json:"items"`
	Ref         string                 `json:"$ref"`
}

func (n *schemaNode) kind() string {
	switch t := n.Type.(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok && s != "null" {
				return s
			}
		}
	}
	if len(n.Properties) > 0 {
		return "object"
	}
	return ""
}

// schemaForm turns a values.schema.json into form fields, in the order of
// the property names.
func schemaForm(doc []byte) ([]formField, error) {
	var root schemaNode
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("the chart's values.schema.json is not JSON: %v", err)
	}
	return fieldsOf(&root, "", 0, false), nil
}

// fieldsOf turns n's properties into fields; secret says that n is
// writeOnly, or inside a value that is, so that each of its fields is a
// secret field: the secret inputs at their paths make the object up in
// the controller's layers, one string, number or boolean each.
func fieldsOf(n *schemaNode, prefix string, depth int, secret bool) []formField {
	names := make([]string, 0, len(n.Properties))
	for name := range n.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []formField
	for _, name := range names {
		p := n.Properties[name]
		// NOTE: a field's path joins its keys with ".", so a key that
		// holds ".", "[", "]" or "\\" (prometheus.io/scrape) would be
		// written nested, or as a list index, in the wrong place; such a
		// property is left to the YAML editor, as a $ref is.
		if p == nil || p.Ref != "" || strings.ContainsAny(name, `.[]\`) {
			continue
		}
		f := formField{Path: strings.TrimPrefix(prefix+"."+name, "."), Label: name, Description: p.Description,
			Pattern: p.Pattern, Min: p.Minimum, Max: p.Maximum, WriteOnly: secret || p.WriteOnly, Generated: p.Generate != nil}
		if p.Title != "" {
			f.Label = p.Title
		}
		for _, r := range n.Required {
			f.Required = f.Required || r == name
		}
		for _, e := range p.Enum {
			f.Enum = append(f.Enum, scalar(e))
		}
		f.enumValues, f.defaultValue = p.Enum, p.Default
		if p.Items != nil {
			f.itemKind = p.Items.kind()
		}
		switch k := p.kind(); {
		case len(f.Enum) > 0:
			f.Kind = "enum"
		case k == "object" && depth < maxFormDepth:
			f.Kind, f.Children = "object", fieldsOf(p, f.Path, depth+1, f.WriteOnly)
			if len(f.Children) == 0 {
				continue
			}
		case k == "array" && (f.WriteOnly || p.Items != nil && p.Items.WriteOnly):
			// NOTE: a secret input is one string, typed to a number or a
			// boolean at most: a secret list cannot be one, and a plain
			// input would write it into spec.values. It is given whole in
			// a Secret named in valuesFrom (secretValuesMessage).
			continue
		case k == "array" && p.Items != nil && scalarKind(p.Items.kind()):
			f.Kind, f.Item = "array", p.Items.kind()
		case scalarKind(k):
			f.Kind = k
		default:
			continue // the YAML editor sets it
		}
		if p.Default != nil {
			// NOTE: as the field shows a value, so that a list's
			// placeholder is a list the field takes.
			f.Default = f.valueOf(p.Default)
		}
		out = append(out, f)
	}
	return out
}

// chartForm is the form of the chart ch's values.schema.json, its secret
// fields those that the values package refuses in spec.values
// (markSecretFields); current are the add-on's values, nil for a new one,
// and from the layers of its valuesFrom that the page read (its
// ConfigMaps), composed over them.
func chartForm(ch *chartv2.Chart, current map[string]any, from []values.Layer) ([]formField, error) {
	fields, err := schemaForm(ch.Schema)
	if err != nil {
		return nil, err
	}
	return markSecretFields(fields, ch, current, from), nil
}

// markSecretFields makes the secret fields of the form exactly those whose
// value the controller and the API would refuse in spec.values as a
// secret input: it composes, with the values package, the values the form
// could send (the add-on's current values, else the schema's or the
// chart's default, else a stand-in of the field's type, at each field),
// with from, the ConfigMaps of the add-on's valuesFrom, over them as the
// controller layers them (a ConfigMap's mode: ldap makes
// ldap.bindPassword writeOnly), and each path that values.WriteOnlyPaths names, with every field under
// it, is a secret field. The chart's compiled schema decides, so a
// writeOnly reached through allOf, a $ref or a subchart's schema makes a
// password input too. A list with a secret input in it is no field, as a
// secret input is one string. When the chart's schema does not compile,
// the fields keep the writeOnly keyword as the schema spells it.
func markSecretFields(fields []formField, ch *chartv2.Chart, current map[string]any, from []values.Layer) []formField {
	secret, ok := compiledSecretPaths(fields, ch, current, from)
	if !ok {
		return fields
	}
	return applySecretPaths(fields, secret, false)
}

// compiledSecretPaths are the paths that the chart ch's compiled schema
// makes writeOnly over current with a stand-in at each field that holds no
// value, and the layers from over them (markSecretFields); ok is false when
// the schema does not compile.
func compiledSecretPaths(fields []formField, ch *chartv2.Chart, current map[string]any, from []values.Layer) (secret [][]string, ok bool) {
	probe := map[string]any{}
	if len(current) > 0 {
		// NOTE: a copy, so that the stand-ins never reach the values the
		// save compares with.
		raw, err := json.Marshal(current)
		if err != nil || json.Unmarshal(raw, &probe) != nil {
			return nil, false
		}
	}
	standIns(fields, ch.Values, probe)
	var errs []capstanv1.ValuesError
	res, err := values.Compose(values.Inputs{Chart: ch, Sources: values.Sources{Spec: probe, From: from}})
	var inv *values.InvalidError
	switch {
	case err == nil:
		errs = res.Errors
	case errors.As(err, &inv):
		// NOTE: past the bound of secret values the writeOnly errors
		// come with the refusal.
		errs = inv.Errors
	default:
		return nil, false
	}
	for _, e := range errs {
		if e.Path == values.SchemaErrorPath {
			return nil, false
		}
	}
	set, _, _ := values.WriteOnlyPaths(errs, probe, nil)
	secret = make([][]string, 0, len(set))
	for _, p := range set {
		secret = append(secret, p.Segments)
	}
	return secret, true
}

// remarkSecretFields draws again the fields of a save refused for secret
// inputs in spec.values: a field is secret when it was, or when the chart's
// schema makes it writeOnly under vals, the values the save sent, as a
// choice made in the same save (mode: ldap) may make secret a field the
// form drew plain over the defaults or the add-on's values, current. A
// field made secret shows no value, so what was typed in it is never
// echoed, and says it holds one when current has one, which it keeps when
// left empty. turned are the paths of those that held a value. from are
// the layers of the add-on's valuesFrom that the page read.
//
// NOTE: a field that was secret stays one, though vals may no longer make
// it writeOnly: what was typed in it is not shown, and a secret field only
// sends a value to a Secret.
func remarkSecretFields(fields []formField, ch *chartv2.Chart, vals, current map[string]any, from []values.Layer) (out []formField, turned, lists []string) {
	secret, ok := compiledSecretPaths(fields, ch, vals, from)
	if !ok {
		return fields, nil, nil
	}
	was := map[string]bool{}
	walkFields(fields, func(f *formField) {
		if f.WriteOnly {
			was[f.Path] = true
			secret = append(secret, strings.Split(f.Path, "."))
		}
	})
	// NOTE: a list the save's values make secret stays, plain: dropped
	// from the form drawn again, its value would not be posted back, and
	// the next save of an edit would take it out of spec.values without
	// putting it in a Secret. The refusal names it if it holds a secret.
	out = applySecretPaths(fields, secret, true)
	walkFields(out, func(f *formField) {
		if f.Kind == "array" && secretAtOrBelow(secret, strings.Split(f.Path, ".")) {
			lists = append(lists, f.Path)
		}
		if !f.WriteOnly || was[f.Path] {
			return
		}
		if f.Value != "" {
			turned = append(turned, f.Path)
		}
		f.Value = ""
		if current != nil {
			_, f.Held = render.FieldAt(current, strings.Split(f.Path, "."))
		}
	})
	return out, turned, lists
}

// secretAtOrBelow says whether one of the secret paths is path, above it
// or below it: a list field there holds a secret input, or is one.
func secretAtOrBelow(secret [][]string, path []string) bool {
	for _, s := range secret {
		n := min(len(s), len(path))
		if slices.Equal(s[:n], path[:n]) {
			return true
		}
	}
	return false
}

// walkFields calls do with each field that is not a fieldset.
func walkFields(fields []formField, do func(*formField)) {
	for i := range fields {
		if fields[i].Kind == "object" {
			walkFields(fields[i].Children, do)
			continue
		}
		do(&fields[i])
	}
}

// keepSecretFields makes secret each field that the posted form drew as a
// secret field, as its "secretField" inputs name them: a form drawn again
// after a refusal marks its fields over the values that save sent
// (remarkSecretFields), which the fields of the next save, marked over the
// defaults or the add-on's values, may not make secret, and what the user
// typed into its password input would go into spec.values.
//
// NOTE: a posted name only makes a field secret, never plain, so a forged
// one can send a value to a Secret, never into spec.values. A list is never
// made one: a secret input is one string.
func keepSecretFields(fields []formField, r *http.Request) {
	_ = r.PostFormValue("secretField")
	posted := map[string]bool{}
	for _, p := range r.PostForm["secretField"] {
		posted[p] = true
	}
	if len(posted) == 0 {
		return
	}
	walkFields(fields, func(f *formField) {
		if posted[f.Path] && f.Kind != "array" && !f.Generated {
			f.WriteOnly = true
		}
	})
}

// standIns sets in probe, at each field's path that holds no value, the
// value the field would send: its schema's default, else the chart's
// default in defaults, else a stand-in of its type; a list holds one item.
func standIns(fields []formField, defaults, probe map[string]any) {
	for _, f := range fields {
		if f.Kind == "object" {
			standIns(f.Children, defaults, probe)
			continue
		}
		path := strings.Split(f.Path, ".")
		if v, ok := render.FieldAt(probe, path); ok && v != nil && !emptyList(v) {
			continue
		}
		v := f.defaultValue
		if v == nil || emptyList(v) {
			v, _ = render.FieldAt(defaults, path)
		}
		if v == nil || emptyList(v) {
			v = standIn(f.Kind, f.enumValues)
			if f.Kind == "array" {
				v = []any{standIn(f.itemKind, nil)}
			}
		}
		setPath(probe, path, v)
	}
}

func emptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

// standIn is a value of the kind: the first of enum when there is one.
func standIn(kind string, enum []any) any {
	if len(enum) > 0 {
		return enum[0]
	}
	switch kind {
	case "integer", "number":
		return int64(0)
	case "boolean":
		return true
	}
	return "secret?"
}

// applySecretPaths makes each field at or under one of secret a secret
// field, and every other one not: a list with a secret input in it, or an
// object left with no field, is dropped, unless keepLists keeps such a
// list as a plain field.
func applySecretPaths(fields []formField, secret [][]string, keepLists bool) []formField {
	out := fields[:0]
	for _, f := range fields {
		path := strings.Split(f.Path, ".")
		below := false
		f.WriteOnly = false
		for _, s := range secret {
			if len(s) <= len(path) && slices.Equal(s, path[:len(s)]) {
				f.WriteOnly = true
			} else if len(s) > len(path) && slices.Equal(s[:len(path)], path) {
				below = true
			}
		}
		switch f.Kind {
		case "object":
			if f.Children = applySecretPaths(f.Children, secret, keepLists); len(f.Children) == 0 {
				continue
			}
		case "array":
			if f.WriteOnly || below {
				if !keepLists {
					continue
				}
				f.WriteOnly = false
			}
		}
		out = append(out, f)
	}
	return out
}

func scalarKind(k string) bool {
	return k == "string" || k == "integer" || k == "number" || k == "boolean"
}

func scalar(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		parts := make([]string, 0, len(t))
		for _, e := range t {
			parts = append(parts, scalar(e))
		}
		return strings.Join(parts, ", ")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Checkbox says whether the field is a checkbox: a boolean with a default.
// NOTE: an unticked box sends nothing, so a boolean without a default is a
// select of true, false and not set instead: left out, it takes the chart's
// values.yaml, which may say true, so false must be a choice of its own.
func (f formField) Checkbox() bool { return f.Kind == "boolean" && f.Default != "" }

// Options are the choices of a select. A value that is none of them is
// one more, so that the select sends it back as it was.
func (f formField) Options() []string {
	out := f.Enum
	if f.Kind == "boolean" {
		out = []string{"true", "false"}
	}
	if f.Value != "" && !slices.Contains(out, f.Value) {
		out = append(slices.Clone(out), f.Value)
	}
	return out
}

// valueOf is the text of v in the field's input: a list as JSON, which is
// YAML too, so that parseList reads it back as it was.
func (f formField) valueOf(v any) string {
	if _, list := v.([]any); list && f.Kind == "array" {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			return strings.TrimSpace(b.String())
		}
	}
	return scalar(v)
}

// shown is what the field's input sends back when nobody touches it, given
// the value at its path (had is false when there is none): nothing for a
// secret or a generated value, which the form never shows, and "true" or
// nothing for a checkbox, which is ticked as the template ticks it.
func (f formField) shown(v any, had bool) string {
	text := ""
	if had {
		text = f.valueOf(v)
	}
	switch {
	case f.WriteOnly || f.Generated:
		return ""
	case f.Checkbox():
		if text == "true" || (text == "" && f.Default == "true") {
			return "true"
		}
		return ""
	case f.multiline(text):
		return text
	}
	return sent(text)
}

// sent is text as a browser sends it back from a text input, trimmed as
// formValues trims it: an input drops the line breaks of its value.
func sent(text string) string {
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(text))
}

// multiline says whether a string field showing text is a text area: when
// the text, or the default, has a line break (a certificate, a config
// file, a script), which a text input would drop. A text area sends its
// text back whole, so it is taken whole, spaces and the last line break
// too.
func (f formField) multiline(text string) bool {
	return f.Kind == "string" && !f.WriteOnly && !f.Generated &&
		(strings.Contains(text, "\n") || strings.Contains(f.Default, "\n"))
}

// Textarea says whether the field's input is a text area (multiline).
func (f formField) Textarea() bool { return f.multiline(f.Value) }

// Rows is a text area's height: its lines and one more, from 3 to 20.
func (f formField) Rows() int {
	text := f.Value
	if text == "" {
		text = f.Default
	}
	return min(max(strings.Count(text, "\n")+2, 3), 20)
}

// formValues builds values and secret inputs from a posted form: typed
// from the schema, empty fields left out, writeOnly fields as secret inputs.
// It fills each field's Value (never a secret's) and its conversion error.
//
// current is the add-on's values when the form edits them (nil when it adds
// one): a field that comes back as the form showed it keeps its current
// value exactly, or its absence. That is how a save changes only what the
// person changed: a secret or a generated value, which the form never shows,
// stays when its field is left empty, and so do a false the chart's
// values.yaml would turn into true, a number that a text input would make a
// string, and a value of a type the field does not expect.
func formValues(fields []formField, r *http.Request, vals map[string]any, inputs map[string]string, current map[string]any) bool {
	ok := true
	for i := range fields {
		f := &fields[i]
		if f.Kind == "object" {
			ok = formValues(f.Children, r, vals, inputs, current) && ok
			continue
		}
		// NOTE: a browser sends a text area's line breaks as CRLF.
		posted := strings.ReplaceAll(r.PostFormValue(f.Input()), "\r\n", "\n")
		raw := strings.TrimSpace(posted)
		if f.Checkbox() && raw != "true" {
			raw = ""
		}
		path := strings.Split(f.Path, ".")
		var v any
		var had bool
		if current != nil {
			v, had = render.FieldAt(current, path)
		}
		if shown := ""; raw != "" {
			if had {
				shown = f.valueOf(v)
			}
			if f.multiline(shown) {
				raw = posted
			}
		}
		if current != nil {
			if raw == f.shown(v, had) {
				if had {
					setPath(vals, path, v)
					f.Held = f.WriteOnly || f.Generated
					if !f.Held {
						f.Value = f.valueOf(v)
					}
				}
				continue
			}
		}
		if f.Generated {
			continue
		}
		if f.Checkbox() && raw == "" {
			// An unticked box sends nothing: it says false only where the
			// chart's default is true, and is left out otherwise.
			if f.Default == "true" {
				raw = "false"
			}
		}
		if raw == "" {
			continue
		}
		if f.WriteOnly {
			inputs[f.Path] = raw
			continue
		}
		f.Value = raw
		var err error
		switch f.Kind {
		case "integer":
			v, err = strconv.ParseInt(raw, 10, 64)
		case "number":
			v, err = parseNumber(raw)
		case "boolean":
			v, err = strconv.ParseBool(raw)
		case "enum":
			v = raw
			if i := slices.Index(f.Enum, raw); i >= 0 && i < len(f.enumValues) {
				v = f.enumValues[i]
			}
		case "array":
			v, err = parseList(raw, f.Item)
		default:
			v = raw
		}
		if err != nil {
			f.Error, ok = "not a "+f.Kind, false
			if f.Kind == "array" {
				f.Error = err.Error()
			}
			continue
		}
		setPath(vals, path, v)
	}
	return ok
}

// parseList reads an array field: a YAML or JSON list, such as
// [a, "b, c"], each item read as the schema's item type, so that a comma
// stays in the item it is in and 80 stays a number.
func parseList(raw, item string) ([]any, error) {
	if item == "" {
		item = "string"
	}
	refused := fmt.Errorf("not a list of %ss: write it as YAML or JSON, such as [a, \"b, c\"] or [1, 2]", item)
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(raw), &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yamlv3.SequenceNode {
		return nil, refused
	}
	out := make([]any, 0, len(doc.Content[0].Content))
	for _, n := range doc.Content[0].Content {
		if n.Kind != yamlv3.ScalarNode || n.Tag == "!!null" {
			return nil, refused
		}
		var v any
		var err error
		switch item {
		case "integer":
			v, err = strconv.ParseInt(n.Value, 10, 64)
		case "number":
			v, err = parseNumber(n.Value)
		case "boolean":
			v, err = strconv.ParseBool(n.Value)
		default:
			v = n.Value
		}
		if err != nil {
			return nil, refused
		}
		out = append(out, v)
	}
	return out, nil
}

// parseNumber reads a number that JSON can hold: not NaN, nor infinite.
func parseNumber(raw string) (float64, error) {
	v, err := strconv.ParseFloat(raw, 64)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = fmt.Errorf("%s is not a finite number", raw)
	}
	return v, err
}

func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// markErrors puts each values error next to its field; it returns the
// errors no field shows.
func markErrors(fields []formField, errs []capstanv1.ValuesError) []capstanv1.ValuesError {
	var rest []capstanv1.ValuesError
	for _, e := range errs {
		if !markError(fields, "/"+strings.TrimPrefix(e.Path, "/"), e.Message) {
			rest = append(rest, e)
		}
	}
	return rest
}

func markError(fields []formField, path, msg string) bool {
	for i := range fields {
		f := &fields[i]
		if "/"+strings.ReplaceAll(f.Path, ".", "/") == path {
			f.Error = msg
			return true
		}
		if f.Kind == "object" && markError(f.Children, path, msg) {
			return true
		}
	}
	return false
}

// newForm is the data of the form page.
type newForm struct {
	Chart, Namespace, Name, YAML string
	Fields                       []formField
	Fetched, HasSchema           bool
	Problems                     []capstanv1.ValuesError
}

// newAddonPage shows, and takes, the form that adds an add-on from a chart
// link.
func (s *Server) newAddonPage(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.pageSession(w, r)
	if !ok {
		return
	}
	d := pageData{Title: "Add from a chart link", User: sess.user.Name, CSRF: sess.csrf}
	form := &newForm{}
	d.Form = form
	get := r.URL.Query().Get
	if r.Method == http.MethodPost {
		get = r.PostFormValue
		if code, msg := pageForm(w, r, sess, "created"); code != 0 {
			d.Error = msg
			s.render(w, "new", code, d)
			return
		}
	}
	form.Chart, form.Namespace, form.Name, form.YAML = strings.TrimSpace(get("chart")), strings.TrimSpace(get("namespace")), strings.TrimSpace(get("name")), get("yaml")
	if form.Chart == "" {
		s.render(w, "new", http.StatusOK, d)
		return
	}
	spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: form.Chart}}
	if strings.HasPrefix(form.Chart, "oci://") {
		// NOTE: an Addon's spec.chart.oci is the repository, with its tag
		// in spec.chart.version or its digest in spec.chart.digest; a link
		// as `helm install` takes it, kept whole, fetched well and then
		// made an Addon the API server refused, and the form has no field
		// to fix it with. The spec fetched is the spec created.
		chart, err := source.OCILink(form.Chart)
		if err != nil {
			d.Error = "Chart link: " + err.Error()
			s.render(w, "new", http.StatusUnprocessableEntity, d)
			return
		}
		spec.Chart = &chart
	}
	if errs := validation.IsDNS1123Label(form.Namespace); len(errs) > 0 {
		d.Error = "Namespace: " + strings.Join(errs, "; ")
		s.render(w, "new", http.StatusUnprocessableEntity, d)
		return
	}
	// NOTE: a GET carries no CSRF token (one in the link would be kept in
	// the history and in logs), and a page of a sibling subdomain is
	// same-site, so the Strict cookie goes with its links and images too.
	// The browser's Sec-Fetch-Site says where the request came from: only
	// this server's own pages, or an address typed in, make the controller
	// fetch a chart. Any method but POST, whose CSRF token was checked:
	// the route serves HEAD as GET, and a script of another site may send
	// one with the cookie.
	if r.Method != http.MethodPost && crossSite(r) {
		d.Error = "This form was opened from a link on another site, so the chart was not fetched. Check the chart link and the namespace, then fetch it from this page."
		s.render(w, "new", http.StatusForbidden, d)
		return
	}
	key := client.ObjectKey{Namespace: form.Namespace}
	if len(validation.IsDNS1123Subdomain(form.Name)) == 0 {
		key.Name = form.Name
	}
	art, err := s.pageFetch(r.Context(), sess.user, "create", key, spec)
	if e, ok := pageRefusal(w, err); ok {
		d.Error = e.Message
		s.render(w, "new", e.Code, d)
		return
	}
	if err != nil {
		d.Error = "The chart could not be fetched: " + err.Error()
		s.render(w, "new", http.StatusUnprocessableEntity, d)
		return
	}
	form.Fetched = true
	if doc := art.Chart.Chart.Schema; len(doc) > 0 {
		form.HasSchema = true
		if form.Fields, err = chartForm(art.Chart.Chart, nil, nil); err != nil {
			d.Error = err.Error()
			s.render(w, "new", http.StatusUnprocessableEntity, d)
			return
		}
	}
	if r.Method != http.MethodPost {
		s.render(w, "new", http.StatusOK, d)
		return
	}
	s.createFromForm(w, r, sess, d, form, spec, art)
}

// createFromForm checks the form's values against the chart's schema, on
// the server, and creates the Addon suspended when they pass.
func (s *Server) createFromForm(w http.ResponseWriter, r *http.Request, sess session, d pageData, form *newForm, spec capstanv1.AddonSpec, art *source.Artifact) {
	// NOTE: the namespace was checked before the chart was fetched.
	if errs := body.NameProblems(form.Name); len(errs) > 0 {
		d.Error = "Name: " + strings.Join(errs, "; ")
	}
	vals, inputs := map[string]any{}, map[string]string{}
	keepSecretFields(form.Fields, r)
	typed := formValues(form.Fields, r, vals, inputs, nil)
	if merged, err := mergeYAML(vals, form.YAML); err != nil {
		d.Error = "Additional values: " + err.Error()
	} else {
		vals = merged
	}
	if d.Error != "" || !typed {
		if d.Error == "" {
			d.Error = "Some values are not of their field's type."
		}
		s.render(w, "new", http.StatusUnprocessableEntity, d)
		return
	}
	errs, err := checkFormValues(art, form.Name, vals, inputs, nil, nil)
	errs, secret := secretValueErrors(errs, vals, nil)
	if err == nil && len(secret) > 0 {
		var turned, lists []string
		form.Fields, turned, lists = remarkSecretFields(form.Fields, art.Chart.Chart, vals, nil, nil)
		form.Problems = markErrors(form.Fields, errs)
		d.Error = secretValuesMessage(secret, vals, turned, lists, "nothing was created")
		s.render(w, "new", http.StatusUnprocessableEntity, d)
		return
	}
	if err == nil && len(errs) > 0 {
		form.Problems = markErrors(form.Fields, errs)
		d.Error = fmt.Sprintf("%d value(s) break the chart's schema; nothing was created.", len(errs))
		s.render(w, "new", http.StatusUnprocessableEntity, d)
		return
	}
	if err != nil {
		d.Error = err.Error()
		s.render(w, "new", http.StatusUnprocessableEntity, d)
		return
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: form.Namespace, Name: form.Name},
		Spec: spec}
	a.Spec.ManualSync = r.PostFormValue("manualSync") == "true"
	if len(vals) > 0 {
		raw, _ := json.Marshal(vals)
		a.Spec.Values = &apiextensionsv1.JSON{Raw: raw}
	}
	// NOTE: no check of its own: the values were checked against the
	// chart this form fetched, secret inputs among them.
	done, err := s.addOrCommit(r.Context(), sess.user, a, "", inputs, nil)
	if err != nil {
		d.Error = errorFor(err).Message
		s.render(w, "new", errorFor(err).Code, d)
		return
	}
	s.Log.Info("Page write", "user", sess.user.Name, "verb", done, "addon", form.Namespace+"/"+form.Name)
	http.Redirect(w, r, "/addons/"+url.PathEscape(form.Namespace)+"/"+url.PathEscape(form.Name)+"?done="+done, http.StatusSeeOther)
}

// checkFormValues checks a form's values and secret inputs against the
// chart's values.schema.json on the server, as the controller will read
// them: the secret inputs from a Secret, a layer over spec.values. kept are
// the paths of secret inputs the add-on has already and the form left
// empty, or that the add-on's valuesFrom sets at a targetPath: they are
// checked with a stand-in, and their errors are left out, since the form
// cannot know their value; but for a secret input that vals write there.
// from are the layers of the add-on's valuesFrom that the page read (its
// ConfigMaps), layered over vals, in their order, before the secret
// inputs.
func checkFormValues(art *source.Artifact, name string, vals map[string]any, inputs map[string]string, kept []string, from []values.Layer) ([]capstanv1.ValuesError, error) {
	// NOTE: each secret input is one targetPath layer, as the writers store
	// it (values.WriteSecretInputs), so Compose types a writeOnly number or
	// boolean here as the controller will.
	secret := maps.Clone(inputs)
	keptOnly := map[string]bool{}
	for _, p := range kept {
		if _, given := inputs[p]; !given {
			if secret == nil {
				secret = map[string]string{}
			}
			secret[p] = "kept"
			keptOnly[p] = true
		}
	}
	// standIn holds the JSON pointers of the stand-ins, as the errors
	// place them: the parsed targetPath's (servers[0].pin is
	// /servers/0/pin, a\.b is /a.b).
	standIn := map[string]bool{}
	src := values.Sources{Spec: vals, From: slices.Clone(from)}
	for i, p := range slices.Sorted(maps.Keys(secret)) {
		l, err := values.SecretInputLayer(i, values.ValuesPrefix(name)+"form", p, secret[p])
		if err != nil {
			return nil, fmt.Errorf("secret input %s: %w", p, err)
		}
		if keptOnly[p] {
			standIn[l.Pointer()] = true
		}
		src.From = append(src.From, l)
	}
	// NOTE: a value a ConfigMap sets at its targetPath is judged by the
	// controller's plan, as a stand-in's is: the form cannot change it.
	for _, l := range from {
		if p := l.Pointer(); p != "" {
			standIn[p] = true
		}
	}
	res, err := values.Compose(values.Inputs{Chart: art.Chart.Chart, Sources: src})
	if err != nil {
		return nil, err
	}
	var errs []capstanv1.ValuesError
	for _, e := range res.Errors {
		if e.Path == values.SchemaErrorPath {
			// The chart is broken, not the form's values.
			return nil, errors.New(e.Message)
		}
		// NOTE: a secret input written into spec.values at a stand-in's
		// path is judged all the same: it is spec.values that holds it;
		// one a ConfigMap holds is not the form's to write, and the
		// controller Blocks the Addon for it.
		if e.Rule == values.RuleWriteOnly {
			if _, inVals := values.Lookup(vals, values.PointerSegments(e.Path)); inVals {
				errs = append(errs, e)
			}
			continue
		}
		if !standIn["/"+strings.TrimPrefix(e.Path, "/")] {
			errs = append(errs, e)
		}
	}
	return errs, nil
}

// secretValueErrors sorts out the errors of the chart's schema that mark
// a value writeOnly: set names, as targetPaths, those that vals, the values to
// save, sets or changes from current, the add-on's spec.values (nil for a
// new one), secret inputs typed into the YAML that would be written into
// spec.values; rest is errs without those that current holds already,
// unchanged, which the save does not refuse, as the API does not: refusing
// them would make the add-on impossible to edit until they are moved.
func secretValueErrors(errs []capstanv1.ValuesError, vals, current map[string]any) (rest []capstanv1.ValuesError, set []values.SecretInputPath) {
	set, _, rest = values.WriteOnlyPaths(errs, vals, current)
	return rest, set
}

// secretValuesMessage is the page's refusal of secret inputs in the
// values to save, vals, whose outcome says what was left undone: each is
// taken out of the YAML and given as secretAdvice says, a scalar in its
// secret field. turned are the paths of fields that the form drew plain,
// with a value, and draws again as secret fields (remarkSecretFields), as
// the values the save sent make them writeOnly.
func secretValuesMessage(paths []values.SecretInputPath, vals map[string]any, turned, lists []string, outcome string) string {
	names, _ := addons.SecretInputNames(paths)
	var typed []string
	for _, p := range turned {
		if slices.Contains(names, p) {
			typed = append(typed, p)
		}
	}
	// NOTE: a path at or under a list field the form keeps plain
	// (remarkSecretFields) has no secret field, and may not be in the
	// YAML at all: the list field holds it.
	var inList, rest []values.SecretInputPath
	var listFields []string
	for _, p := range paths {
		if l := listOf(lists, p.Segments); l != "" {
			inList = append(inList, p)
			if !slices.Contains(listFields, l) {
				listFields = append(listFields, l)
			}
		} else {
			rest = append(rest, p)
		}
	}
	how := "the YAML would write into spec.values, where anyone who may view the add-on reads it: take it out of the YAML"
	if len(typed) > 0 {
		how = fmt.Sprintf("the form would write into spec.values, where anyone who may view the add-on reads it: with the values chosen, the field of %s is a secret field now, shown again empty, and the YAML must not hold it",
			strings.Join(typed, ", "))
	}
	var clauses []string
	if len(inList) > 0 {
		field := "the list field of " + strings.Join(listFields, ", ")
		if len(rest) == 0 {
			how = field + " would write into spec.values, where anyone who may view the add-on reads it"
		}
		clauses = append(clauses, fmt.Sprintf("for %s, clear %s (kept as it was, so that the list is not lost), and any of it in the YAML, then %s",
			strings.Join(listFields, ", "), field, addons.WholeSecret))
	}
	if len(rest) > 0 || len(inList) == 0 {
		advice := secretAdvice(vals, rest, pageSecrets(""), "")
		// NOTE: secretAdvice names the scalars only after paths of
		// another kind; after the list's clause they are named too.
		if whole, emptyKeys, scalars := sortSecretInputs(vals, rest); len(inList) > 0 && len(whole)+len(emptyKeys) == 0 {
			advice = "for " + strings.Join(scalars, ", ") + ", " + advice
		}
		clauses = append(clauses, advice)
	}
	if outcome != "" {
		clauses = append(clauses, outcome)
	}
	return fmt.Sprintf("The chart's schema marks %s writeOnly, a secret input, which %s; %s.", strings.Join(names, ", "), how, strings.Join(clauses, "; "))
}

// listOf returns the list field of lists that segs is at or under, or "".
func listOf(lists []string, segs []string) string {
	for _, l := range lists {
		path := strings.Split(l, ".")
		if len(path) <= len(segs) && slices.Equal(path, segs[:len(path)]) {
			return l
		}
	}
	return ""
}

// pageSecrets is how a page's form takes secret inputs: in their secret
// fields.
func pageSecrets(outcome string) secretWay {
	return secretWay{outcome: outcome, scalar: func([]string) string {
		return "type it into its secret field, which keeps it in a Secret (or name a Secret that holds it in the definition's valuesFrom)"
	}}
}

// mergeYAML merges a YAML map over vals, as Helm merges values files, and
// says what is wrong with text that is not a map.
func mergeYAML(vals map[string]any, text string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return vals, nil
	}
	extra := map[string]any{}
	if err := yaml.Unmarshal([]byte(text), &extra); err != nil {
		return nil, fmt.Errorf("the values are not a YAML map: %v", err)
	}
	return loader.MergeMaps(vals, extra), nil
}
