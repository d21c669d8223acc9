package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

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
	// nothing: it is a hash of the whole change.
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
		return Comparison{Action: capstanv1.ActionCreate, Diff: text, Digest: CreateDigest(manifest)}, nil
	}
	current := Normalize(live)
	if equality.Semantic.DeepEqual(current.Object, desired.Object) {
		return Comparison{Action: capstanv1.ActionUnchanged}, nil
	}
	full, err := unified(current, desired, dryRun)
	if err != nil {
		return Comparison{}, err
	}
	shownLive, shownDesired := RedactSecretPair(current, desired)
	shownLive, shownDesired = HideValuesPair(shownLive, shownDesired, hides)
	text, err := unified(shownLive, shownDesired, dryRun)
	if err != nil {
		return Comparison{}, err
	}
	return Comparison{Action: capstanv1.ActionUpdate, Diff: text, Digest: digest("update", []byte(full))}, nil
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
