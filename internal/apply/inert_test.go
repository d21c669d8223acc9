package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestInert(t *testing.T) {
	object := func(apiVersion, kind, namespace string, spec map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "x", "namespace": namespace}}}
		if spec != nil {
			o.Object["spec"] = spec
		}
		return o
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want bool
	}{
		{object("v1", "ConfigMap", "apps", nil), true},
		{object("v1", "Secret", "apps", nil), true},
		{object("v1", "ServiceAccount", "apps", nil), true},
		{object("rbac.authorization.k8s.io/v1", "Role", "apps", nil), true},
		{object("rbac.authorization.k8s.io/v1", "RoleBinding", "apps", nil), true},
		{object("v1", "Service", "apps", map[string]any{"ports": []any{}}), true},
		{object("v1", "Service", "apps", map[string]any{"type": "ClusterIP"}), true},
		{object("v1", "Service", "apps", map[string]any{"type": "ExternalName"}), true},
		{object("networking.k8s.io/v1", "NetworkPolicy", "apps", nil), true},
		{object("policy/v1", "PodDisruptionBudget", "apps", nil), true},
		// Open ports on every node, or a cloud's load balancer.
		{object("v1", "Service", "apps", map[string]any{"type": "NodePort"}), false},
		{object("v1", "Service", "apps", map[string]any{"type": "LoadBalancer"}), false},
		// Run code, hold data, route traffic, or are acted on by a controller.
		{object("apps/v1", "Deployment", "apps", nil), false},
		{object("batch/v1", "Job", "apps", nil), false},
		{object("v1", "Pod", "apps", nil), false},
		{object("v1", "PersistentVolumeClaim", "apps", nil), false},
		{object("networking.k8s.io/v1", "Ingress", "apps", nil), false},
		{object("example.com/v1", "ConfigMap", "apps", nil), false},
		{object("cert-manager.io/v1", "Certificate", "apps", nil), false},
		// Cluster-scoped objects are never in a new Namespace.
		{object("rbac.authorization.k8s.io/v1", "ClusterRole", "", nil), false},
		{object("v1", "ConfigMap", "", nil), false},
	} {
		if got := Inert(tc.obj); got != tc.want {
			t.Errorf("Inert(%s %s, namespace %q, spec %v) = %v; want %v", tc.obj.GetAPIVersion(), tc.obj.GetKind(), tc.obj.GetNamespace(), tc.obj.Object["spec"], got, tc.want)
		}
	}
}

// TestCreatedNow: only an object whose one writer is Capstan's apply was
// created by it; one that carries another writer existed before.
func TestCreatedNow(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op}
	}
	for _, tc := range []struct {
		fields []metav1.ManagedFieldsEntry
		want   bool
	}{
		{[]metav1.ManagedFieldsEntry{entry(capstanv1.FieldManager, metav1.ManagedFieldsOperationApply)}, true},
		{[]metav1.ManagedFieldsEntry{entry("kubectl", metav1.ManagedFieldsOperationUpdate), entry(capstanv1.FieldManager, metav1.ManagedFieldsOperationApply)}, false},
		{[]metav1.ManagedFieldsEntry{entry(capstanv1.FieldManager, metav1.ManagedFieldsOperationUpdate)}, false},
		{nil, false},
	} {
		live := &unstructured.Unstructured{Object: map[string]any{}}
		live.SetManagedFields(tc.fields)
		if got := createdNow(live); got != tc.want {
			t.Errorf("createdNow(%v) = %v; want %v", tc.fields, got, tc.want)
		}
	}
}
