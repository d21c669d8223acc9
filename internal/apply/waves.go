package apply

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// An add-on's objects may be applied in sync waves, lowest first: before
// the objects of a wave are applied, every object of the waves before it
// is Current. An operator's Deployment in wave 0 is then running before
// the custom resources of wave 1 reach its webhook, and a database before
// the application that migrates it. Within a wave, objects go in the
// apply's usual order, by kind.
const (
	// WaveAnnotation puts an object in a wave: a whole number, 0 when
	// unset.
	WaveAnnotation = "capstan.dev/sync-wave"
	// ArgoWaveAnnotation is Argo CD's name for it. It is read the same
	// way, so that manifests written for Argo CD keep their order; when
	// both are set, WaveAnnotation decides.
	ArgoWaveAnnotation = "argocd.argoproj.io/sync-wave"
)

// WaveOf returns the wave an object's annotations put it in, or an error
// that says what to write instead.
func WaveOf(obj metav1.Object) (int32, error) {
	ann := obj.GetAnnotations()
	for _, key := range []string{WaveAnnotation, ArgoWaveAnnotation} {
		v, ok := ann[key]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("the %s annotation is %q; give a whole number such as -1, 0 or 5 (waves apply lowest first, 0 when unset)", key, v)
		}
		return int32(n), nil
	}
	return 0, nil
}

// Wave returns an object's wave, 0 when its annotation is not a number:
// the render refuses such an object before anything is applied.
func Wave(obj metav1.Object) int32 {
	w, _ := WaveOf(obj)
	return w
}

// ByWave sorts objects by wave, lowest first, keeping the order within a
// wave. It returns objs itself when they are all in one wave.
func ByWave(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if len(objs) == 0 || !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return Wave(o) != Wave(objs[0]) }) {
		return objs
	}
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return cmp.Compare(Wave(a), Wave(b)) })
	return out
}

// waveStep is one wave of an apply: the changed objects to apply, and the
// objects to await before them.
type waveStep struct {
	number  int32
	objects []*unstructured.Unstructured
	await   []*unstructured.Unstructured
}

// waveSteps splits the changed objects, sorted by ByWave, into their
// waves. Before each wave, the rendered objects of the waves before it
// that no earlier wave awaited are awaited: changed or not, since a sync
// that stopped while it waited, and runs again, finds them unchanged and
// must still wait for them.
func waveSteps(changed, rendered []*unstructured.Unstructured) []waveStep {
	rendered = ByWave(rendered)
	var out []waveStep
	awaited := 0
	for _, obj := range changed {
		w := Wave(obj)
		if len(out) == 0 || out[len(out)-1].number != w {
			step := waveStep{number: w}
			for awaited < len(rendered) && Wave(rendered[awaited]) < w {
				step.await = append(step.await, rendered[awaited])
				awaited++
			}
			out = append(out, step)
		}
		out[len(out)-1].objects = append(out[len(out)-1].objects, obj)
	}
	return out
}

// WaveViolations refuses, in the plan, an object whose sync wave
// annotation is not a whole number: applied in wave 0 it could run before
// what it was meant to wait for. It is a violation, not an error, so that
// an uninstall, which renders to find its delete hooks, never stops at it.
// Every profile has it: the controller and capstan render both check it.
func WaveViolations(objs []*unstructured.Unstructured) []capstanv1.Violation {
	var out []capstanv1.Violation
	for _, obj := range objs {
		if _, err := WaveOf(obj); err != nil {
			key := WaveAnnotation
			if _, ok := obj.GetAnnotations()[key]; !ok {
				key = ArgoWaveAnnotation
			}
			out = append(out, capstanv1.Violation{Object: capstanv1.RefOf(obj), Path: "metadata.annotations." + key, Rule: RuleSyncWave, Message: err.Error()})
		}
	}
	return out
}

// RuleSyncWave names the violation of a sync wave that is not a number.
const RuleSyncWave = "sync-wave"
