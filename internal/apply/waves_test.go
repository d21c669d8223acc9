package apply

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func waved(kind, name string, ann map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind(kind)
	obj.SetName(name)
	obj.SetAnnotations(ann)
	return obj
}

func TestWaveOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ann     map[string]string
		want    int32
		wantErr string
	}{
		{name: "unset is wave 0"},
		{name: "Capstan's", ann: map[string]string{WaveAnnotation: "3"}, want: 3},
		{name: "negative, with spaces", ann: map[string]string{WaveAnnotation: " -2 "}, want: -2},
		{name: "Argo CD's", ann: map[string]string{ArgoWaveAnnotation: "5"}, want: 5},
		{name: "Capstan's decides over Argo CD's", ann: map[string]string{WaveAnnotation: "1", ArgoWaveAnnotation: "9"}, want: 1},
		{name: "not a number", ann: map[string]string{WaveAnnotation: "first"}, wantErr: `the capstan.dev/sync-wave annotation is "first"; give a whole number`},
		{name: "not a whole number", ann: map[string]string{ArgoWaveAnnotation: "1.5"}, wantErr: `the argocd.argoproj.io/sync-wave annotation is "1.5"`},
		{name: "past 32 bits", ann: map[string]string{WaveAnnotation: "99999999999"}, wantErr: "give a whole number"},
		{name: "a bad Capstan wave is not hidden by Argo CD's", ann: map[string]string{WaveAnnotation: "", ArgoWaveAnnotation: "1"}, wantErr: "capstan.dev/sync-wave"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WaveOf(waved("ConfigMap", "a", tc.ann))
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("WaveOf = %d, %v; want an error with %q", got, err, tc.wantErr)
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Fatalf("WaveOf = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func names(objs []*unstructured.Unstructured) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return strings.Join(out, ",")
}

// TestWaveSteps checks which objects each wave applies and awaits: the
// rendered objects of the waves before it, changed or not, each awaited
// once, and the order within a wave kept.
func TestWaveSteps(t *testing.T) {
	w := func(n string) map[string]string { return map[string]string{WaveAnnotation: n} }
	secret := waved("Secret", "secret", w("-1"))
	crd := waved("CustomResourceDefinition", "crd", nil)
	sa := waved("ServiceAccount", "sa", nil)
	deploy := waved("Deployment", "deploy", nil)
	cr := waved("Widget", "cr", map[string]string{ArgoWaveAnnotation: "1"})
	late := waved("ConfigMap", "late", w("5"))
	rendered := []*unstructured.Unstructured{secret, crd, sa, deploy, cr, late}

	if got := names(ByWave(rendered)); got != "secret,crd,sa,deploy,cr,late" {
		t.Errorf("ByWave = %s", got)
	}
	if got := names(ByWave([]*unstructured.Unstructured{late, deploy, cr, sa})); got != "deploy,sa,cr,late" {
		t.Errorf("ByWave keeps the order within a wave: got %s", got)
	}

	for _, tc := range []struct {
		name    string
		changed []*unstructured.Unstructured
		want    []string // per wave: number: objects / awaited
	}{
		{name: "an install", changed: []*unstructured.Unstructured{secret, sa, deploy, cr, late},
			want: []string{"-1:secret/", "0:sa,deploy/secret", "1:cr/crd,sa,deploy", "5:late/cr"}},
		{name: "only a later wave changed still awaits the waves before it", changed: []*unstructured.Unstructured{late},
			want: []string{"5:late/secret,crd,sa,deploy,cr"}},
		{name: "one wave: nothing before it", changed: []*unstructured.Unstructured{secret},
			want: []string{"-1:secret/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range waveSteps(ByWave(tc.changed), rendered) {
				got = append(got, fmt.Sprintf("%d:%s/%s", s.number, names(s.objects), names(s.await)))
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("waveSteps = %v; want %v", got, tc.want)
			}
		})
	}
}
