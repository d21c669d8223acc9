package hooks_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// TestPoliciesSpareWhatIsKept runs a hook twice, as a chart installed,
// removed with Orphan and installed again under the same name runs its
// pre-install hooks again, and checks what its delete policies did to its
// object: a claim (a kind Capstan never deletes, whose volume would go
// with it) and an object its manifests mark to be kept (Helm's, Flux's and
// Argo CD's marks) are applied over, never deleted and created anew, and
// hook-succeeded and hook-failed leave them too. In the restricted
// profile (apply.NoKeep) no mark keeps an object, but the kind still does.
func TestPoliciesSpareWhatIsKept(t *testing.T) {
	configMap := func(annotations string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hooked\n  annotations: {" + annotations + "}\ndata: {a: b}\n"
	}
	const claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: hooked\n  annotations: {}\n" +
		"spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n"
	const failingJob = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: hooked\n  annotations: {helm.sh/resource-policy: keep}\n" +
		"spec:\n  backoffLimit: 0\n  template:\n    metadata: {labels: {capstan.dev/test-fail: \"true\"}}\n" +
		"    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: registry.example/tools:1.0}]\n"
	tests := []struct {
		name     string
		manifest string
		policies []string
		keep     apply.Deletion
		fails    bool
		// kept: the second run finds the first run's object and applies
		// over it; otherwise it creates the object anew, or (with
		// hook-succeeded or hook-failed) the run deletes it.
		kept bool
	}{
		{name: "claim-default-policy", manifest: claim, keep: apply.Recreating, kept: true},
		{name: "claim-restricted", manifest: claim, keep: apply.NoKeep, kept: true},
		{name: "claim-hook-succeeded", manifest: claim, policies: []string{hooks.HookSucceeded}, keep: apply.Recreating, kept: true},
		{name: "helm-keep", manifest: configMap("helm.sh/resource-policy: keep"), keep: apply.Recreating, kept: true},
		{name: "helm-keep-any-case-spaces", manifest: configMap(`helm.sh/resource-policy: " Keep "`), keep: apply.Recreating, kept: true},
		{name: "flux-prune-disabled", manifest: configMap("kustomize.toolkit.fluxcd.io/prune: disabled"), keep: apply.Recreating, kept: true},
		{name: "argo-delete-false", manifest: configMap(`argocd.argoproj.io/sync-options: "ServerSideApply=true, Delete=false"`), keep: apply.Recreating, kept: true},
		{name: "argo-prune-false", manifest: configMap("argocd.argoproj.io/sync-options: Prune=false"), keep: apply.Recreating, kept: true},
		{name: "helm-keep-hook-succeeded", manifest: configMap("helm.sh/resource-policy: keep"), policies: []string{hooks.HookSucceeded}, keep: apply.Recreating, kept: true},
		{name: "helm-keep-hook-failed", manifest: failingJob, policies: []string{hooks.HookFailed}, keep: apply.Recreating, fails: true, kept: true},
		{name: "helm-keep-restricted", manifest: configMap("helm.sh/resource-policy: keep"), keep: apply.NoKeep},
		{name: "plain", manifest: configMap(""), keep: apply.Recreating},
		{name: "plain-hook-succeeded", manifest: configMap(""), policies: []string{hooks.HookSucceeded}, keep: apply.Recreating},
		{name: "helm-policy-delete", manifest: configMap("helm.sh/resource-policy: delete"), keep: apply.Recreating},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tt.manifest), &obj.Object); err != nil {
				t.Fatal(err)
			}
			obj.SetNamespace(f.ns)
			h := render.Hook{Object: obj, Events: []string{"pre-install"}, DeletePolicies: tt.policies}
			run := func() {
				t.Helper()
				err := f.runner.Run(context.Background(), hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-install",
					Hooks: []render.Hook{h}, Timeout: minute, Keep: tt.keep})
				if (err != nil) != tt.fails {
					t.Fatalf("run: %v; want a failure: %v", err, tt.fails)
				}
			}
			uid := func() types.UID {
				t.Helper()
				live := &unstructured.Unstructured{}
				live.SetGroupVersionKind(schema.FromAPIVersionAndKind(obj.GetAPIVersion(), obj.GetKind()))
				if err := admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "hooked"}, live); err != nil {
					return ""
				}
				return live.GetUID()
			}

			run()
			first := uid()
			deletesAfterRun := len(tt.policies) > 0 && !strings.Contains(strings.Join(tt.policies, ","), hooks.BeforeHookCreation)
			if deletesAfterRun {
				if got := first != ""; got != tt.kept {
					t.Fatalf("after the run, the object exists: %v; want %v", got, tt.kept)
				}
				return
			}
			if first == "" {
				t.Fatal("the first run left no object")
			}
			run()
			second := uid()
			if got := second == first; got != tt.kept {
				t.Errorf("the second run kept the first run's object: %v (UID %s, then %s); want %v", got, first, second, tt.kept)
			}
		})
	}
}
