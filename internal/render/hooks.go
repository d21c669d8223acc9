package render

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	release "helm.sh/helm/v4/pkg/release/v1"
)

// TestEvent is the event of a chart's tests (helm.sh/hook: test), which
// run when a person or spec.test asks, never with a sync.
const TestEvent = string(release.HookTest)

// KnownHookEvents lists, sorted, the hook event spellings Helm accepts.
func KnownHookEvents() []string { return slices.Sorted(maps.Keys(knownEvents)) }

// knownEvents maps the spellings of the hook events Helm accepts to the event.
// "test-success" is Helm 2's name for a test hook, which Helm still accepts.
var knownEvents = map[string]release.HookEvent{
	string(release.HookPreInstall):   release.HookPreInstall,
	string(release.HookPostInstall):  release.HookPostInstall,
	string(release.HookPreDelete):    release.HookPreDelete,
	string(release.HookPostDelete):   release.HookPostDelete,
	string(release.HookPreUpgrade):   release.HookPreUpgrade,
	string(release.HookPostUpgrade):  release.HookPostUpgrade,
	string(release.HookPreRollback):  release.HookPreRollback,
	string(release.HookPostRollback): release.HookPostRollback,
	string(release.HookTest):         release.HookTest,
	"test-success":                   release.HookTest,
}

// checkAnnotations refuses an object whose annotations are not all strings
// (helm.sh/hook-weight: 5, unquoted; null is "", as the API server reads
// it). Read as unstructured reads them, such annotations are none at all,
// so a pre-delete hook would be taken for an object to apply now. Helm's
// manifest sorter reads 5 as "5" and keeps the hook, but the API server
// refuses the object when it is made: at install, or, for a pre-delete
// hook, only when the release is removed, where a failure stops the
// removal. Refused here, the chart fails at its first render instead.
func checkAnnotations(obj *unstructured.Unstructured) error {
	return checkStrings(obj, "annotations")
}

// CheckMetadata refuses an object whose labels or annotations are not all
// strings (tier: 1, version: 1.16 or enabled: true, unquoted; null is "",
// as the API server reads it). Read as unstructured reads them, such
// labels are none at all: the object would be applied without every label
// its source gave it, and patched without its annotations. The error names
// the object and the key, never the value.
func CheckMetadata(obj *unstructured.Unstructured) error {
	if err := checkStrings(obj, "labels", "annotations"); err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// checkStrings refuses obj when a metadata field of fields (labels,
// annotations) is not a map whose values are strings or null.
func checkStrings(obj *unstructured.Unstructured, fields ...string) error {
	meta, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return nil
	}
	for _, field := range fields {
		raw := meta[field]
		if raw == nil {
			continue
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("metadata.%s is %s, not a map of names to strings", field, kindOfValue(raw))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			switch m[k].(type) {
			case string, nil:
				continue
			}
			return &notStringError{field: strings.TrimSuffix(field, "s"), key: k, value: m[k]}
		}
	}
	return nil
}

// notStringError is a label or annotation whose value is not a string.
type notStringError struct {
	// field is "label" or "annotation", key its name.
	field, key string
	value      any
}

func (e *notStringError) Error() string {
	return fmt.Sprintf("the %s %s is %s, not a string: quote the value", e.field, e.key, kindOfValue(e.value))
}

// kindOfValue says what a decoded YAML or JSON value is, without the value.
func kindOfValue(v any) string {
	switch v.(type) {
	case int, int64, float64:
		return "a number"
	case bool:
		return "true or false"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// withStringAnnotations returns obj, or a copy of it whose annotations
// that are numbers or booleans are written as strings, as Helm's manifest
// sorter reads a document's head into strings.
func withStringAnnotations(obj *unstructured.Unstructured) *unstructured.Unstructured {
	raw, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	ann, ok := raw["annotations"].(map[string]any)
	if !ok {
		return obj
	}
	var out map[string]any
	for k, v := range ann {
		var str string
		switch v := v.(type) {
		case string:
			continue
		case nil:
			str = "" // NOTE: as Helm reads a null into a string
		case int64:
			str = strconv.FormatInt(v, 10)
		case float64:
			str = strconv.FormatFloat(v, 'g', -1, 32)
		case bool:
			str = strconv.FormatBool(v)
		default:
			continue // NOTE: a map or a list is no string; checkAnnotations refuses it
		}
		if out == nil {
			out = maps.Clone(ann)
		}
		out[k] = str
	}
	if out == nil {
		return obj
	}
	obj = obj.DeepCopy()
	obj.Object["metadata"].(map[string]any)["annotations"] = out
	return obj
}

// parseHook reads the Helm hook annotations of obj. It reports false when obj
// is not a hook: it has no helm.sh/hook annotation. It parses as Helm's
// manifest sorter does: events and delete policies are comma-separated,
// trimmed and lowercased, and a weight that strconv.Atoi refuses (such as
// "1.5" or " 5") is 0. Unlike Helm, which drops a hook with an unknown event
// without a word, it keeps the hook and lists the unknown events; an empty
// item (helm.sh/hook: "" or a trailing comma) is the unknown event "", as it
// is for Helm, and the unknown delete policy "" likewise.
func parseHook(obj *unstructured.Unstructured, template string) (Hook, bool) {
	annotations := obj.GetAnnotations()
	events, ok := annotations[release.HookAnnotation]
	if !ok {
		return Hook{}, false
	}
	h := Hook{Object: obj, Template: template, Events: []string{}, Annotation: release.HookAnnotation}
	for e := range strings.SplitSeq(events, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if known, ok := knownEvents[e]; ok {
			if !slices.Contains(h.Events, string(known)) {
				h.Events = append(h.Events, string(known))
			}
			continue
		}
		h.UnknownEvents = append(h.UnknownEvents, e)
	}
	if w, err := strconv.Atoi(annotations[release.HookWeightAnnotation]); err == nil {
		h.Weight = w
	}
	if policies, ok := annotations[release.HookDeleteAnnotation]; ok {
		// NOTE: an empty item stays, as in Helm's sorter: a policy
		// templated from a value that is "" is the unknown policy "",
		// which does nothing, and no default applies over it.
		for p := range strings.SplitSeq(policies, ",") {
			h.DeletePolicies = append(h.DeletePolicies, strings.ToLower(strings.TrimSpace(p)))
		}
	}
	return h, true
}

// IsTest reports whether h is one of a chart's tests, which run only
// when asked (TestEvent).
func (h Hook) IsTest() bool {
	return slices.Contains(h.Events, string(release.HookTest))
}

// TestOnly reports whether h runs only as a test: a hook of a sync's
// events too (pre-install,test) runs with the sync, as Helm runs it.
func (h Hook) TestOnly() bool {
	return h.IsTest() && !slices.ContainsFunc(h.Events, func(e string) bool { return e != TestEvent })
}

// splitAnnotation splits the comma-separated delete policies of a
// folder's hook, trimmed and lowercased, and leaves out empty items, as
// Argo CD does.
func splitAnnotation(v string) []string {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}
