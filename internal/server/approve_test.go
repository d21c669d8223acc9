package server_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
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

// TestPlanWhoseDryRunFailedIsNotApproved approves and installs plans with
// an object that an admission webhook refused in the dry run, through the
// API and the page's form: each is refused with 422, naming the object and
// the webhook's answer, and writes nothing. An approval would never apply
// (the controller applies no plan with such an error), and since the error
// is in the plan's hash, it would be left over once the webhook is fixed,
// holding the plan that follows as stale. The page offers neither Approve
// nor Install for such a plan, and says why.
func TestPlanWhoseDryRunFailedIsNotApproved(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const refusal = `admission webhook "policy.example.com" denied the request: no`
	failed := func(name string, suspend bool) *capstanv1.Addon {
		t.Helper()
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: capstanv1.AddonSpec{Suspend: suspend, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
		if err := admin.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Status.Plan = &capstanv1.Plan{Hash: hashOf("1"), Generation: a.Generation, Summary: capstanv1.PlanSummary{Create: 1},
			Objects: []capstanv1.PlannedObject{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"},
				Action: capstanv1.ActionCreate, Error: refusal}}}
		if err := admin.Status().Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	running, held := failed("running", false), failed("held", true)
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	sess := signInAt(t, api.URL, editor)
	for _, tc := range []struct {
		a          *capstanv1.Addon
		verb, says string
	}{{running, "approve", "Approve this plan"}, {held, "install", "Install this plan"}} {
		name := tc.a.Name
		code, body := call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/"+name+"/"+tc.verb, map[string]string{"hash": hashOf("1")})
		expect(t, "the API's "+tc.verb+" of a plan whose dry run failed", code, body, http.StatusUnprocessableEntity)
		for _, says := range []string{"ConfigMap " + ns + "/settings", "policy.example.com", "no approval of this plan could ever apply it"} {
			if !strings.Contains(string(body), says) {
				t.Errorf("the API's refusal of the %s %s does not say %q", tc.verb, body, says)
			}
		}
		code, page := sess.send(t, http.MethodPost, "/addons/"+ns+"/"+name+"/"+tc.verb, url.Values{"uid": {string(tc.a.UID)}, "hash": {hashOf("1")}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(page, "no approval of this plan could ever apply it") {
			t.Errorf("the page's %s of a plan whose dry run failed: %d; want 422 saying why", tc.verb, code)
		}
		got := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(tc.a), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Suspend != tc.a.Spec.Suspend || got.Spec.ApprovedPlan != "" || got.Spec.SyncRequest != 0 {
			t.Errorf("the refused %s changed the Addon: suspend %v, approvedPlan %q, syncRequest %d", tc.verb, got.Spec.Suspend, got.Spec.ApprovedPlan, got.Spec.SyncRequest)
		}
		code, page = sess.send(t, http.MethodGet, "/addons/"+ns+"/"+name, nil)
		if code != http.StatusOK || strings.Contains(page, tc.says) || !strings.Contains(page, "This plan cannot be") ||
			!strings.Contains(page, "policy.example.com") {
			t.Errorf("the page of %s: %d; want no %q, and why not", name, code, tc.says)
		}
	}
}

// TestApprovalOfAnAddonHeldSinceItsProfileChangedIsRefused approves and
// installs the plans of add-ons whose sync the controller holds, Blocked
// with ProfileChanged, through the API and the page's form: the plan in
// status was computed under the cluster profile before the namespace left
// the trusted ones, and an approval of it would wait to apply whenever the
// trust came back. Each is refused with 409 quoting the hold's message,
// which says what to do, and writes nothing; the page offers neither
// Approve nor Install, and says why.
func TestApprovalOfAnAddonHeldSinceItsProfileChangedIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const says = "Trust the namespace again, or delete the Addon."
	held := func(name string, suspend bool) *capstanv1.Addon {
		t.Helper()
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: capstanv1.AddonSpec{Suspend: suspend, ManualSync: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
		if err := admin.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Status.Plan = &capstanv1.Plan{Hash: hashOf("2"), Generation: a.Generation, Summary: capstanv1.PlanSummary{Update: 1},
			Objects: []capstanv1.PlannedObject{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"},
				Action: capstanv1.ActionUpdate}}}
		a.Status.Profile, a.Status.Phase, a.Status.ObservedGeneration = capstanv1.ProfileCluster, capstanv1.PhaseBlocked, a.Generation
		apimeta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: controller.ReasonProfileChanged, Message: "Installed under the cluster profile. " + says, ObservedGeneration: a.Generation})
		if err := admin.Status().Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	running, suspended := held("running", false), held("suspended", true)
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	sess := signInAt(t, api.URL, editor)
	for _, tc := range []struct {
		a    *capstanv1.Addon
		verb string
	}{{running, "approve"}, {running, "install"}, {suspended, "approve"}, {suspended, "install"}} {
		name := tc.a.Name
		code, body := call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/"+name+"/"+tc.verb, map[string]string{"hash": hashOf("2")})
		expect(t, "the API's "+tc.verb+" of "+name+", held since its profile changed", code, body, http.StatusConflict)
		for _, want := range []string{"Blocked (ProfileChanged)", "no plan of it is approved until the namespace is trusted again", says} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the API's refusal of the %s of %s %s does not say %q", tc.verb, name, body, want)
			}
		}
		code, page := sess.send(t, http.MethodPost, "/addons/"+ns+"/"+name+"/"+tc.verb, url.Values{"uid": {string(tc.a.UID)}, "hash": {hashOf("2")}})
		if code != http.StatusConflict || !strings.Contains(page, "Blocked (ProfileChanged)") {
			t.Errorf("the page's %s of %s, held since its profile changed: %d; want 409 saying why", tc.verb, name, code)
		}
		got := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(tc.a), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Suspend != tc.a.Spec.Suspend || got.Spec.ApprovedPlan != "" || got.Spec.SyncRequest != 0 {
			t.Errorf("the refused %s changed %s: suspend %v, approvedPlan %q, syncRequest %d", tc.verb, name, got.Spec.Suspend, got.Spec.ApprovedPlan, got.Spec.SyncRequest)
		}
	}
	for _, a := range []*capstanv1.Addon{running, suspended} {
		code, page := sess.send(t, http.MethodGet, "/addons/"+ns+"/"+a.Name, nil)
		if code != http.StatusOK || strings.Contains(page, "Approve this plan") || strings.Contains(page, "Install this plan") ||
			!strings.Contains(page, "This plan cannot be") || !strings.Contains(page, "ProfileChanged") {
			t.Errorf("the page of %s: %d; want no Approve or Install, and why not", a.Name, code)
		}
	}
}

// TestApprovalOfASuspendedAddonOfAGoneRepository approves, through the API
// and the page's form, a suspended add-on that still carries the
// managed-by-git label of an AddonRepository that is gone: refused with
// 409 as any suspended add-on's, pointing to install, which takes it in
// the cluster, not to a commit that no repository would take; install
// then works.
func TestApprovalOfASuspendedAddonOfAGoneRepository(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	a := addonWithPlan(t, ns, "orphan", hashOf("a"))
	a.Labels = map[string]string{gitops.ManagedByGitLabel: "gone"}
	if err := admin.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	path := "/api/v1/namespaces/" + ns + "/addons/orphan"

	says := func(what, body string) {
		t.Helper()
		if !strings.Contains(body, "is suspended") || !strings.Contains(body, "capstan addon install orphan -n "+ns+" --plan "+hashOf("a")) ||
			!strings.Contains(body, "AddonRepository gone is gone") {
			t.Errorf("%s: the refusal %s does not point to install", what, body)
		}
		if strings.Contains(body, "--gitops") {
			t.Errorf("%s: the refusal %s points to a commit to a repository that is gone", what, body)
		}
	}
	code, body := call(t, editor, http.MethodPost, path+"/approve", map[string]string{"hash": hashOf("a")})
	expect(t, "the API's approval of a suspended add-on of a gone repository", code, body, http.StatusConflict)
	says("the API", string(body))

	s := signInAt(t, api.URL, editor)
	code, page := s.send(t, http.MethodPost, "/addons/"+ns+"/orphan/approve", url.Values{"uid": {string(a.UID)}, "hash": {hashOf("a")}})
	if code != http.StatusConflict {
		t.Errorf("the page's approval of a suspended add-on of a gone repository: %d; want 409", code)
	}
	says("the page", html.UnescapeString(page))

	code, body = call(t, editor, http.MethodPost, path+"/install", map[string]string{"hash": hashOf("a")})
	expect(t, "the install of a suspended add-on of a gone repository", code, body, http.StatusOK)
}
