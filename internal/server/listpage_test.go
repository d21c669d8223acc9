package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestListPageHidesRepositoryCredentials lists a namespace whose
// AddonRepository's URL holds a user and a token: the Add-ons page shows
// the repository's address without them, as every message does.
func TestListPageHidesRepositoryCredentials(t *testing.T) {
	ns := namespace(t)
	const token = "gh0-s3cret-t0ken"
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: "https://" + token + "@git.example/ops.git"}}
	if err := admin.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	viewer := user(t, ns, "viewer", addonRule("get", "list"), rbacPolicy("capstan.dev", "addonrepositories", "get", "list"))
	code, _, page := pageGet(t, api.URL, viewer, "/addons?namespace="+ns)
	if code != http.StatusOK || !strings.Contains(page, "Git repositories") {
		t.Fatalf("the list page: %d; want 200 with the repository", code)
	}
	if strings.Contains(page, token) {
		t.Errorf("the list page shows the repository's credentials")
	}
	if !strings.Contains(page, "https://git.example/ops.git") {
		t.Errorf("the list page does not show the repository's address")
	}
}

// TestListsAreBounded lists a namespace of 101 Addons: the API answers a
// list that names no limit with the first 100 and a continue token, and
// the Add-ons page shows 100 with a link to the rest. While every turn to
// read a list is taken, both answer 429 with a Retry-After, and the page
// shows no add-on.
func TestListsAreBounded(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	for i := range 101 {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("a%03d", i)},
			Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
		if err := admin.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	path := "/api/v1/namespaces/" + ns + "/addons"

	code, body := call(t, viewer, http.MethodGet, path, nil)
	expect(t, "a list with no limit", code, body, http.StatusOK)
	var list capstanv1.AddonList
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 100 || list.Continue == "" {
		t.Fatalf("a list with no limit: %d Addons, continue %q, %v; want the first 100 and a token for the rest", len(list.Items), list.Continue, err)
	}
	code, body = call(t, viewer, http.MethodGet, path+"?continue="+url.QueryEscape(list.Continue), nil)
	expect(t, "the next page", code, body, http.StatusOK)
	list = capstanv1.AddonList{}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "a100" || list.Continue != "" {
		t.Fatalf("the next page: %d Addons, continue %q, %v; want a100 alone", len(list.Items), list.Continue, err)
	}

	rows := regexp.MustCompile(`<td><a href="/addons/` + ns + `/(a\d+)">`)
	more := regexp.MustCompile(`<a href="(/addons\?[^"]*)">next add-ons</a>`)
	code, _, page := pageGet(t, api.URL, viewer, "/addons?namespace="+ns)
	next := more.FindStringSubmatch(page)
	if shown := rows.FindAllStringSubmatch(page, -1); code != http.StatusOK || len(shown) != 100 || next == nil {
		t.Fatalf("the Add-ons page: %d, %d add-ons, link to more %v; want the first 100 and a link to the rest", code, len(shown), next)
	}
	code, _, page = pageGet(t, api.URL, viewer, html.UnescapeString(next[1]))
	if shown := rows.FindAllStringSubmatch(page, -1); code != http.StatusOK || len(shown) != 1 || shown[0][1] != "a100" || more.MatchString(page) {
		t.Fatalf("the page after it: %d, %v; want a100 alone, and no link to more", code, shown)
	}

	srv := newServer()
	srv.MaxLists = 1
	base := serve(t, srv)
	release := srv.HoldListTurns()
	code, header, body := getAs(t, apiClient(), base+path, viewer)
	if code != http.StatusTooManyRequests || header.Get("Retry-After") == "" || !strings.Contains(string(body), "the most this server reads at once") {
		t.Errorf("an API list while every turn is taken: %d, Retry-After %q, %s; want 429 saying why", code, header.Get("Retry-After"), body)
	}
	code, retryAfter, page := pageGet(t, base, viewer, "/addons?namespace="+ns)
	if code != http.StatusTooManyRequests || retryAfter == "" || !strings.Contains(page, "Reload the page in a few seconds") || rows.MatchString(page) {
		t.Errorf("the Add-ons page while every turn is taken: %d, Retry-After %q; want 429 saying to reload, and no add-on", code, retryAfter)
	}
	release()
	code, body = callAt(t, base, viewer, http.MethodGet, path, nil)
	expect(t, "a list once a turn is free", code, body, http.StatusOK)
}

// TestAddonReadsAreBounded reads a big Addon on a server that answers one
// read of an Addon at once, on a raw connection that reads nothing: the
// answer fills the small socket buffers and stops. Meanwhile the API's get
// and the add-on's page are 429 with a Retry-After, as are the page's
// forms of the add-on that are refused, which answer with its page, and a
// get whose client
// reads is served once the unread answer's 20 s have passed.
func TestAddonReadsAreBounded(t *testing.T) {
	ns := namespace(t)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"},
			Values: &apiextensionsv1.JSON{Raw: []byte(`{"blob":"` + strings.Repeat("x", 512<<10) + `"}`)}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	srv := newServer()
	srv.MaxReads = 1
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener = smallSendBuffers{ts.Listener}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	path := "/api/v1/namespaces/" + ns + "/addons/big"

	unread(t, ts.URL, http.MethodGet, path, viewer)
	time.Sleep(time.Second)
	code, header, body := getAs(t, apiClient(), ts.URL+path, viewer)
	if code != http.StatusTooManyRequests || header.Get("Retry-After") == "" || !strings.Contains(string(body), "the most this server reads at once") {
		t.Errorf("a get while the read turn is held: %d, Retry-After %q, %.200s; want 429 saying why", code, header.Get("Retry-After"), body)
	}
	code, retryAfter, page := pageGet(t, ts.URL, viewer, "/addons/"+ns+"/big")
	if code != http.StatusTooManyRequests || retryAfter == "" || !strings.Contains(page, "Reload the page in a few seconds") {
		t.Errorf("the add-on's page while the read turn is held: %d, Retry-After %q; want 429 saying to reload", code, retryAfter)
	}
	// The API's add and edit answer with the whole Addon too.
	for _, write := range []struct{ method, path string }{{http.MethodPatch, path}, {http.MethodPost, "/api/v1/namespaces/" + ns + "/addons"}} {
		code, body := callAt(t, ts.URL, viewer, write.method, write.path, map[string]any{})
		if code != http.StatusTooManyRequests || !strings.Contains(string(body), "the most this server reads at once") {
			t.Errorf("%s %s while the read turn is held: %d %.200s; want 429 saying why", write.method, write.path, code, body)
		}
	}
	// NOTE: a refused form answers with the whole add-on's page, and the
	// edit form reads the whole Addon before its token is checked: they
	// take a read turn too.
	for _, form := range []string{"refresh", "x", "edit"} {
		code, retryAfter, page = pagePost(t, ts.URL, viewer, "/addons/"+ns+"/big/"+form, url.Values{"uid": {"u"}})
		if code != http.StatusTooManyRequests || retryAfter == "" || !strings.Contains(page, "Reload the page in a few seconds") || strings.Contains(page, "xxxxxxxx") {
			t.Errorf("the add-on's %s form without its CSRF token while the read turn is held: %d, Retry-After %q; want 429 saying to reload, and no add-on", form, code, retryAfter)
		}
	}
	start := time.Now()
	for {
		code, _, body = getAs(t, apiClient(), ts.URL+path, viewer)
		if code == http.StatusOK {
			break
		}
		if code != http.StatusTooManyRequests || time.Since(start) > 45*time.Second {
			t.Fatalf("a get %s after the unread one: %d %.200s; want 200 once the unread answer's 20 s have passed", time.Since(start).Round(time.Second), code, body)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("a get was served %s after the unread one", time.Since(start).Round(time.Second))
}

// TestAddonReadsAreSharedOutByUser reads a big Addon on a server that
// answers two reads of an Addon at once, one of them for any one user: a
// user whose unread get holds a turn is refused a second get and its page,
// with a 429 that names the user's share, while another user's get and
// page are answered at once.
func TestAddonReadsAreSharedOutByUser(t *testing.T) {
	ns := namespace(t)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"},
			Values: &apiextensionsv1.JSON{Raw: []byte(`{"blob":"` + strings.Repeat("x", 512<<10) + `"}`)}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	// NOTE: the ServiceAccounts of one namespace share one share, so the
	// other user is one of another namespace.
	holder := user(t, ns, "holder", addonRule("get", "list"))
	other := userIn(t, namespace(t), "other", ns, addonRule("get", "list"))
	srv := newServer()
	srv.MaxReads = 2
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener = smallSendBuffers{ts.Listener}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	path := "/api/v1/namespaces/" + ns + "/addons/big"

	unread(t, ts.URL, http.MethodGet, path, holder)
	time.Sleep(time.Second)
	code, header, body := getAs(t, apiClient(), ts.URL+path, holder)
	if code != http.StatusTooManyRequests || header.Get("Retry-After") == "" || !strings.Contains(string(body), "for one user") {
		t.Errorf("the holder's second get: %d, Retry-After %q, %.300s; want 429 naming the user's share", code, header.Get("Retry-After"), body)
	}
	code, retryAfter, page := pageGet(t, ts.URL, holder, "/addons/"+ns+"/big")
	if code != http.StatusTooManyRequests || retryAfter == "" || !strings.Contains(page, "as one person may") {
		t.Errorf("the holder's page of the add-on: %d, Retry-After %q; want 429 naming the user's share", code, retryAfter)
	}
	start := time.Now()
	code, _, body = getAs(t, apiClient(), ts.URL+path, other)
	if code != http.StatusOK || time.Since(start) > 5*time.Second {
		t.Errorf("another user's get: %d after %s, %.200s; want 200 at once", code, time.Since(start).Round(time.Millisecond), body)
	}
	code, _, page = pageGet(t, ts.URL, other, "/addons/"+ns+"/big")
	if code != http.StatusOK || !strings.Contains(page, "big") {
		t.Errorf("another user's page of the add-on: %d; want 200", code)
	}
}

// pagePost signs in to the page at base with token and posts form to
// path, without following redirects; it answers the status, the
// Retry-After and the page's text.
func pagePost(t *testing.T, base, token, path string, form url.Values) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.AddCookie(pageSignIn(t, base, token))
	resp, err := noRedirects().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(text)
}

// smallSendBuffers is a listener whose connections have small send
// buffers, so that an answer its client does not read stops soon.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// unread sends a request on a raw TLS connection with a small receive
// buffer, and reads nothing of its answer, as a client that asks and does
// not read would. The connection is closed when the test ends.
func unread(t *testing.T, base, method, path, token string) {
	t.Helper()
	addr := strings.TrimPrefix(base, "https://")
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.(*net.TCPConn).SetReadBuffer(4096)
	conn := tls.Client(raw, &tls.Config{RootCAs: apiClient().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\n\r\n", method, path, addr, token); err != nil {
		t.Fatal(err)
	}
}

// TestListPageChecksTheNamespaceFilter filters the Add-ons page by a
// namespace: one pasted with spaces around it lists that namespace's
// add-ons, and one that is no namespace's name is refused with a 400
// naming the namespace, not a 500 or an empty list without a word.
func TestListPageChecksTheNamespaceFilter(t *testing.T) {
	ns := namespace(t)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "listed"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	code, _, page := pageGet(t, api.URL, viewer, "/addons?namespace="+url.QueryEscape(" "+ns+" "))
	if code != http.StatusOK || !strings.Contains(page, `<a href="/addons/`+ns+`/listed">`) {
		t.Errorf("the Add-ons page filtered by %q: %d; want 200 listing %s/listed", " "+ns+" ", code, ns)
	}
	for _, bad := range []string{"a/b", "Tenant", "-x"} {
		code, _, page := pageGet(t, api.URL, viewer, "/addons?namespace="+url.QueryEscape(bad))
		if code != http.StatusBadRequest || !strings.Contains(page, "Namespace: ") {
			t.Errorf("the Add-ons page filtered by %q: %d; want 400 naming the namespace", bad, code)
		}
	}
}
