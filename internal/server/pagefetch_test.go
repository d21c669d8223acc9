package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/testcontroller"
)

// pageGet signs in to the page at base with token and gets path, without
// following redirects; it answers the status, the Retry-After and the
// page's text.
func pageGet(t *testing.T, base, token, path string) (int, string, string) {
	t.Helper()
	c := &http.Client{Transport: apiClient().Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	req, err := http.NewRequest(http.MethodPost, base+"/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookieName {
			session = ck
		}
	}
	if session == nil {
		t.Fatalf("signing in: %d and no session", resp.StatusCode)
	}
	req, err = http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(session)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// TestPagesFetchOnlyForWhoMayChange opens the chart form and Edit values
// as a user who may read Addons but neither create nor change them: both
// are refused with 403, and the chart server sees no request. An editor
// gets the form.
func TestPagesFetchOnlyForWhoMayChange(t *testing.T) {
	ns := namespace(t)
	// A link of this test alone, so that no cached chart hides a fetch.
	link := chartServer.URL + "/form-1.0.0.tgz?for=" + ns
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: link}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	reader := user(t, ns, "reader", addonRule("get", "list"))
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "patch"))
	form := "/new?" + url.Values{"chart": {link}, "namespace": {ns}, "name": {"blog"}}.Encode()

	before := chartRequests.Load()
	code, _, text := pageGet(t, api.URL, reader, form)
	if code != http.StatusForbidden || !strings.Contains(text, "may not create Addon "+ns+"/blog, so the chart was not fetched") {
		t.Errorf("the form for a reader: %d, %q; want 403 saying why", code, text)
	}
	code, _, text = pageGet(t, api.URL, reader, "/addons/"+ns+"/pinned/edit")
	if code != http.StatusForbidden || !strings.Contains(text, "may not patch Addon "+ns+"/pinned, so the chart was not fetched") {
		t.Errorf("Edit values for a reader: %d, %q; want 403 saying why", code, text)
	}
	if n := chartRequests.Load() - before; n != 0 {
		t.Errorf("the reader's pages made the controller fetch %d times; want none", n)
	}

	code, _, text = pageGet(t, api.URL, editor, form)
	if code != http.StatusOK || !strings.Contains(text, `id="f-replicas"`) {
		t.Errorf("the form for an editor: %d; want 200 with the chart's fields:\n%s", code, text)
	}
	if n := chartRequests.Load() - before; n != 1 {
		t.Errorf("the editor's form fetched %d times; want 1", n)
	}
}

// TestPageFetchesAreBounded holds the server's one page fetch with a chart
// that is slow to come: a second page that would fetch is answered 429,
// with a Retry-After, and fetches nothing.
func TestPageFetchesAreBounded(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "patch"))
	chart, err := testcontroller.ChartArchive("slow", map[string]string{"Chart.yaml": "apiVersion: v2\nname: slow\nversion: 1.0.0\n"})
	if err != nil {
		t.Fatal(err)
	}
	asked, release := make(chan struct{}, 8), make(chan struct{})
	// NOTE: httptest's TLS servers share one certificate, the one the
	// tests' fetcher trusts for chartServer.
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		<-release
		_, _ = w.Write(chart)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	srv := newServer()
	srv.MaxPageFetches = 1
	base := serve(t, srv)
	formOf := func(link string) string {
		return "/new?" + url.Values{"chart": {link}, "namespace": {ns}, "name": {"slow"}}.Encode()
	}

	first := make(chan int, 1)
	go func() {
		code, _, _ := pageGet(t, base, editor, formOf(slow.URL+"/slow-1.0.0.tgz?for="+ns))
		first <- code
	}()
	<-asked
	before := chartRequests.Load()
	code, retryAfter, text := pageGet(t, base, editor, formOf(chartServer.URL+"/form-1.0.0.tgz?bounded="+ns))
	if code != http.StatusTooManyRequests || retryAfter == "" || !strings.Contains(text, "the most this server fetches at once") {
		t.Errorf("a page fetch past the bound: %d, Retry-After %q, %q; want 429 saying why", code, retryAfter, text)
	}
	if n := chartRequests.Load() - before; n != 0 {
		t.Errorf("the refused page fetched %d times", n)
	}
	release <- struct{}{}
	if code := <-first; code != http.StatusOK {
		t.Errorf("the page that held the fetch: %d; want 200", code)
	}
}
