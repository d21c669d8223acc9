package server_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// posted is what a browser posts for a page's edit form: its hidden
// inputs and its YAML editor, with no field input.
func posted(t *testing.T, page string) url.Values {
	t.Helper()
	out := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		if m[1] != "csrf" {
			out.Set(m[1], html.UnescapeString(m[2]))
		}
	}
	m := regexp.MustCompile(`(?s)<textarea id="yaml" name="yaml"[^>]*>(.*?)</textarea>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no YAML editor:\n%s", page)
	}
	out.Set("yaml", html.UnescapeString(m[1]))
	return out
}

// TestEditValuesOpenedAsYAMLSavesOnlyItsYAML opens Edit values while every
// page fetch is taken, so that it is the YAML editor alone, frees the
// turn, and saves the form as it was shown: the chart's fields, fetched
// for the save, are not read, so its boxes ticked by default are not saved
// as false, and spec.values gains no key.
func TestEditValuesOpenedAsYAMLSavesOnlyItsYAML(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := namespace(t), namespace(t)
	holder := user(t, nsA, "holder", addonRule("get", "list", "create", "patch"))
	editor := user(t, nsB, "editor", addonRule("get", "list", "update", "patch"))
	key := client.ObjectKey{Namespace: nsB, Name: "toggled"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/toggles-1.0.0.tgz"},
			Values: jsonValues(`{"greeting":"hi"}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	slow := newSlowCharts(t)
	srv := newServer()
	srv.MaxPageFetches = 1
	base := serve(t, srv)

	held := make(chan int, 1)
	go func() {
		form := "/new?" + url.Values{"chart": {slow.URL + "/slow-1.0.0.tgz?yamlonly=" + nsA}, "namespace": {nsA}, "name": {"slow"}}.Encode()
		code, _, _ := pageGet(t, base, holder, form)
		held <- code
	}()
	<-slow.asked
	sess := signInAt(t, base, editor)
	edit := "/addons/" + nsB + "/toggled/edit"
	code, page := sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK || strings.Contains(page, `id="f-rbac-create"`) || !strings.Contains(page, "the most this server fetches at once") {
		t.Fatalf("Edit values while every page fetch is taken: %d; want the YAML editor alone\n%s", code, page)
	}
	slow.release()
	if code := <-held; code != http.StatusOK {
		t.Fatalf("the form that held the turn: %d", code)
	}

	if code, page = sess.send(t, http.MethodPost, edit, posted(t, page)); code != http.StatusSeeOther {
		t.Fatalf("saving the YAML editor as it was shown: %d\n%s", code, page)
	}
	if got, want := specValuesOf(t, key), map[string]any{"greeting": "hi"}; !equalJSON(got, want) {
		t.Errorf("the values after a save of what was shown: %v; want %v, no box the form did not show", got, want)
	}
}
