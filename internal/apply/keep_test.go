package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKeptBy reads each tool's keep annotation as that tool reads it, and
// keeps an object only from the deletions its annotation names.
func TestKeptBy(t *testing.T) {
	type kept struct{ prune, uninstall, recreate string }
	for _, tc := range []struct {
		key, value string
		want       kept
	}{
		{ResourcePolicyAnnotation, "keep", kept{"helm.sh/resource-policy: keep", "helm.sh/resource-policy: keep", "helm.sh/resource-policy: keep"}},
		{ResourcePolicyAnnotation, " Keep ", kept{"helm.sh/resource-policy: Keep", "helm.sh/resource-policy: Keep", "helm.sh/resource-policy: Keep"}},
		{ResourcePolicyAnnotation, "KEEP", kept{"helm.sh/resource-policy: KEEP", "helm.sh/resource-policy: KEEP", "helm.sh/resource-policy: KEEP"}},
		{ResourcePolicyAnnotation, "delete", kept{}},
		{ResourcePolicyAnnotation, "keep-me", kept{}},
		{FluxPruneAnnotation, "disabled", kept{"kustomize.toolkit.fluxcd.io/prune: disabled", "kustomize.toolkit.fluxcd.io/prune: disabled", "kustomize.toolkit.fluxcd.io/prune: disabled"}},
		{FluxPruneAnnotation, "enabled", kept{}},
		{ArgoSyncOptionsAnnotation, "Prune=false", kept{"argocd.argoproj.io/sync-options: Prune=false", "", "argocd.argoproj.io/sync-options: Prune=false"}},
		{ArgoSyncOptionsAnnotation, "ServerSideApply=true, Delete=false", kept{"", "argocd.argoproj.io/sync-options: Delete=false", "argocd.argoproj.io/sync-options: Delete=false"}},
		{ArgoSyncOptionsAnnotation, "Prune=false,Delete=false", kept{"argocd.argoproj.io/sync-options: Prune=false", "argocd.argoproj.io/sync-options: Delete=false", "argocd.argoproj.io/sync-options: Prune=false"}},
		{ArgoSyncOptionsAnnotation, "Prune=confirm", kept{}},
		{ArgoSyncOptionsAnnotation, "PruneLast=false", kept{}},
		{KappDeleteStrategyAnnotation, "orphan", kept{"kapp.k14s.io/delete-strategy: orphan", "kapp.k14s.io/delete-strategy: orphan", "kapp.k14s.io/delete-strategy: orphan"}},
		{KappDeleteStrategyAnnotation, " Orphan ", kept{"kapp.k14s.io/delete-strategy: Orphan", "kapp.k14s.io/delete-strategy: Orphan", "kapp.k14s.io/delete-strategy: Orphan"}},
		{KappDeleteStrategyAnnotation, "", kept{}},
		{"example.com/prune", "disabled", kept{}},
	} {
		m := &metav1.ObjectMeta{Annotations: map[string]string{tc.key: tc.value}}
		got := kept{KeptBy(m, Pruning), KeptBy(m, Uninstalling), KeptBy(m, Recreating)}
		if got != tc.want {
			t.Errorf("%s: %q: %+v, want %+v", tc.key, tc.value, got, tc.want)
		}
		if by := KeptBy(m, NoKeep); by != "" {
			t.Errorf("%s: %q: kept by %q where nothing may be kept", tc.key, tc.value, by)
		}
	}
	if by := KeptBy(&metav1.ObjectMeta{}, Uninstalling); by != "" {
		t.Errorf("an object without annotations is kept by %q", by)
	}
	// Flux reads its marks from labels too; the other tools read
	// annotations only.
	for _, tc := range []struct {
		key, value, want string
	}{
		{FluxPruneAnnotation, "disabled", "label kustomize.toolkit.fluxcd.io/prune: disabled"},
		{FluxPruneAnnotation, "Disabled", "label kustomize.toolkit.fluxcd.io/prune: Disabled"},
		{FluxPruneAnnotation, "enabled", ""},
		{ResourcePolicyAnnotation, "keep", ""},
		{KappDeleteStrategyAnnotation, "orphan", ""},
	} {
		m := &metav1.ObjectMeta{Labels: map[string]string{tc.key: tc.value}}
		for _, d := range []Deletion{Pruning, Uninstalling, Recreating} {
			if got := KeptBy(m, d); got != tc.want {
				t.Errorf("label %s: %q, deletion %d: %q, want %q", tc.key, tc.value, d, got, tc.want)
			}
		}
		if by := KeptBy(m, NoKeep); by != "" {
			t.Errorf("label %s: %q: kept by %q where nothing may be kept", tc.key, tc.value, by)
		}
	}
}

// TestCreateOnly reads Flux's apply policy as KeptBy reads the marks: its
// IfNotPresent in any case, with spaces around it ignored, and nothing
// else.
func TestCreateOnly(t *testing.T) {
	for value, want := range map[string]string{
		"IfNotPresent":   "kustomize.toolkit.fluxcd.io/ssa: IfNotPresent",
		" ifnotpresent ": "kustomize.toolkit.fluxcd.io/ssa: ifnotpresent",
		"Override":       "",
		"Merge":          "",
		"Ignore":         "",
		"IfNotPresent,x": "",
	} {
		m := &metav1.ObjectMeta{Annotations: map[string]string{FluxSSAAnnotation: value}}
		if got := CreateOnly(m); got != want {
			t.Errorf("%q: %q, want %q", value, got, want)
		}
	}
	if got := CreateOnly(&metav1.ObjectMeta{Annotations: map[string]string{"example.com/ssa": "IfNotPresent"}}); got != "" {
		t.Errorf("another tool's annotation: %q", got)
	}
	if got, want := CreateOnly(&metav1.ObjectMeta{Labels: map[string]string{FluxSSAAnnotation: "IfNotPresent"}}), "label kustomize.toolkit.fluxcd.io/ssa: IfNotPresent"; got != want {
		t.Errorf("Flux's mark as a label: %q, want %q", got, want)
	}
}

// TestRecreateMarked reads Flux's force mark and Argo CD's Force=true no
// more loosely than the tools read them, since they ask for a delete: no
// other case, Flux's mark from its annotation only (never a label), and not
// Argo CD's Force=true with ServerSideApply=true, which forces field
// ownership instead.
func TestRecreateMarked(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{FluxForceAnnotation, "enabled", "kustomize.toolkit.fluxcd.io/force: enabled"},
		{FluxForceAnnotation, "Enabled", ""},
		{FluxForceAnnotation, " enabled", ""},
		{FluxForceAnnotation, "disabled", ""},
		{ArgoSyncOptionsAnnotation, "Force=true", "argocd.argoproj.io/sync-options: Force=true"},
		{ArgoSyncOptionsAnnotation, "Replace=true, Force=true", "argocd.argoproj.io/sync-options: Force=true"},
		{ArgoSyncOptionsAnnotation, "force=TRUE", ""},
		{ArgoSyncOptionsAnnotation, "Replace=true", ""},
		{ArgoSyncOptionsAnnotation, "Force=false", ""},
		{ArgoSyncOptionsAnnotation, "ServerSideApply=true,Force=true", ""},
	} {
		m := &metav1.ObjectMeta{Annotations: map[string]string{tc.key: tc.value}}
		if got := RecreateMarked(m); got != tc.want {
			t.Errorf("%s: %q: %q, want %q", tc.key, tc.value, got, tc.want)
		}
	}
	if got := RecreateMarked(&metav1.ObjectMeta{Labels: map[string]string{FluxForceAnnotation: "enabled"}}); got != "" {
		t.Errorf("Flux's force mark as a label: %q, want none", got)
	}
}

// TestIgnored reads Flux's Ignore as the keep marks are read: it asks for
// less, never more.
func TestIgnored(t *testing.T) {
	for value, want := range map[string]string{
		"Ignore":       "kustomize.toolkit.fluxcd.io/ssa: Ignore",
		" ignore ":     "kustomize.toolkit.fluxcd.io/ssa: ignore",
		"IfNotPresent": "",
		"Ignored":      "",
	} {
		if got := Ignored(&metav1.ObjectMeta{Annotations: map[string]string{FluxSSAAnnotation: value}}); got != want {
			t.Errorf("%q: %q, want %q", value, got, want)
		}
	}
	if got, want := Ignored(&metav1.ObjectMeta{Labels: map[string]string{FluxSSAAnnotation: "Ignore"}}), "label kustomize.toolkit.fluxcd.io/ssa: Ignore"; got != want {
		t.Errorf("Flux's mark as a label: %q, want %q", got, want)
	}
}
