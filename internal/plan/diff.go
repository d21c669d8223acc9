package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Comparison is the outcome of comparing one object's dry-run result with
// its live state.
type Comparison struct {
	// Action is Create, Update or Unchanged.
	Action capstanv1.Action
	// Diff is the unified diff of an update, with Secret data hidden.
	Diff string
	// Digest identifies the change itself, Secret values included, so that a
	// plan's hash changes whenever what would be applied changes. It reveals
	// nothing: it is a hash of the whole change. An update's covers only the
	// fields the apply changes (ChangeDigest), not those around them. A
	// field the chart generates at random counts as a placeholder
	// (Generated): its bytes are new on every render.
	Digest string
}

// Compare decides what applying an object would do. manifest is the object
// Capstan applies, dryRun the API server's server-side dry-run result of
// applying it, and live the object as it is, or nil when it does not exist.
func Compare(manifest, live, dryRun *unstructured.Unstructured) (Comparison, error) {
	return CompareHiding(manifest, live, dryRun, nil)
}

// CompareHiding is Compare, with the diff also hiding every string that
// hides reports as holding a value never to be shown (HideValuesPair).
// hides may be nil.
func CompareHiding(manifest, live, dryRun *unstructured.Unstructured, hides func(string) bool) (Comparison, error) {
	return compare(manifest, live, dryRun, hides, Generated{})
}

// compare is CompareHiding, with the digest covering the fields that
// generated says the chart generates at random as a person can review
// them (Generated). The diff shows them as they are.
func compare(manifest, live, dryRun *unstructured.Unstructured, hides func(string) bool, generated Generated) (Comparison, error) {
	desired := Normalize(dryRun)
	if live == nil {
		// NOTE: the digest of a create is the manifest's, not the dry run's:
		// a dry-run create allocates values such as a Service's clusterIP
		// afresh each time, which would change the plan's hash on every
		// reconcile and make every approval stale.
		_, shown := RedactSecretPair(nil, desired)
		_, shown = HideValuesPair(nil, shown, hides)
		text, err := unified(nil, shown, dryRun)
		if err != nil {
			return Comparison{}, err
		}
		return Comparison{Action: capstanv1.ActionCreate, Diff: text, Digest: generated.CreateDigest(manifest)}, nil
	}
	current := Normalize(live)
	if equality.Semantic.DeepEqual(current.Object, desired.Object) {
		return Comparison{Action: capstanv1.ActionUnchanged}, nil
	}
	shownLive, shownDesired := RedactSecretPair(current, desired)
	shownLive, shownDesired = HideValuesPair(shownLive, shownDesired, hides)
	text, err := unified(shownLive, shownDesired, dryRun)
	if err != nil {
		return Comparison{}, err
	}
	return Comparison{Action: capstanv1.ActionUpdate, Diff: text, Digest: generated.changeDigest(manifest, current.Object, desired.Object)}, nil
}

// ChangeDigest identifies an update by what it changes: every field whose
// value differs between live and desired (both normalised), by its path,
// with its value before and after, or as added or removed. Fields that stay
// as they are do not count, wherever they are: an approval of a change
// stays valid while another writer changes a field beside it (an app that
// writes its own key into a ConfigMap the chart also sets), as it would not
// if the digest covered the diff's context lines. Any other change (another
// value, before or after, a field added or removed) gives another digest.
//
// NOTE: a path is a JSON array of map keys (strings) and list indexes
// (numbers), so that no key can pass for an index or for a path of two
// keys; each entry is JSON, so no value can pass for the next entry.
func ChangeDigest(live, desired map[string]any) string {
	var entries []any
	walkChanges(nil, live, desired, func(op string, path []any, before, after any) {
		b, _ := json.Marshal([]any{op, path, before, after})
		entries = append(entries, b)
	})
	return digest(append([]any{"update"}, entries...)...)
}

// walkChanges calls change for each field where from and to differ, in a
// stable order: map keys sorted, list items by index. Maps and lists on
// both sides are walked into; anything else that differs is one change.
func walkChanges(path []any, from, to any, change func(op string, path []any, before, after any)) {
	at := func(k any) []any { return append(slices.Clip(path), k) }
	switch f := from.(type) {
	case map[string]any:
		t, ok := to.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Collect(maps.Keys(f))
		for k := range t {
			if _, ok := f[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			fv, inFrom := f[k]
			tv, inTo := t[k]
			switch {
			case !inFrom:
				change("add", at(k), nil, tv)
			case !inTo:
				change("remove", at(k), fv, nil)
			default:
				walkChanges(at(k), fv, tv, change)
			}
		}
		return
	case []any:
		t, ok := to.([]any)
		if !ok {
			break
		}
		for i := range max(len(f), len(t)) {
			switch {
			case i >= len(f):
				change("add", at(i), nil, t[i])
			case i >= len(t):
				change("remove", at(i), f[i], nil)
			default:
				walkChanges(at(i), f[i], t[i], change)
			}
		}
		return
	}
	if !equality.Semantic.DeepEqual(from, to) {
		change("change", path, from, to)
	}
}

// unified renders a unified diff of two objects as YAML. A nil side is empty.
func unified(from, to *unstructured.Unstructured, named *unstructured.Unstructured) (string, error) {
	side := func(obj *unstructured.Unstructured) (string, error) {
		if obj == nil {
			return "", nil
		}
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return "", fmt.Errorf("encoding %s: %w", describe(named), err)
		}
		return string(b), nil
	}
	a, err := side(from)
	if err != nil {
		return "", err
	}
	b, err := side(to)
	if err != nil {
		return "", err
	}
	name := describe(named)
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        difflib.SplitLines(a),
		B:        difflib.SplitLines(b),
		FromFile: "live/" + name,
		ToFile:   "planned/" + name,
		Context:  3,
	})
}

// describe names an object as kind/namespace/name.
func describe(obj *unstructured.Unstructured) string {
	if obj == nil {
		return ""
	}
	if ns := obj.GetNamespace(); ns != "" {
		return obj.GetKind() + "/" + ns + "/" + obj.GetName()
	}
	return obj.GetKind() + "/" + obj.GetName()
}

// CreateDigest identifies the creation of manifest, for a plan's hash. A
// create planned without a dry run (its namespace or CRD does not exist yet)
// uses it too, so the hash stays the same once the dry run can be made.
func CreateDigest(manifest *unstructured.Unstructured) string {
	raw, _ := json.Marshal(manifest.Object)
	return digest("create", raw)
}

func digest(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		switch v := p.(type) {
		case []byte:
			fmt.Fprintf(h, "%d:", len(v))
			h.Write(v)
		default:
			s := fmt.Sprint(v)
			fmt.Fprintf(h, "%d:%s", len(s), s)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
