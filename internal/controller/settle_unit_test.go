package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
)

// TestClusterSideCoversTheSpec checks that every field of AddonSpec is
// either written from a definition file or kept from the cluster
// (withClusterSide), and not both: a field the definition format cannot
// hold, and that withClusterSide does not keep, would be removed from the
// Addons git manages at every sync.
func TestClusterSideCoversTheSpec(t *testing.T) {
	// Every field of a definition set: what its Addon holds is what a file
	// can write.
	def := &gitops.Definition{}
	fill(reflect.ValueOf(def).Elem())
	a, err := def.Addon(gitops.Origin{Namespace: "ns", Repository: "r", URL: "https://x", Commit: "c", File: "addons/x.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	// Every field of a live spec set: what withClusterSide copies is what
	// the cluster keeps.
	live := &capstanv1.AddonSpec{}
	fill(reflect.ValueOf(live).Elem())
	kept := &capstanv1.AddonSpec{}
	withClusterSide(kept, live)

	written, cluster := reflect.ValueOf(a.Spec), reflect.ValueOf(*kept)
	specType := written.Type()
	for i := range specType.NumField() {
		name := "spec." + strings.Split(specType.Field(i).Tag.Get("json"), ",")[0]
		w, k := !written.Field(i).IsZero(), !cluster.Field(i).IsZero()
		switch {
		case w && k:
			t.Errorf("%s is written from the definition and also kept from the cluster: the file could not change it", name)
		case !w && !k:
			t.Errorf("%s is neither written from a definition nor kept from the cluster (withClusterSide): every sync would remove it", name)
		case w:
			// NOTE: a field of a struct the file writes that the format
			// cannot hold would be lost with its parent.
			for _, p := range zeroLeaves(written.Field(i), name) {
				t.Errorf("%s is not written from a definition, and its parent is: every sync would remove it", p)
			}
		}
	}
}

// fill sets every field that v reaches to a value that is not zero: true,
// 1, the string "1m" (a valid duration too), one element or one key.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.String:
		v.SetString("1m")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("1m"))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// zeroLeaves lists the paths of the exported fields under v that are zero.
func zeroLeaves(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroLeaves(v.Elem(), path)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			break
		}
		if v.Len() == 0 {
			return []string{path}
		}
		return zeroLeaves(v.Index(0), path+"[0]")
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			out = append(out, zeroLeaves(v.Field(i), path+"."+strings.Split(f.Tag.Get("json"), ",")[0])...)
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// TestUnkeptSpec checks what the syncer remembers of a spec the API server
// did not keep: the message names the fields, and the memory holds while
// the file's spec and the Addon's stay as they were, not after.
func TestUnkeptSpec(t *testing.T) {
	intended := &capstanv1.AddonSpec{Title: "Grafana", Suspend: true,
		Values: &apiextensionsv1.JSON{Raw: []byte(`{"a":1,"b":{"c":2}}`)}}
	kept := intended.DeepCopy()
	kept.Title = ""
	kept.Values = &apiextensionsv1.JSON{Raw: []byte(`{"b":{"c":3},"a":1}`)}
	if got, want := strings.Join(unkeptFields(intended, kept), " "), "spec.title spec.values.b.c"; got != want {
		t.Errorf("fields %q; want %q", got, want)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "grafana"}}
	msg := unkeptMessage("addons/grafana.yaml", a, unkeptFields(intended, kept))
	for _, s := range []string{"addons/grafana.yaml:", "spec.title, spec.values.b.c", "ns/grafana", "older than the controller"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q does not say %q", msg, s)
		}
	}

	now := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	r := &AddonRepositoryReconciler{Now: func() time.Time { return now }}
	if _, ok := r.stillUnkept("u1", "addons/grafana.yaml", intended, kept); ok {
		t.Error("an Addon never written is remembered")
	}
	r.rememberUnkept("u1", "addons/grafana.yaml", intended, kept, msg)
	// The same values, their keys in another order, are the same spec.
	again := kept.DeepCopy()
	again.Values = &apiextensionsv1.JSON{Raw: []byte(`{"a":1,"b":{"c":3}}`)}
	if got, ok := r.stillUnkept("u1", "addons/grafana.yaml", intended, again); !ok || got != msg {
		t.Errorf("the same specs: %q %v; want the message", got, ok)
	}
	changedFile := intended.DeepCopy()
	changedFile.Category = "monitoring"
	changedAddon := kept.DeepCopy()
	changedAddon.Suspend = false
	for name, tc := range map[string]struct {
		uid            types.UID
		file           string
		intended, live *capstanv1.AddonSpec
	}{
		"another Addon":       {"u2", "addons/grafana.yaml", intended, kept},
		"the file changed":    {"u1", "addons/grafana.yaml", changedFile, kept},
		"the Addon's changed": {"u1", "addons/grafana.yaml", intended, changedAddon},
		"the file moved":      {"u1", "addons/monitoring/grafana.yaml", intended, kept},
	} {
		if _, ok := r.stillUnkept(tc.uid, tc.file, tc.intended, tc.live); ok {
			t.Errorf("%s: still remembered", name)
		}
	}
	now = now.Add(unkeptRetry)
	if _, ok := r.stillUnkept("u1", "addons/grafana.yaml", intended, kept); ok {
		t.Error("still remembered after unkeptRetry: a CRD installed since would not be written")
	}
	now = now.Add(-time.Minute)
	r.forgetUnkept("u1")
	if _, ok := r.stillUnkept("u1", "addons/grafana.yaml", intended, kept); ok {
		t.Error("forgotten, and still remembered")
	}
	// More Addons than the bound, synced in the same order at each
	// interval: the first maxUnkept stay remembered, and the memory is
	// not started over.
	for range 2 {
		for i := range maxUnkept + 100 {
			r.rememberUnkept(types.UID(fmt.Sprint(i)), "addons/grafana.yaml", intended, kept, msg)
		}
	}
	if len(r.unkept) > maxUnkept {
		t.Errorf("%d Addons remembered; at most %d", len(r.unkept), maxUnkept)
	}
	hits := 0
	for i := range maxUnkept + 100 {
		if _, ok := r.stillUnkept(types.UID(fmt.Sprint(i)), "addons/grafana.yaml", intended, kept); ok {
			hits++
		}
	}
	if hits != maxUnkept {
		t.Errorf("%d of %d Addons remembered past the bound; want %d", hits, maxUnkept+100, maxUnkept)
	}
	// Once the entries are older than unkeptRetry, new ones take their
	// place.
	now = now.Add(unkeptRetry)
	r.rememberUnkept("late", "addons/grafana.yaml", intended, kept, msg)
	if _, ok := r.stillUnkept("late", "addons/grafana.yaml", intended, kept); !ok {
		t.Error("an Addon is not remembered although every entry is past unkeptRetry")
	}
}
