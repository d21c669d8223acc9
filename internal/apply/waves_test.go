package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
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

// recorder is a client that records the applies and dry runs it is sent
// and answers each as stored: the order of a sequence is pure logic, and
// what the API server does with each object is the controller suite's
// business.
type recorder struct {
	client.Client
	log []string
}

func (r *recorder) Apply(_ context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var m struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	o := &client.ApplyOptions{}
	o.ApplyOptions(opts)
	what := "apply "
	if len(o.DryRun) > 0 {
		what = "dry-run "
	}
	r.log = append(r.log, what+m.Metadata.Name)
	return nil
}

// TestSequenceAppliesWaveByWave checks, on an install of objects in three
// waves, that each wave is applied only after its wait, that only the
// lowest wave goes ahead of the waits, and that a wait that fails applies
// nothing more.
func TestSequenceAppliesWaveByWave(t *testing.T) {
	w := func(n string) map[string]string { return map[string]string{WaveAnnotation: n} }
	secret := waved("Secret", "secret", nil)                                        // inert, wave 0
	deploy := waved("Deployment", "deploy", nil)                                    // wave 0
	settings := waved("ConfigMap", "settings", w("1"))                              // inert, wave 1
	worker := waved("Deployment", "worker", w("1"))                                 // wave 1
	last := waved("Deployment", "last", map[string]string{ArgoWaveAnnotation: "2"}) // wave 2
	objs := []*unstructured.Unstructured{secret, deploy, settings, worker, last}
	for _, o := range objs {
		// In a Namespace this install creates: the plan could dry-run
		// none of them (Unverified).
		o.SetNamespace("apps")
	}
	// The inert Secret goes ahead, with no dry run, and so does the first
	// Deployment once the rest passed theirs; the inert ConfigMap of wave 1
	// does not.
	ahead := "apply secret, dry-run settings, dry-run worker, dry-run last, apply deploy, await 1 (secret deploy) with deploy applied"
	for _, tc := range []struct {
		name   string
		failAt int32
		want   string
	}{
		{name: "every wave", want: ahead + ", apply settings, apply worker, await 2 (settings worker) with worker applied, apply last"},
		{name: "a wait that fails", failAt: 1, want: ahead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			stop := errors.New("not Current")
			q := Sequence{
				Applier: &Applier{Client: rec}, Install: true, Objects: objs, Changed: objs, Unverified: objs,
				AwaitWave: func(_ context.Context, wave int32, await []*unstructured.Unstructured, nothingApplied bool) error {
					line := fmt.Sprintf("await %d (%s)", wave, strings.ReplaceAll(names(await), ",", " "))
					if !nothingApplied {
						line += " with " + rec.log[len(rec.log)-1][len("apply "):] + " applied"
					}
					rec.log = append(rec.log, line)
					if wave == tc.failAt {
						return stop
					}
					return nil
				},
			}
			_, err := q.Run(context.Background())
			if got := strings.Join(rec.log, ", "); got != tc.want {
				t.Errorf("the sequence did:\n  %s\nwant:\n  %s", got, tc.want)
			}
			if (tc.failAt != 0) != errors.Is(err, stop) {
				t.Errorf("Run = %v", err)
			}
		})
	}

	// An upgrade of wave 2 alone: its wait comes before anything of this
	// sync is applied, so the caller may end the sync there instead.
	rec := &recorder{}
	var gotNothingApplied bool
	q := Sequence{Applier: &Applier{Client: rec}, Objects: objs, Changed: []*unstructured.Unstructured{last},
		AwaitWave: func(_ context.Context, wave int32, await []*unstructured.Unstructured, nothingApplied bool) error {
			rec.log = append(rec.log, fmt.Sprintf("await %d (%s)", wave, strings.ReplaceAll(names(await), ",", " ")))
			gotNothingApplied = nothingApplied
			return nil
		},
	}
	if _, err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.log, ", "); got != "await 2 (secret deploy settings worker), apply last" || !gotNothingApplied {
		t.Errorf("an upgrade of wave 2: %s (nothing applied: %v)", got, gotNothingApplied)
	}
	// With pre hooks, which ran before the wait, it may not.
	rec.log = nil
	q.HasPreHooks = true
	q.PreHooks = func(context.Context) error { rec.log = append(rec.log, "pre hooks"); return nil }
	if _, err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.log, ", "); got != "pre hooks, await 2 (secret deploy settings worker), apply last" || gotNothingApplied {
		t.Errorf("an upgrade of wave 2 with pre hooks: %s (nothing applied: %v)", got, gotNothingApplied)
	}
	// Nor with an object adopted unchanged, whose owner labels it wrote
	// before the wait: the next plan would adopt nothing, and its hash
	// would not be the one approved.
	rec.log = nil
	q.HasPreHooks, q.PreHooks = false, nil
	q.Adopted = map[capstanv1.ObjectRef]Adoption{capstanv1.RefOf(deploy): {UID: "uid-deploy"}}
	if _, err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.log, ", "); got != "apply deploy, await 2 (secret deploy settings worker), apply last" || gotNothingApplied {
		t.Errorf("an upgrade of wave 2 that adopts: %s (nothing applied: %v)", got, gotNothingApplied)
	}
}
