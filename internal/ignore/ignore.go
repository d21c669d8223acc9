// Package ignore leaves fields of applied objects to whoever else manages
// them (spec.ignore): an autoscaler's replicas, an injected caBundle. For an
// object that exists, each ignored path takes the value the object runs
// with, or is left out when the object has none, so that applying the
// manifest changes nothing there. It is pure: the caller reads the live
// object.
package ignore

import (
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// ownLabels are the labels Capstan finds its objects by: a rule may not
// leave them to anyone else.
var ownLabels = map[string]bool{
	capstanv1.AddonLabel:          true,
	capstanv1.AddonNamespaceLabel: true,
	capstanv1.ManagedByLabel:      true,
}

// Check refuses rules whose paths are not JSON pointers, or name what
// Capstan must set itself: the object's identity (apiVersion, kind,
// metadata other than annotations and labels) and Capstan's own labels.
func Check(rules []capstanv1.IgnoreRule) error {
	for i, r := range rules {
		if len(r.Paths) == 0 {
			return fmt.Errorf("spec.ignore[%d].paths is empty: name at least one field, such as /spec/replicas", i)
		}
		for j, p := range r.Paths {
			if err := CheckPath(p); err != nil {
				return fmt.Errorf("spec.ignore[%d].paths[%d]: %w", i, j, err)
			}
		}
	}
	return nil
}

// CheckPath refuses one path as Check does.
func CheckPath(p string) error {
	tokens, err := Parse(p)
	if err != nil {
		return err
	}
	if err := checkTokens(tokens); err != nil {
		return fmt.Errorf("%q: %w", p, err)
	}
	return nil
}

func checkTokens(t []string) error {
	switch t[0] {
	case "apiVersion", "kind":
		return fmt.Errorf("an object's %s is what it is, and cannot be left to anyone else", t[0])
	case "metadata":
		if len(t) < 3 || (t[1] != "annotations" && t[1] != "labels") {
			return fmt.Errorf("of metadata, only one annotation or label can be ignored, such as /metadata/annotations/example.com~1hash")
		}
		if t[1] == "labels" && ownLabels[t[2]] {
			return fmt.Errorf("the label %s is how Capstan finds its objects, so it is never ignored", t[2])
		}
	}
	return nil
}

// Parse splits a JSON pointer (RFC 6901) into its tokens, unescaped.
func Parse(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return nil, fmt.Errorf("%q is not a JSON pointer to a field: write it as /spec/replicas", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if s == "" {
			return nil, fmt.Errorf("%q has an empty step: write it as /spec/replicas", p)
		}
		if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(s), "~") {
			return nil, fmt.Errorf("%q: a ~ is written ~0 and a / is written ~1", p)
		}
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
	}
	return parts, nil
}

// Paths returns the paths of every rule whose target selects obj.
func Paths(rules []capstanv1.IgnoreRule, obj *unstructured.Unstructured) []string {
	var out []string
	for _, r := range rules {
		if Selects(r.Target, obj) {
			out = append(out, r.Paths...)
		}
	}
	return out
}

// Selects reports whether a target selects obj.
func Selects(t capstanv1.IgnoreTarget, obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return (t.Group == nil || *t.Group == gvk.Group) && (t.Kind == "" || t.Kind == gvk.Kind) &&
		(t.Namespace == "" || t.Namespace == obj.GetNamespace()) && (t.Name == "" || t.Name == obj.GetName())
}

// Result is what Keep did with the ignored paths of one object.
type Result struct {
	// Kept are the paths where the manifest differed from what runs, now
	// set to what runs, or left out where the object runs with none.
	Kept []string
	// Absent are the paths neither the object nor the manifest has: a
	// path written wrong, such as /spec/replica, would otherwise keep
	// nothing without a word.
	Absent []string
	// Moved are the paths whose index names another item in the object
	// than in the manifest (see sameItems), left as the manifest has them.
	Moved []string
	// Unheld are the paths the object runs with a value at, or without,
	// that the manifest cannot take as it runs, left as the manifest has
	// them: the way passes a list the manifest lacks or holds too few
	// items of (/spec/template/spec/tolerations/0 of a chart that renders
	// no tolerations), or a value that holds no fields; or the path is an
	// item of a list the object runs without, which is not removed, so
	// that the items after it keep their places.
	Unheld []string
}

// Keep sets each path of manifest to live's value there, or removes it
// when live has none, and says of each path what it did (Result). Paths
// must have passed Check. Every path that differs and is not kept is
// reported, as Absent, Moved or Unheld, so that no rule keeps nothing
// without a word. A path that names a list item by an index RFC 6901 does
// not write (checkIndexes) is an error, and nothing is kept then.
//
// Of a core Secret, /stringData/KEY is kept as /data/KEY, and the
// manifest's stringData.KEY is written into data.KEY first (see
// secretData), so that what is compared and kept is what the Secret holds.
func Keep(manifest, live *unstructured.Unstructured, paths []string) (Result, error) {
	var r Result
	for _, p := range paths {
		tokens, err := Parse(p)
		if err != nil {
			continue
		}
		if err := checkIndexes(p, manifest.Object, live.Object, tokens); err != nil {
			return Result{}, err
		}
	}
	for _, p := range paths {
		tokens, err := Parse(p)
		if err != nil {
			continue
		}
		tokens = secretData(manifest, tokens)
		if !sameItems(manifest.Object, live.Object, tokens) {
			r.Moved = append(r.Moved, p)
			continue
		}
		want, has := render.FieldAt(live.Object, tokens)
		was, had := render.FieldAt(manifest.Object, tokens)
		switch {
		case !has && !had:
			r.Absent = append(r.Absent, p)
			continue
		case has && had && reflect.DeepEqual(want, was):
			continue
		case has:
			if !set(manifest.Object, live.Object, tokens, runtime.DeepCopyJSONValue(want)) {
				r.Unheld = append(r.Unheld, p)
				continue
			}
		case !remove(manifest.Object, tokens):
			r.Unheld = append(r.Unheld, p)
			continue
		}
		r.Kept = append(r.Kept, p)
	}
	return r, nil
}

// checkIndexes refuses a path whose token names an item of a list, in
// manifest or in live, by a number written otherwise than RFC 6901 writes
// an index: with a sign or a leading zero, such as +1, 01 or -0.
//
// NOTE: strconv reads +1 and 01 as 1, so such a path would keep the
// second item, where every other reader of JSON pointers finds none. Only
// where the token meets a list is it an index: 01 is a fine key of a
// ConfigMap's data, so Check, which sees no object, cannot refuse it.
func checkIndexes(p string, manifest, live map[string]any, tokens []string) error {
	for i := 1; i < len(tokens); i++ {
		tok := tokens[i]
		n, err := strconv.Atoi(tok)
		if err != nil || isIndex(tok) {
			continue
		}
		m, _ := render.FieldAt(manifest, tokens[:i])
		l, _ := render.FieldAt(live, tokens[:i])
		if !isList(m) && !isList(l) {
			continue
		}
		msg := fmt.Sprintf("%q: %q names a list item, and a JSON pointer (RFC 6901) writes an index in digits, with no sign and no leading zero", p, tok)
		if n >= 0 {
			steps := strings.Split(p[1:], "/")
			steps[i] = strconv.Itoa(n)
			msg += ": write /" + strings.Join(steps, "/")
		}
		return errors.New(msg)
	}
	return nil
}

// isIndex reports whether tok is a list index as RFC 6901 writes one: 0,
// or digits that do not begin with 0.
func isIndex(tok string) bool {
	if tok == "" || (tok[0] == '0' && tok != "0") {
		return false
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// secretData returns the path Keep keeps for tokens on manifest: on a core
// Secret, /stringData and /stringData/KEY become /data and /data/KEY, and
// the manifest's stringData keys under that path are written, base64, into
// data and dropped from stringData.
//
// NOTE: the API server stores no stringData: it writes each key into data,
// over what data holds. A rotated password kept in data.KEY would
// otherwise be overwritten by the chart's stringData.KEY on every sync,
// and a rule on /stringData/KEY would find no such field in the object as
// it runs, nor in the manifest once keepGenerated moved a generated key
// into data.
func secretData(manifest *unstructured.Unstructured, tokens []string) []string {
	if !render.IsCoreSecret(manifest) || len(tokens) > 2 || (tokens[0] != "data" && tokens[0] != "stringData") {
		return tokens
	}
	stringData, _ := manifest.Object["stringData"].(map[string]any)
	for k, v := range stringData {
		if s, ok := v.(string); ok && (len(tokens) == 1 || k == tokens[1]) {
			render.SetSecretData(manifest.Object, k, base64.StdEncoding.EncodeToString([]byte(s)))
		}
	}
	return append([]string{"data"}, tokens[1:]...)
}

// itemKeys are the fields by which Kubernetes tells the items of a list
// apart (its list-map and patch-merge keys): name for containers, env,
// volumes and most others; containerPort or port with protocol for ports;
// mountPath, devicePath, ip, and topologyKey with whenUnsatisfiable.
var itemKeys = []string{"name", "containerPort", "port", "protocol", "mountPath", "devicePath", "ip", "topologyKey", "whenUnsatisfiable"}

// sameItems reports whether each list index on the way of tokens names the
// same item in manifest as in live: where both hold an object there, no key
// of itemKeys that both carry differs. A path to a key itself is refused
// too when the key differs: keeping it would turn the chart's item into
// the other one.
//
// NOTE: a pointer names a list item by its place, but server-side apply
// matches containers, env and ports by their keys. An injector or a
// mutating policy that puts a container before the chart's would
// otherwise have /spec/template/spec/containers/0/image copy its
// container's image into the chart's, which the apply then gives to the
// chart's container by name. Lists of scalars, and objects without any of
// these keys, have nothing to tell their items apart by, and are indexed
// as they are.
func sameItems(manifest, live map[string]any, tokens []string) bool {
	for i := 1; i < len(tokens); i++ {
		m, _ := render.FieldAt(manifest, tokens[:i+1])
		l, _ := render.FieldAt(live, tokens[:i+1])
		mi, okm := m.(map[string]any)
		li, okl := l.(map[string]any)
		if !okm || !okl {
			continue
		}
		if list, _ := render.FieldAt(manifest, tokens[:i]); !isList(list) {
			continue
		}
		for _, k := range itemKeys {
			a, hasA := mi[k]
			b, hasB := li[k]
			if hasA && hasB && fmt.Sprint(a) != fmt.Sprint(b) {
				return false
			}
		}
	}
	return true
}

func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}

// set puts value at tokens, making the objects on the way that are
// missing where live has objects; it reports false when the way passes a
// list the manifest lacks or holds too few items of, or a value that holds
// no fields, and then leaves obj as it was: a path left as the chart
// renders it must not leave empty objects behind, which the apply would
// own.
func set(obj, live map[string]any, tokens []string, value any) bool {
	// made is the first step of the way that set made, and was what obj
	// held there (an explicit null, or nothing): all it made is below it.
	made := 0
	var was any
	var had bool
	undo := func() bool {
		switch {
		case made == 0:
		case had:
			render.SetFieldAt(obj, tokens[:made], was)
		default:
			remove(obj, tokens[:made])
		}
		return false
	}
	for i := 1; i < len(tokens); i++ {
		v, ok := render.FieldAt(obj, tokens[:i])
		if ok && v != nil {
			continue
		}
		if made == 0 {
			made, was, had = i, v, ok
		}
		if shape, _ := render.FieldAt(live, tokens[:i]); !isObject(shape) || !render.SetFieldAt(obj, tokens[:i], map[string]any{}) {
			return undo()
		}
	}
	if !render.SetFieldAt(obj, tokens, value) {
		return undo()
	}
	return true
}

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// remove deletes the field at tokens and reports whether it did; a list
// item is not removed, so that the items after it keep their places.
func remove(obj map[string]any, tokens []string) bool {
	parent, ok := render.FieldAt(obj, tokens[:len(tokens)-1])
	m, isMap := parent.(map[string]any)
	if !ok || !isMap {
		return false
	}
	delete(m, tokens[len(tokens)-1])
	return true
}
