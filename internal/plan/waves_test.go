package plan

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// TestPlanShowsWaves checks that the plan names each object's wave and,
// when there is more than one, says in which order they go.
func TestPlanShowsWaves(t *testing.T) {
	obj := func(name, wave string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetNamespace("apps")
		o.SetName(name)
		if wave != "" {
			o.SetAnnotations(map[string]string{apply.WaveAnnotation: wave})
		}
		return o
	}
	results := func(objs ...*unstructured.Unstructured) []ObjectResult {
		var out []ObjectResult
		for _, o := range objs {
			out = append(out, ObjectResult{Ref: capstanv1.RefOf(o), Comparison: Comparison{Action: capstanv1.ActionCreate}})
		}
		return out
	}
	a, b, c := obj("a", ""), obj("b", "2"), obj("c", "-1")
	p := Build(Input{Rendered: []*unstructured.Unstructured{a, b, c}, Objects: results(a, b, c)})
	waves := map[string]int32{}
	for _, o := range p.Objects {
		waves[o.Name] = o.Wave
	}
	if waves["a"] != 0 || waves["b"] != 2 || waves["c"] != -1 {
		t.Errorf("planned waves = %v; want a 0, b 2, c -1", waves)
	}
	var notice string
	for _, n := range p.Notices {
		if strings.Contains(n.Message, "sync waves") {
			notice = n.Message
		}
	}
	if !strings.Contains(notice, "sync waves -1, 0, 2 (capstan.dev/sync-wave)") {
		t.Errorf("notice = %q; want the waves in order", notice)
	}

	// All in one wave, even one that is not 0: no order to tell.
	d, e := obj("d", "3"), obj("e", "3")
	for _, n := range Build(Input{Rendered: []*unstructured.Unstructured{d, e}, Objects: results(d, e)}).Notices {
		if strings.Contains(n.Message, "sync waves") {
			t.Errorf("one wave has a notice: %q", n.Message)
		}
	}
}

// TestAWaveIsInTheDigest: a create's digest, which the plan's hash
// covers, is of the whole manifest, the wave's annotation included. (An
// update's digest is of its diff, which shows the annotation's change.)
func TestAWaveIsInTheDigest(t *testing.T) {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("v1")
	o.SetKind("ConfigMap")
	o.SetName("a")
	o.SetAnnotations(map[string]string{apply.WaveAnnotation: "1"})
	before := CreateDigest(o)
	o.SetAnnotations(map[string]string{apply.WaveAnnotation: "2"})
	if CreateDigest(o) == before {
		t.Error("a change of wave leaves the digest as it was")
	}
}
