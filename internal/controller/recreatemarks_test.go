package controller_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRecreateMarks: without spec.recreate, an object whose manifest asks
// to be deleted and created anew when the API server refuses a change in
// place is, as Flux (kustomize.toolkit.fluxcd.io/force: enabled) and Argo
// CD (Force=true,Replace=true) do it: a Deployment whose selector changes
// and a RoleBinding whose roleRef changes are created anew, with what
// spec.recreate guards (the plan marks them; a Recreated event).
func TestRecreateMarks(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "recreatemarks", version: "1.0.0", files: map[string]string{
		"templates/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    kustomize.toolkit.fluxcd.io/force: Enabled
spec:
  replicas: 1
  selector:
    matchLabels: {app: web, track: {{ .Values.track }}}
  template:
    metadata:
      labels: {app: web, track: {{ .Values.track }}}
    spec:
      containers:
        - name: web
          image: registry.example/web:1.0
`,
		"templates/rbac.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Values.role }}
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: binding
  annotations:
    argocd.argoproj.io/sync-options: Replace=true,Force=true
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .Values.role }}
subjects:
  - kind: ServiceAccount
    name: default
    namespace: {{ .Release.Namespace }}
`,
	}})
	a := create(t, newAddon(controllerNS, "marks-"+ns[len(ns)-5:], url, withTarget(ns), withValues("track: a\nrole: reader")))
	waitPhase(t, a, capstanv1.PhaseSynced)
	web, binding := live(t, "apps/v1", "Deployment", ns, "web"), live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "binding")
	if web == nil || binding == nil {
		t.Fatal("web or binding missing after the install")
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("track: b\nrole: writer") })
	upgraded := synced(t, a)
	newWeb, newBinding := live(t, "apps/v1", "Deployment", ns, "web"), live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "binding")
	if newWeb == nil || newWeb.GetUID() == web.GetUID() {
		t.Errorf("web was not created anew: %v", newWeb)
	}
	if newBinding == nil || newBinding.GetUID() == binding.GetUID() {
		t.Fatalf("binding was not created anew: %v", newBinding)
	}
	if role, _, _ := unstructured.NestedString(newBinding.Object, "roleRef", "name"); role != "writer" {
		t.Errorf("binding's roleRef names %q, want writer", role)
	}
	if upgraded.Spec.Recreate {
		t.Fatal("the test needs spec.recreate unset")
	}
}
