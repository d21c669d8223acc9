package server_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/server"
)

// TestPageFormOverTheBound sends each of the page's forms (an action of an
// add-on's page, Edit values, the chart form and a catalog entry's form)
// with its CSRF token and values over the 1 MiB bound: each is refused
// with 413, saying the bound, not with 403 blaming the token, and nothing
// is changed or created.
func TestPageFormOverTheBound(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	a := addonWithPlan(t, ns, "big", hashOf("a"))
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch")))
	huge := strings.Repeat("k", server.MaxBody)
	for path, form := range map[string]url.Values{
		"/addons/" + ns + "/big/install": {"uid": {string(a.UID)}, "hash": {hashOf("a")}, "yaml": {huge}},
		"/addons/" + ns + "/big/edit":    {"uid": {string(a.UID)}, "generation": {"1"}, "yaml": {huge}},
		"/new":                           {"chart": {"https://charts.example/demo-1.0.0.tgz"}, "namespace": {ns}, "name": {"new"}, "yaml": {huge}},
		"/catalog/longhorn":              {"namespace": {ns}, "name": {"catalog"}, "yaml": {huge}},
	} {
		code, page := sess.send(t, http.MethodPost, path, form)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(page, "over 1 MiB") || strings.Contains(page, "CSRF") {
			t.Errorf("POST %s over the bound: %d; want 413 saying the bound", path, code)
		}
	}
	got := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil || !got.Spec.Suspend || got.Spec.SyncRequest != 0 || got.Generation != a.Generation {
		t.Errorf("a refused form changed the Addon: %v, suspend %v, syncRequest %d, generation %d", err, got.Spec.Suspend, got.Spec.SyncRequest, got.Generation)
	}
	list := &capstanv1.AddonList{}
	if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Errorf("refused forms created Addons: %v, %d in the namespace", err, len(list.Items))
	}
}

// TestPageFormMultipart sends an action of an add-on's page (refresh) as
// multipart/form-data, as curl -F and a form with that enctype do, with
// its CSRF token: it is done, as the same form urlencoded is, not refused
// with 403 as a form with no token; and over the 1 MiB bound it is 413.
func TestPageFormMultipart(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	plain := addonWithPlan(t, ns, "plain", hashOf("a"))
	multi := addonWithPlan(t, ns, "multi", hashOf("a"))
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))

	code, _ := sess.send(t, http.MethodPost, "/addons/"+ns+"/plain/refresh", url.Values{"uid": {string(plain.UID)}})
	if code != http.StatusSeeOther {
		t.Fatalf("the urlencoded refresh: %d; want 303", code)
	}
	code, page := sendMultipart(t, sess, "/addons/"+ns+"/multi/refresh", map[string]string{"uid": string(multi.UID)})
	if code != http.StatusSeeOther {
		t.Errorf("the multipart refresh: %d; want 303, as the urlencoded one\n%s", code, page)
	}
	for _, a := range []*capstanv1.Addon{plain, multi} {
		got := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil || got.Annotations[capstanv1.RefreshAnnotation] == "" {
			t.Errorf("addon %s after its refresh form: %v, annotations %v; want a refresh requested", a.Name, err, got.Annotations)
		}
	}

	code, page = sendMultipart(t, sess, "/addons/"+ns+"/multi/refresh", map[string]string{"uid": string(multi.UID), "yaml": strings.Repeat("k", server.MaxBody)})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(page, "over 1 MiB") {
		t.Errorf("a multipart form over the bound: %d; want 413 saying the bound", code)
	}
}

// sendMultipart posts fields and the session's CSRF token to path as
// multipart/form-data and returns the status and the body.
func sendMultipart(t *testing.T, s pageSession, path string, fields map[string]string) (int, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fields["csrf"] = s.csrf
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.base+path, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: s.cookie})
	resp, err := (&http.Client{Transport: apiClient().Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
