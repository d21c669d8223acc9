package plan

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// liveWith is a live ConfigMap with these labels, annotations and field
// managers.
func liveWith(name string, labels, annotations map[string]string, managers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("apps")
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	var fields []metav1.ManagedFieldsEntry
	for _, m := range managers {
		fields = append(fields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate})
	}
	u.SetManagedFields(fields)
	return u
}

func TestClaimOf(t *testing.T) {
	helm := map[string]string{HelmReleaseNameAnnotation: "web", HelmReleaseNamespaceAnnotation: "apps"}
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		managers    []string
		tool        string // "" for no claim
		advice      []string
	}{
		{name: "nothing", labels: map[string]string{"app": "web"}},
		{name: "a Helm release", labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", InstanceLabel: "web"}, annotations: helm, managers: []string{"helm"},
			tool: "Helm release apps/web", advice: []string{"helm uninstall web would delete the adopted objects", "kubectl delete secret -n apps -l owner=helm,name=web"}},
		{name: "only a release name", annotations: map[string]string{HelmReleaseNameAnnotation: "web"}},
		{name: "a chart's instance label alone", labels: map[string]string{InstanceLabel: "web"}, managers: []string{"kubectl-client-side-apply"}},
		{name: "Argo CD's label tracking", labels: map[string]string{InstanceLabel: "shop"}, managers: []string{"argocd-controller"},
			tool: "Argo CD Application shop", advice: []string{"argocd app delete shop --cascade=false", "automated sync off"}},
		{name: "Argo CD's annotation tracking", annotations: map[string]string{ArgoTrackingAnnotation: "team_shop:apps/Deployment:apps/web"},
			tool: "Argo CD Application team_shop", advice: []string{"--cascade=false", "metadata.finalizers"}},
		{name: "a Flux Kustomization", labels: map[string]string{FluxKustomizeNameLabel: "infra", FluxKustomizeNamespaceLabel: "flux-system"},
			tool: "Flux Kustomization flux-system/infra", advice: []string{"flux suspend kustomization infra -n flux-system", "spec.prune: false"}},
		{name: "a Flux HelmRelease and its Helm release", labels: map[string]string{FluxHelmNameLabel: "web", FluxHelmNamespaceLabel: "flux-system"}, annotations: helm,
			tool: "Flux HelmRelease flux-system/web", advice: []string{"flux suspend helmrelease web -n flux-system", "owner=helm,name=web in namespace apps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := ClaimOf(liveWith("x", tc.labels, tc.annotations, tc.managers...))
			if ok != (tc.tool != "") || c.Tool != tc.tool {
				t.Fatalf("claim %+v, %v; want tool %q", c, ok, tc.tool)
			}
			for _, a := range tc.advice {
				if !strings.Contains(c.Advice, a) {
					t.Errorf("advice %q; want it to say %q", c.Advice, a)
				}
			}
		})
	}
}

// TestClaimNotices: one notice per other tool's holder of the adopted
// objects, counting them, in their order; an object not adopted, or
// adopted with no other tool's mark, gives none.
func TestClaimNotices(t *testing.T) {
	helm := map[string]string{HelmReleaseNameAnnotation: "web", HelmReleaseNamespaceAnnotation: "apps"}
	flux := map[string]string{FluxKustomizeNameLabel: "infra", FluxKustomizeNamespaceLabel: "flux-system"}
	live := map[string]*unstructured.Unstructured{}
	var objs []ObjectResult
	add := func(name string, adopted bool, labels, annotations map[string]string) {
		l := liveWith(name, labels, annotations)
		live[capstanv1.RefOf(l).Key()] = l
		objs = append(objs, ObjectResult{Ref: capstanv1.RefOf(l), Adopted: adopted})
	}
	add("a", true, nil, helm)
	add("b", true, flux, nil)
	add("c", true, nil, helm)
	add("d", false, nil, helm) // this add-on's already
	add("e", true, nil, nil)   // made by hand
	add("f", true, nil, helm)
	got := ClaimNotices(objs, live)
	if len(got) != 2 {
		t.Fatalf("notices %+v; want two", got)
	}
	for i, want := range []string{"3 adopted object(s) are still marked as its own by Helm release apps/web, first ConfigMap apps/a: helm uninstall web",
		"1 adopted object(s) are still marked as its own by Flux Kustomization flux-system/infra, first ConfigMap apps/b"} {
		if got[i].Path != "objects" || !strings.HasPrefix(got[i].Message, want) {
			t.Errorf("notice %d: %+v; want one that begins %q", i, got[i], want)
		}
	}
}
