package corpus_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// generated is a field a chart fills from random data (genCA,
// randAlphaNum), so two installs never agree on it: it is compared for
// presence only.
type generated struct {
	key  string   // the object, as keyOf names it
	path []string // the field; a number indexes a list
}

// field walks path in obj and returns the map or list that holds the
// field, and the field's key or index in it.
func field(obj map[string]any, path []string) (parent any, last string) {
	var cur any = obj
	for _, p := range path[:len(path)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return nil, ""
			}
			cur = c[i]
		default:
			return nil, ""
		}
	}
	return cur, path[len(path)-1]
}

// takeField removes the field at path from obj and returns its value.
func takeField(obj map[string]any, path []string) (any, bool) {
	parent, last := field(obj, path)
	switch p := parent.(type) {
	case map[string]any:
		v, ok := p[last]
		delete(p, last)
		return v, ok
	case []any:
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(p) {
			v := p[i]
			p[i] = nil
			return v, true
		}
	}
	return nil, false
}

// compare requires the same objects with the same content, after
// normalising both sides.
func compare(t *testing.T, helm, capstan map[string]*unstructured.Unstructured, gen []generated) {
	t.Helper()
	for _, k := range slices.Sorted(mapsKeys(helm)) {
		if _, ok := capstan[k]; !ok {
			t.Errorf("%s: helm install made it, Capstan did not", k)
		}
	}
	for _, k := range slices.Sorted(mapsKeys(capstan)) {
		if _, ok := helm[k]; !ok {
			t.Errorf("%s: Capstan made it, helm install did not", k)
		}
	}
	for _, k := range slices.Sorted(mapsKeys(helm)) {
		c, ok := capstan[k]
		if !ok {
			continue
		}
		h, c := normalise(helm[k]), normalise(c)
		for _, g := range gen {
			if g.key != k {
				continue
			}
			for side, u := range map[string]*unstructured.Unstructured{"helm": h, "capstan": c} {
				if v, found := takeField(u.Object, g.path); !found || v == "" || v == nil {
					t.Errorf("%s: the generated field %s is empty after %s", k, strings.Join(g.path, "."), side)
				}
			}
		}
		if diff := cmp.Diff(h.Object, c.Object); diff != "" {
			t.Errorf("%s differs (-helm +capstan):\n%s", k, diff)
		}
	}
}

// normalise removes what differs between any two installs of the same
// object, and what each tool records of itself: the server's bookkeeping
// (managed fields, resource version, uid, timestamps, generation), status,
// allocated addresses and ports, the uid a Job's selector carries, and the
// two tools' own labels and annotations.
func normalise(in *unstructured.Unstructured) *unstructured.Unstructured {
	u := in.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	delete(u.Object, "status")
	u.SetAnnotations(without(u.GetAnnotations(), "meta.helm.sh/", "capstan.dev/", "deployment.kubernetes.io/revision"))
	u.SetLabels(without(u.GetLabels(), "capstan.dev/", managedBy))
	switch u.GetKind() {
	case "Service":
		unstructured.RemoveNestedField(u.Object, "spec", "clusterIP")
		unstructured.RemoveNestedField(u.Object, "spec", "clusterIPs")
		unstructured.RemoveNestedField(u.Object, "spec", "healthCheckNodePort")
		if ports, ok, _ := unstructured.NestedSlice(u.Object, "spec", "ports"); ok {
			for _, p := range ports {
				delete(p.(map[string]any), "nodePort")
			}
			_ = unstructured.SetNestedSlice(u.Object, ports, "spec", "ports")
		}
	case "Job":
		for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
			if m, ok, _ := unstructured.NestedStringMap(u.Object, path...); ok {
				_ = unstructured.SetNestedStringMap(u.Object, without(m, "controller-uid", "batch.kubernetes.io/controller-uid"), path...)
			}
		}
	}
	return u
}

// managedBy names the tool that manages an object. Charts set it to
// .Release.Service ("Helm"); Capstan sets it to "capstan" on every object
// it applies, and watches its objects by it.
const managedBy = "app.kubernetes.io/managed-by"

// without returns m less the keys that start with any of prefixes; nil
// when nothing is left.
func without(m map[string]string, prefixes ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
