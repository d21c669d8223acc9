package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/testcontroller"
)

// pageGet signs in to the page at base with token and gets path, without
// following redirects; it answers the status, the Retry-After and the
// page's text.
func pageGet(t *testing.T, base, token, path string) (int, string, string) {
	t.Helper()
	code, retryAfter, text, err := pageGetContext(context.Background(), pageSignIn(t, base, token), base, path)
	if err != nil {
		t.Fatal(err)
	}
	return code, retryAfter, text
}

// noRedirects is the page's client, which follows no redirect.
func noRedirects() *http.Client {
	return &http.Client{Transport: apiClient().Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// pageSignIn signs in to the page at base with token, and answers the
// session's cookie.
func pageSignIn(t *testing.T, base, token string) *http.Cookie {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := noRedirects().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookieName {
			return ck
		}
	}
	t.Fatalf("signing in: %d and no session", resp.StatusCode)
	return nil
}

// pageGetContext gets path with the session, under ctx.
func pageGetContext(ctx context.Context, session *http.Cookie, base, path string) (int, string, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, "", "", err
	}
	req.AddCookie(session)
	resp, err := noRedirects().Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body), nil
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

// slowCharts is a chart server that answers only once released, or never
// when its client hangs up, and counts the requests it is answering now.
type slowCharts struct {
	*httptest.Server
	asked    chan struct{}
	inFlight atomic.Int64
	release  func()
}

func newSlowCharts(t *testing.T) *slowCharts {
	t.Helper()
	chart, err := testcontroller.ChartArchive("slow", map[string]string{"Chart.yaml": "apiVersion: v2\nname: slow\nversion: 1.0.0\n"})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	s := &slowCharts{asked: make(chan struct{}, 64), release: sync.OnceFunc(func() { close(released) })}
	// NOTE: httptest's TLS servers share one certificate, the one the
	// tests' fetcher trusts for chartServer.
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		s.asked <- struct{}{}
		select {
		case <-released:
			_, _ = w.Write(chart)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(s.Close)
	t.Cleanup(s.release)
	return s
}

// hangUpOnceAsked sends request until the slow server is asked for the
// chart, and hangs up then; a 429 (the turn not yet free) is sent again.
func hangUpOnceAsked(t *testing.T, slow *slowCharts, what string, request func(ctx context.Context) (int, string)) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithCancel(context.Background())
		type answer struct {
			code int
			text string
		}
		done := make(chan answer, 1)
		go func() {
			code, text := request(ctx)
			done <- answer{code, text}
		}()
		select {
		case <-slow.asked:
			cancel()
			<-done
			return
		case a := <-done:
			cancel()
			if a.code != http.StatusTooManyRequests {
				t.Fatalf("%s: %d %s; want it to fetch", what, a.code, a.text)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Fatalf("%s: every turn stayed taken for 20 s", what)
}

// waitIdle fails the test unless the slow server answers nothing within
// 10 s.
func waitIdle(t *testing.T, slow *slowCharts, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if slow.inFlight.Load() == 0 {
			return
		}
	}
	t.Fatalf("%s: %d downloads go on that no one waits for", what, slow.inFlight.Load())
}

// TestFetchesNoOneWaitsForStop opens the chart form, and asks for plans of
// a change, with links to a chart that never comes, and hangs up as soon
// as the chart server is asked: each download stops with its page or plan,
// so the server's bound of one fetch at a time holds, and no hang-up
// leaves one going on.
func TestFetchesNoOneWaitsForStop(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "patch"))
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	slow := newSlowCharts(t)
	srv := newServer()
	srv.MaxPageFetches, srv.MaxPlans = 1, 1
	base := serve(t, srv)
	session := pageSignIn(t, base, editor)

	for i := range 4 {
		link := fmt.Sprintf("%s/slow-1.0.0.tgz?page=%d", slow.URL, i)
		form := "/new?" + url.Values{"chart": {link}, "namespace": {ns}, "name": {"slow"}}.Encode()
		hangUpOnceAsked(t, slow, "the form", func(ctx context.Context) (int, string) {
			code, _, text, _ := pageGetContext(ctx, session, base, form)
			return code, text
		})
		waitIdle(t, slow, "after a form's hang-up")
	}
	for i := range 4 {
		change := fmt.Sprintf(`{"spec":{"chart":{"url":%q}}}`, fmt.Sprintf("%s/slow-1.0.0.tgz?plan=%d", slow.URL, i))
		hangUpOnceAsked(t, slow, "the plan", func(ctx context.Context) (int, string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/namespaces/"+ns+"/addons/mine/plan", strings.NewReader(change))
			if err != nil {
				return 0, err.Error()
			}
			req.Header.Set("Authorization", "Bearer "+editor)
			resp, err := apiClient().Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		})
		waitIdle(t, slow, "after a plan's hang-up")
	}
}

// TestPageFetchesAreSharedOutAndShort holds one of the server's two page
// fetches as one user: that user's second form is refused with 429, while
// another user's form is served, and Edit values, when every turn is
// taken, falls back to the YAML editor and says why. A fetch past the
// pages' own timeout is given up, and says so.
func TestPageFetchesAreSharedOutAndShort(t *testing.T) {
	nsA, nsB := namespace(t), namespace(t)
	userA := user(t, nsA, "a", addonRule("get", "list", "create", "patch"))
	userB := user(t, nsB, "b", addonRule("get", "list", "create", "patch"))
	userC := user(t, nsB, "c", addonRule("get", "list", "patch"))
	pinned := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "pinned"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz?shared=" + nsB}}}
	if err := admin.Create(context.Background(), pinned); err != nil {
		t.Fatal(err)
	}
	slow := newSlowCharts(t)
	srv := newServer()
	srv.MaxPageFetches = 2
	srv.FetchTimeout = 8 * time.Second
	base := serve(t, srv)
	formOf := func(ns, link string) string {
		return "/new?" + url.Values{"chart": {link}, "namespace": {ns}, "name": {"blog"}}.Encode()
	}

	first := make(chan string, 1)
	start := time.Now()
	go func() {
		code, _, text := pageGet(t, base, userA, formOf(nsA, slow.URL+"/slow-1.0.0.tgz?held"))
		first <- fmt.Sprint(code, " ", text)
	}()
	<-slow.asked
	code, retryAfter, text := pageGet(t, base, userA, formOf(nsA, chartServer.URL+"/form-1.0.0.tgz?second="+nsA))
	if code != http.StatusTooManyRequests || retryAfter == "" || !strings.Contains(text, "the most this server fetches at once for one user") {
		t.Errorf("a user's second page fetch: %d, Retry-After %q, %q; want 429 saying why", code, retryAfter, text)
	}
	code, _, text = pageGet(t, base, userB, formOf(nsB, chartServer.URL+"/form-1.0.0.tgz?other="+nsB))
	if code != http.StatusOK || !strings.Contains(text, `id="f-replicas"`) {
		t.Errorf("another user's form: %d; want 200 with the chart's fields:\n%s", code, text)
	}

	// B holds the other turn: Edit values, for anyone, shows the YAML
	// editor, with why the form is not shown.
	second := make(chan string, 1)
	go func() {
		code, _, text := pageGet(t, base, userB, formOf(nsB, slow.URL+"/slow-1.0.0.tgz?also"))
		second <- fmt.Sprint(code, " ", text)
	}()
	<-slow.asked
	code, _, text = pageGet(t, base, userC, "/addons/"+nsB+"/pinned/edit")
	if code != http.StatusOK || !strings.Contains(text, `id="yaml"`) || !strings.Contains(text, "the most this server fetches at once") {
		t.Errorf("Edit values while every page fetch is taken: %d; want 200, the YAML editor and why:\n%s", code, text)
	}

	for _, ch := range []chan string{first, second} {
		if got := <-ch; !strings.HasPrefix(got, "422 ") || !strings.Contains(got, "took longer than a page or a plan on demand waits") {
			t.Errorf("a form whose chart never comes: %.300s; want 422 saying the fetch took too long", got)
		}
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the forms took %s, past their 8 s fetch timeout", took)
	}
	waitIdle(t, slow, "after the pages' fetch timeout")
}

// TestPageFetchesAreSharedOutByUser holds one of the server's two page
// fetches, and one of its two plans, as one ServiceAccount of a team's
// namespace, working on an Addon of another: another ServiceAccount of the
// team's namespace is refused both with 429, naming its namespace's
// share, while a ServiceAccount of another namespace is served for the
// same Addon's namespace.
func TestPageFetchesAreSharedOutByUser(t *testing.T) {
	nsAddons, nsTeam, nsOps := namespace(t), namespace(t), namespace(t)
	one := userIn(t, nsTeam, "one", nsAddons, addonRule("get", "list", "create", "patch"))
	two := userIn(t, nsTeam, "two", nsAddons, addonRule("get", "list", "create", "patch"))
	other := userIn(t, nsOps, "other", nsAddons, addonRule("get", "list", "create", "patch"))
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: nsAddons, Name: "mine"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	slow := newSlowCharts(t)
	srv := newServer()
	srv.MaxPageFetches, srv.MaxPlans = 2, 2
	base := serve(t, srv)
	formOf := func(ns, link string) string {
		return "/new?" + url.Values{"chart": {link}, "namespace": {ns}, "name": {"blog"}}.Encode()
	}
	planOf := func(token, ns, link string) (int, string) {
		change := fmt.Sprintf(`{"spec":{"chart":{"url":%q}}}`, link)
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/namespaces/"+ns+"/addons/mine/plan", strings.NewReader(change))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := apiClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	held := make(chan int, 2)
	go func() {
		code, _, _ := pageGet(t, base, one, formOf(nsAddons, slow.URL+"/slow-1.0.0.tgz?form="+nsAddons))
		held <- code
	}()
	<-slow.asked
	go func() {
		code, _ := planOf(one, nsAddons, slow.URL+"/slow-1.0.0.tgz?plan="+nsAddons)
		held <- code
	}()
	<-slow.asked

	share := "the ServiceAccounts of namespace " + nsTeam
	code, _, text := pageGet(t, base, two, formOf(nsAddons, chartServer.URL+"/form-1.0.0.tgz?two="+nsAddons))
	if code != http.StatusTooManyRequests || !strings.Contains(text, share) || !strings.Contains(text, "the most this server fetches at once for one user") {
		t.Errorf("a form of another ServiceAccount of the team's namespace: %d %.300q; want 429 naming its namespace's share", code, text)
	}
	if code, text := planOf(two, nsAddons, chartServer.URL+"/form-1.0.0.tgz?two="+nsAddons); code != http.StatusTooManyRequests || !strings.Contains(text, share) || !strings.Contains(text, "the most this server computes at once for one user") {
		t.Errorf("a plan of another ServiceAccount of the team's namespace: %d %.300q; want 429 naming its namespace's share", code, text)
	}
	code, _, text = pageGet(t, base, other, formOf(nsAddons, chartServer.URL+"/form-1.0.0.tgz?other="+nsOps))
	if code != http.StatusOK || !strings.Contains(text, `id="f-replicas"`) {
		t.Errorf("a form of a ServiceAccount of another namespace, in the same Addons' namespace: %d; want 200 with the chart's fields:\n%.300s", code, text)
	}
	if code, text := planOf(other, nsAddons, chartServer.URL+"/public-1.0.0.tgz?other="+nsOps); code != http.StatusOK {
		t.Errorf("a plan of a ServiceAccount of another namespace, in the same Addons' namespace: %d %.300s; want 200", code, text)
	}
	slow.release()
	for range 2 {
		if code := <-held; code != http.StatusOK {
			t.Errorf("a form or plan that held a turn: %d; want 200", code)
		}
	}
}
