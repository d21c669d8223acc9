package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestPageSaysWhichDiffsWereCut shows, in a real headless Chromium, an
// add-on waiting for approval whose plan in status kept some diffs in part
// and some not at all, as the controller cuts them past their bounds: the
// page warns beside Approve and above the objects, says how to see the
// whole plan, and marks each object whose diff was cut, and no other (a
// create whose namespace the sync makes first has no diff to show). A
// diff too large to compute for status, which only counts its lines, is
// marked as such, not as one whose start is kept.
func TestPageSaysWhichDiffsWereCut(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: capstanv1.AddonSpec{ManualSync: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/web-1.0.0.tgz"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	ref := func(kind, name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: kind, Namespace: ns, Name: name}
	}
	a.Status.Phase = capstanv1.PhaseOutOfSync
	apimeta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: "AwaitingApproval", Message: "waits for approval", ObservedGeneration: a.Generation})
	a.Status.Plan = &capstanv1.Plan{Hash: hashOf("c"), Generation: a.Generation, DiffsTruncated: true,
		Summary: capstanv1.PlanSummary{Create: 2, Update: 1},
		Objects: []capstanv1.PlannedObject{
			{ObjectRef: ref("ConfigMap", "first"), Action: capstanv1.ActionUpdate, DiffTruncated: true,
				Diff: "--- live\n+++ planned\n@@ -1,2 +1,2 @@\n data:\n-  a: old\n+  a: new\n... diff truncated; run `capstan plan` for more of it: it shows each diff up to 128 KiB\n"},
			{ObjectRef: ref("Deployment", "web"), Action: capstanv1.ActionUpdate, DiffTruncated: true},
			{ObjectRef: ref("CustomResourceDefinition", "widgets"), Action: capstanv1.ActionUpdate, DiffTruncated: true,
				Diff: "--- live/CustomResourceDefinition/widgets\n+++ planned/CustomResourceDefinition/widgets\n(diff too large to show here: 714 lines removed and 714 added, between line 7 and line 4998; run `capstan plan` for the diff, which it shows up to 128 KiB)\n"},
			{ObjectRef: ref("ConfigMap", "waits-for-its-namespace"), Action: capstanv1.ActionCreate},
		},
	}
	if err := admin.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	approver := user(t, ns, "approver", addonRule("get", "list", "patch"))

	page := browser(t)
	signIn(t, page, approver)
	run(t, page, "reading the add-on",
		chromedp.Navigate(api.URL+"/addons/"+ns+"/web"),
		chromedp.WaitVisible(`//button[text()="Approve this plan"]`))
	if form := value(t, page, chromedp.Evaluate[string](`document.querySelector('section.actions form').textContent`)); !strings.Contains(form, "Some of this plan's diffs were cut") {
		t.Errorf("the Approve form does not warn that diffs were cut: %q", form)
	}
	plan := value(t, page, chromedp.Evaluate[string](`document.querySelector('section[aria-label="Plan"]').textContent`))
	for _, want := range []string{"Some diffs were cut", "capstan plan web -n " + ns, "POST /api/v1/namespaces/" + ns + "/addons/web/plan"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	summaries := value(t, page, chromedp.Evaluate[[]string](`[...document.querySelectorAll('details.object summary')].map(e => e.textContent)`))
	marks := []string{"diff cut", "diff not kept", "diff only counted", ""}
	if len(summaries) != len(marks) {
		t.Fatalf("the page lists %d objects; want %d", len(summaries), len(marks))
	}
	for i, want := range marks {
		got := ""
		for _, mark := range []string{"diff cut", "diff not kept", "diff only counted"} {
			if strings.Contains(summaries[i], mark) {
				got = mark
			}
		}
		if got != want {
			t.Errorf("object %q is marked %q; want %q", summaries[i], got, want)
		}
	}
	for _, says := range []string{"Diff not kept: ", "Diff cut: only its start", "Diff too large to compute here: its changed lines are only counted"} {
		if n := value(t, page, chromedp.Evaluate[int](`[...document.querySelectorAll('details.object p.warning')].filter(e => e.textContent.startsWith('`+says+`')).length`)); n != 1 {
			t.Errorf("%d objects say %q; want 1", n, says)
		}
	}
}
