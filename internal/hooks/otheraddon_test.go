package hooks_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
)

// TestHookLeavesAnotherAddonsObject runs a pre-install ConfigMap hook whose
// name is that of a ConfigMap another Addon, billing, applied (its owner
// labels name billing). While billing holds it, the hook is refused,
// with or without before-hook-creation: the ConfigMap is neither deleted
// nor applied over, and the error names billing and what to do. Once
// billing holds it no more (the Addon is gone), the hook runs as over
// any object. Before, the hook deleted billing's ConfigMap and made its
// own.
func TestHookLeavesAnotherAddonsObject(t *testing.T) {
	for _, policy := range []string{"", "hook-failed"} {
		t.Run("policy "+policy, func(t *testing.T) {
			f := newFixture(t)
			billing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "db-shared",
				Labels: map[string]string{capstanv1.AddonLabel: "billing", capstanv1.AddonNamespaceLabel: f.ns}}, Data: map[string]string{"password": "billing's"}}
			ctx := context.Background()
			if err := admin.Create(ctx, billing); err != nil {
				t.Fatal(err)
			}
			hs := f.hooksOf(`{extraHooks: [{name: shared, kind: ConfigMap, events: pre-install, deletePolicy: "`+policy+`"}]}`, false)
			holds := true
			var asked []string
			req := hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-install", Hooks: hs, Timeout: minute, Run: "pre-install/one", Keep: apply.Recreating,
				HeldBy: func(_ context.Context, ref capstanv1.ObjectRef, live *unstructured.Unstructured) (string, error) {
					asked = append(asked, ref.Name+" "+live.GetLabels()[capstanv1.AddonLabel])
					if holds {
						return f.ns + "/billing", nil
					}
					return "", nil
				}}
			err := f.runner.Run(ctx, req)
			e := hookError(t, err)
			if e.Reason != hooks.ReasonOtherAddon || e.Hook.Name != "db-shared" || hooks.Transient(err) {
				t.Fatalf("the run returned %v; want the shared hook refused as billing's", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "Addon "+f.ns+"/billing holds it") || !strings.Contains(msg, "rename the hook in the chart") {
				t.Errorf("the error says %q; want it to name billing and what to do", msg)
			}
			if len(asked) == 0 || asked[0] != "db-shared billing" {
				t.Errorf("HeldBy was asked %v; want db-shared, read with billing's labels", asked)
			}
			cm := f.configMap("db-shared")
			if cm == nil || cm.UID != billing.UID || cm.Data["password"] != "billing's" || cm.Labels[capstanv1.AddonLabel] != "billing" {
				t.Fatalf("the ConfigMap is %+v; want billing's, as it was", cm)
			}

			holds = false
			if err := f.runner.Run(ctx, req); err != nil {
				t.Fatalf("the run once billing holds it no more: %v", err)
			}
			if cm := f.configMap("db-shared"); cm == nil || cm.Labels[capstanv1.AddonLabel] != f.addon.Name {
				t.Errorf("the ConfigMap is %+v; want the hook's", cm)
			}
		})
	}
}
