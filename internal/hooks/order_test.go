package hooks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/render"
)

// hook builds a render.Hook of kind/name for events, with a weight.
func hook(kindName string, weight int, events ...string) render.Hook {
	kind, name, _ := strings.Cut(kindName, "/")
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("v1")
	o.SetKind(kind)
	o.SetName(name)
	return render.Hook{Object: o, Events: events, Weight: weight}
}

func names(hs []render.Hook) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.Object.GetKind()+"/"+h.Object.GetName())
	}
	return out
}

func TestSelect(t *testing.T) {
	unknown := hook("ConfigMap/typo", -100, "pre-install")
	unknown.UnknownEvents = []string{"pre-instal"}
	tests := []struct {
		name  string
		hooks []render.Hook
		event string
		want  []string
	}{
		{
			name:  "only the event's hooks",
			hooks: []render.Hook{hook("Job/a", 0, "pre-install"), hook("Job/b", 0, "post-install"), hook("Job/c", 0, "pre-upgrade", "pre-install")},
			event: "pre-install",
			want:  []string{"Job/a", "Job/c"},
		},
		{
			name:  "weight first, negative weights before zero",
			hooks: []render.Hook{hook("Job/a", 5, "pre-install"), hook("Job/b", 0, "pre-install"), hook("Job/c", -10, "pre-install"), hook("Job/d", -1, "pre-install")},
			event: "pre-install",
			want:  []string{"Job/c", "Job/d", "Job/b", "Job/a"},
		},
		{
			name:  "equal weights by kind, before name",
			hooks: []render.Hook{hook("Job/alpha", 0, "pre-install"), hook("ConfigMap/mid", 0, "pre-install"), hook("ServiceAccount/zeta", 0, "pre-install")},
			event: "pre-install",
			want:  []string{"ServiceAccount/zeta", "ConfigMap/mid", "Job/alpha"},
		},
		{
			name:  "equal weights and kinds by name",
			hooks: []render.Hook{hook("Job/migrate", 0, "pre-install"), hook("Job/backup", 0, "pre-install"), hook("Job/check", -1, "pre-install")},
			event: "pre-install",
			want:  []string{"Job/check", "Job/backup", "Job/migrate"},
		},
		{
			name:  "equal weights, by Helm's install order of kinds, unlisted kinds last by name",
			hooks: []render.Hook{hook("Job/same", 0, "pre-install"), hook("ConfigMap/same", 0, "pre-install"), hook("ServiceAccount/same", 0, "pre-install"), hook("Widget/same", 0, "pre-install"), hook("Gadget/same", 0, "pre-install")},
			event: "pre-install",
			want:  []string{"ServiceAccount/same", "ConfigMap/same", "Job/same", "Gadget/same", "Widget/same"},
		},
		{
			name:  "a hook naming an unknown event never runs",
			hooks: []render.Hook{unknown, hook("Job/a", 0, "pre-install")},
			event: "pre-install",
			want:  []string{"Job/a"},
		},
		{
			name:  "no hooks for the event",
			hooks: []render.Hook{hook("Job/a", 0, "pre-delete")},
			event: "post-delete",
			want:  []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, names(Select(tt.hooks, tt.event))); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectKeepsRenderOrderForFullTies(t *testing.T) {
	a := hook("ConfigMap/same", 0, "post-install")
	a.Template = "c/templates/a.yaml"
	b := hook("ConfigMap/same", 0, "post-install")
	b.Template = "c/templates/b.yaml"
	got := Select([]render.Hook{b, a}, "post-install")
	if got[0].Template != b.Template || got[1].Template != a.Template {
		t.Errorf("full ties were reordered: %s, %s", got[0].Template, got[1].Template)
	}
}

func TestHasPolicy(t *testing.T) {
	crd := hook("CustomResourceDefinition/widgets.example.com", 0, "pre-install")
	crd.DeletePolicies = []string{HookSucceeded}
	tests := []struct {
		name     string
		policies []string
		check    string
		want     bool
	}{
		{"no policy means before-hook-creation", nil, BeforeHookCreation, true},
		{"no policy does not delete on success", nil, HookSucceeded, false},
		{"no policy does not delete on failure", nil, HookFailed, false},
		{"hook-succeeded only", []string{HookSucceeded}, HookSucceeded, true},
		{"hook-succeeded only is not before-hook-creation", []string{HookSucceeded}, BeforeHookCreation, false},
		{"hook-failed", []string{HookFailed, BeforeHookCreation}, HookFailed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hook("Job/x", 0, "pre-install")
			h.DeletePolicies = tt.policies
			if got := hasPolicy(h, tt.check); got != tt.want {
				t.Errorf("hasPolicy(%v, %s) = %v, want %v", tt.policies, tt.check, got, tt.want)
			}
		})
	}
	if hasPolicy(crd, HookSucceeded) {
		t.Error("a CustomResourceDefinition hook would be deleted; Helm never deletes one")
	}
}

// TestNeverDeletedKindsHaveNoPolicy: a hook of a kind Capstan never
// deletes (as a prune or an uninstall spares it) is deleted by none of its
// policies, the default before-hook-creation included; other kinds keep
// theirs, a StorageClass of another group among them.
func TestNeverDeletedKindsHaveNoPolicy(t *testing.T) {
	tests := []struct {
		apiVersion, kind string
		never            bool
	}{
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", true},
		{"v1", "CustomResourceDefinition", true},
		{"v1", "PersistentVolumeClaim", true},
		{"v1", "PersistentVolume", true},
		{"v1", "Namespace", true},
		{"storage.k8s.io/v1", "StorageClass", true},
		{"example.com/v1", "StorageClass", false},
		{"v1", "ConfigMap", false},
		{"v1", "Secret", false},
		{"batch/v1", "Job", false},
		{"v1", "Pod", false},
	}
	for _, tt := range tests {
		t.Run(tt.apiVersion+" "+tt.kind, func(t *testing.T) {
			for _, policies := range [][]string{nil, {BeforeHookCreation}, {HookSucceeded}, {HookFailed}, {BeforeHookCreation, HookSucceeded, HookFailed}} {
				h := hook(tt.kind+"/x", 0, "pre-install")
				h.Object.SetAPIVersion(tt.apiVersion)
				h.DeletePolicies = policies
				for _, p := range DeletePolicies(h) {
					if got := hasPolicy(h, p); got == tt.never {
						t.Errorf("policies %v: hasPolicy(%s) = %v; want %v", policies, p, got, !tt.never)
					}
				}
			}
		})
	}
}

// TestSelectRunsPostSyncLast: a folder's Argo CD PostSync hooks, which wait
// for the applied objects, run after the event's other hooks (its Sync
// hooks, and Helm's), whatever their weights.
func TestSelectRunsPostSyncLast(t *testing.T) {
	smoke := hook("Job/smoke", -5, "post-install")
	smoke.AfterHealthy = true
	notify := hook("Job/notify", 0, "post-install")
	notify.AfterHealthy = true
	got := names(Select([]render.Hook{notify, smoke, hook("Job/warm", 10, "post-install"), hook("ConfigMap/seed", 0, "post-install")}, "post-install"))
	want := []string{"ConfigMap/seed", "Job/warm", "Job/smoke", "Job/notify"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}
