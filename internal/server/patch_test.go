package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestNullSpecAndPlanFields sends {"spec": null}, which once wiped the
// whole spec, and a plan with a definition: each is a 400 that names the
// field at fault, and nothing changes.
func TestNullSpecAndPlanFields(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "demo", hashOf("a"))
	editor := user(t, ns, "editor", addonRule("get", "patch", "update"))
	path := "/api/v1/namespaces/" + ns + "/addons/demo"
	code, body := call(t, editor, http.MethodPatch, path, []byte(`{"spec": null}`))
	expect(t, "an edit with a null spec", code, body, http.StatusBadRequest)
	if !strings.Contains(string(body), "JSON object") || !strings.Contains(string(body), `"field":"spec"`) {
		t.Errorf("the refusal %s should name the spec and say what to send", body)
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, a); err != nil || a.Spec.Chart == nil || !a.Spec.Suspend {
		t.Errorf("a refused edit changed the spec: %v, %+v", err, a.Spec)
	}
	for field, req := range map[string]map[string]any{
		"definition":   {"definition": "name: demo\n"},
		"secretInputs": {"secretInputs": map[string]string{"a": "b"}},
	} {
		code, body := call(t, editor, http.MethodPost, path+"/plan", req)
		expect(t, "a plan with "+field, code, body, http.StatusBadRequest)
		if !strings.Contains(string(body), `"field":"`+field+`"`) {
			t.Errorf("the refusal of a plan with %s names another field: %s", field, body)
		}
	}
}
