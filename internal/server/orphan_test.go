package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
)

// TestAddonsOfARepositoryThatIsGone: a deleted AddonRepository leaves its
// Addons with the managed-by-git label, and no syncer manages them any
// more. The API and the page change them in the cluster, as the CLI does,
// where they answered that the repository could not be read: such an
// Addon could be neither suspended, edited nor removed but by kubectl.
func TestAddonsOfARepositoryThatIsGone(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	for _, name := range []string{"orphan", "shown"} {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{gitops.ManagedByGitLabel: "gone"}},
			Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
		if err := admin.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch", "delete"))
	base := "/api/v1/namespaces/" + ns + "/addons/orphan"

	code, body := call(t, editor, http.MethodPost, base+"/suspend", nil)
	expect(t, "suspending an Addon of a repository that is gone", code, body, http.StatusNoContent)
	code, body = call(t, editor, http.MethodPatch, base, map[string]any{"spec": map[string]any{"values": map[string]any{"replicas": 2}}})
	expect(t, "editing an Addon of a repository that is gone", code, body, http.StatusOK)
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orphan"}, a); err != nil {
		t.Fatal(err)
	}
	if !a.Spec.Suspend || a.Spec.Values == nil || string(a.Spec.Values.Raw) != `{"replicas":2}` {
		t.Errorf("the Addon was not changed in the cluster: suspend %v, values %v", a.Spec.Suspend, a.Spec.Values)
	}
	code, body = call(t, editor, http.MethodDelete, base, nil)
	expect(t, "removing an Addon of a repository that is gone", code, body, http.StatusNoContent)

	page := browser(t)
	signIn(t, page, editor)
	run(t, page, "suspending on the page",
		chromedp.Navigate(api.URL+"/addons/"+ns+"/shown"),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"AddonRepository gone is gone")]`),
		chromedp.Click(`//button[text()="Suspend"]`),
		chromedp.WaitVisible(`//button[text()="Resume"]`),
	)
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shown"}, a); err != nil || !a.Spec.Suspend {
		t.Errorf("the page did not suspend the Addon in the cluster: %v, suspend %v", err, a.Spec.Suspend)
	}
}
