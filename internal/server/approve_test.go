package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestApprovalOfASuspendedAddonIsRefused approves the plan of a suspended
// add-on through the API and through the page's form, as the CLI's sync
// would: each is refused with 409, saying how to resume it, and leaves no
// approval that a later resume, meant as no sync, would apply.
func TestApprovalOfASuspendedAddonIsRefused(t *testing.T) {
	ns := namespace(t)
	a := addonWithPlan(t, ns, "held", hashOf("a"))
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	path := "/api/v1/namespaces/" + ns + "/addons/held"

	code, body := call(t, editor, http.MethodPost, path+"/approve", map[string]string{"hash": hashOf("a")})
	expect(t, "the API's approval of a suspended add-on", code, body, http.StatusConflict)
	if !strings.Contains(string(body), "is suspended") || !strings.Contains(string(body), "capstan addon install held -n "+ns) {
		t.Errorf("the refusal %s does not say how to resume the add-on", body)
	}

	s := signInAt(t, api.URL, editor)
	code, page := s.send(t, http.MethodPost, "/addons/"+ns+"/held/approve", url.Values{"uid": {string(a.UID)}, "hash": {hashOf("a")}})
	if code != http.StatusConflict || !strings.Contains(page, "is suspended") {
		t.Errorf("the page's approval of a suspended add-on: %d; want 409 saying it is suspended", code)
	}

	got := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), got); err != nil {
		t.Fatal(err)
	}
	if !got.Spec.Suspend || got.Spec.ApprovedPlan != "" || got.Spec.SyncRequest != 0 {
		t.Errorf("the refused approvals changed the Addon: suspend %v, approvedPlan %q, syncRequest %d", got.Spec.Suspend, got.Spec.ApprovedPlan, got.Spec.SyncRequest)
	}

	// Install is the approval of a suspended add-on: it resumes it in the
	// same write.
	code, body = call(t, editor, http.MethodPost, path+"/install", map[string]string{"hash": hashOf("a")})
	expect(t, "the install of a suspended add-on", code, body, http.StatusOK)
}
