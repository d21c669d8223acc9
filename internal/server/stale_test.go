package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
)

// sessionCookieName is the name of the page's session cookie.
const sessionCookieName = "__Host-capstan_session"

// send sends one request with the session, as do does, and returns the
// status and the body.
func (s pageSession) send(t *testing.T, method, path string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		form.Set("csrf", s.csrf)
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
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

// hidden is the value of the hidden input name in a page.
func hidden(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<input type="hidden" name="` + name + `" value="([^"]*)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no hidden input %s", name)
	}
	return m[1]
}

// specValuesOf reads an Addon's spec.values.
func specValuesOf(t *testing.T, key client.ObjectKey) map[string]any {
	t.Helper()
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), key, a); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if a.Spec.Values != nil {
		if err := json.Unmarshal(a.Spec.Values.Raw, &out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEditFormLeftOpenRevertsNothing opens the edit form, changes the
// add-on's values behind it (a field the form shows, and a key it does
// not), then saves the form as it was shown but for one field: the save
// is refused with 409 and the form shows the values of now; saved again
// from there, it changes that field alone, and keeps the other person's
// changes.
func TestEditFormLeftOpenRevertsNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "open"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"},
			Values: jsonValues(`{"greeting":"hi","replicas":2}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))
	edit := "/addons/" + ns + "/open/edit"
	code, page := sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d %s", code, page)
	}
	uid, generation := hidden(t, page, "uid"), hidden(t, page, "generation")
	if uid != string(a.UID) {
		t.Fatalf("the form names UID %q; the Addon's is %q", uid, a.UID)
	}

	// Someone else changes replicas, and adds a key no field shows.
	other := a.DeepCopy()
	if err := admin.Get(ctx, key, other); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(other.DeepCopy())
	other.Spec.Values = jsonValues(`{"greeting":"hi","replicas":3,"extra":"theirs"}`)
	if err := admin.Patch(ctx, other, patch); err != nil {
		t.Fatal(err)
	}

	shown := url.Values{"uid": {uid}, "generation": {generation}, "mode": {hidden(t, page, "mode")}, "v.greeting": {"mine"}, "v.replicas": {"2"}, "yaml": {""}}
	code, page = sess.send(t, http.MethodPost, edit, shown)
	if code != http.StatusConflict || !strings.Contains(page, "changed since the form was opened") {
		t.Fatalf("a save from a form left open: %d; want 409 saying why\n%s", code, page)
	}
	want := map[string]any{"greeting": "hi", "replicas": float64(3), "extra": "theirs"}
	if got := specValuesOf(t, key); !equalJSON(got, want) {
		t.Fatalf("a refused save changed the values: %v; want %v", got, want)
	}
	if !strings.Contains(page, `value="3"`) || !strings.Contains(page, "extra: theirs") {
		t.Errorf("the form shown again does not hold the values of now:\n%s", page)
	}

	again := url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")}, "mode": {hidden(t, page, "mode")},
		"v.greeting": {"mine"}, "v.replicas": {"3"}, "yaml": {"extra: theirs\n"}}
	if code, page = sess.send(t, http.MethodPost, edit, again); code != http.StatusSeeOther {
		t.Fatalf("a save from the form of now: %d\n%s", code, page)
	}
	want["greeting"] = "mine"
	if got := specValuesOf(t, key); !equalJSON(got, want) {
		t.Errorf("the values after the save: %v; want %v", got, want)
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestPageActionsNameTheirAddon removes, from a page left open, an Addon
// that was deleted and created again meanwhile: the form names the old
// Addon's UID, so the new Addon is not removed, nor suspended; a form
// that names no UID changes nothing either.
func TestPageActionsNameTheirAddon(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "again"}
	old := addonWithPlan(t, ns, key.Name, hashOf("a"))
	if err := admin.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	addonWithPlan(t, ns, key.Name, hashOf("b"))
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch", "delete")))
	base := "/addons/" + ns + "/again/"
	if code, page := sess.send(t, http.MethodPost, base+"remove", url.Values{"uid": {string(old.UID)}}); code != http.StatusConflict {
		t.Errorf("a removal of the old Addon: %d; want 409\n%s", code, page)
	}
	if code, page := sess.send(t, http.MethodPost, base+"resume", url.Values{"uid": {string(old.UID)}}); code != http.StatusConflict {
		t.Errorf("resuming the old Addon: %d; want 409\n%s", code, page)
	}
	if code, page := sess.send(t, http.MethodPost, base+"remove", url.Values{}); code != http.StatusBadRequest {
		t.Errorf("a removal that names no Addon: %d; want 400\n%s", code, page)
	}
	now := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, now); err != nil || now.DeletionTimestamp != nil || !now.Spec.Suspend {
		t.Fatalf("the new Addon was changed by forms of the old one: %v, deleting %v, suspend %v", err, now.DeletionTimestamp, now.Spec.Suspend)
	}
	if code, page := sess.send(t, http.MethodPost, base+"remove", url.Values{"uid": {string(now.UID)}}); code != http.StatusSeeOther {
		t.Fatalf("a removal of the Addon the page shows: %d\n%s", code, page)
	}
	if err := admin.Get(ctx, key, now); !apierrors.IsNotFound(err) && now.DeletionTimestamp == nil {
		t.Errorf("the removal did not delete the Addon: %v", err)
	}
}

// TestPageGitManagedEditKeepsWhatGitHas edits a git-managed add-on whose
// replicas a colleague pushed to git before the syncer applied them: the
// page's commit changes the greeting alone, so git keeps the pushed
// replicas, and the comment and order of its values. A change of replicas
// made from a value git no longer has is refused with 409, and nothing is
// committed.
func TestPageGitManagedEditKeepsWhatGitHas(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	git := gitserver.Start(t)
	repoURL := git.Create(t, "ops")
	def := func(replicas string) string {
		return "name: form\nhelm:\n  url: " + chartServer.URL + "/form-1.0.0.tgz\nvalues:\n  # how many pods\n  replicas: " + replicas + "\n  greeting: hi\n"
	}
	clone := gitserver.Clone(t, repoURL)
	clone.Write("addons/form.yaml", def("2")).CommitAndPush("form")
	if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: repoURL}}); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "form", Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"}, Values: jsonValues(`{"replicas":2,"greeting":"hi"}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	// A colleague pushes replicas: 3; the syncer has not applied it yet.
	clone.Write("addons/form.yaml", def("3")).CommitAndPush("three replicas")

	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))
	edit := "/addons/" + ns + "/form/edit"
	code, page := sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d %s", code, page)
	}
	form := url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")}, "mode": {hidden(t, page, "mode")},
		"v.greeting": {"from the page"}, "v.replicas": {"2"}, "yaml": {""}}
	if code, page = sess.send(t, http.MethodPost, edit, form); code != http.StatusSeeOther {
		t.Fatalf("saving the greeting: %d\n%s", code, page)
	}
	clone.Pull()
	want := "values:\n  # how many pods\n  replicas: 3\n  greeting: from the page\n"
	if got := clone.Git("show", "HEAD:addons/form.yaml"); !strings.HasSuffix(got, want) {
		t.Fatalf("the committed definition:\n%s\nwant its values:\n%s", got, want)
	}

	// Again: git moves to 5, and the form, filled from the cluster, says 3.
	clone.Write("addons/form.yaml", strings.Replace(clone.Git("show", "HEAD:addons/form.yaml"), "replicas: 3", "replicas: 5", 1)).CommitAndPush("five replicas")
	head := clone.Git("rev-parse", "HEAD")
	code, page = sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK || !strings.Contains(page, `value="3"`) {
		t.Fatalf("the edit form, filled from the cluster: %d\n%s", code, page)
	}
	form = url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")}, "mode": {hidden(t, page, "mode")},
		"v.greeting": {"from the page"}, "v.replicas": {"4"}, "yaml": {""}}
	if code, page = sess.send(t, http.MethodPost, edit, form); code != http.StatusConflict || !strings.Contains(page, "values.replicas") {
		t.Fatalf("a change of replicas from 3, which git has as 5: %d; want 409 naming values.replicas\n%s", code, page)
	}
	clone.Pull()
	if now := clone.Git("rev-parse", "HEAD"); now != head {
		t.Errorf("a refused change was committed: HEAD %s, was %s", now, head)
	}
}

// TestSignOutLeavesThePage signs out through the page's form: the answer
// sends the browser to the sign-in page and clears the cookie, and the
// session reads nothing any more.
func TestSignOutLeavesThePage(t *testing.T) {
	ns := namespace(t)
	sess := signInAt(t, api.URL, user(t, ns, "viewer", addonRule("get", "list")))
	resp := sess.do(t, http.MethodPost, "/signout", url.Values{})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("signing out: %d to %q; want 303 to /signin", resp.StatusCode, resp.Header.Get("Location"))
	}
	cleared := false
	for _, c := range resp.Cookies() {
		cleared = cleared || (c.Name == sessionCookieName && c.Value == "" && c.MaxAge < 0)
	}
	if !cleared {
		t.Errorf("signing out did not clear the session cookie: %v", resp.Header.Values("Set-Cookie"))
	}
	if resp := sess.do(t, http.MethodGet, "/addons", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("the list after signing out: %d to %q; want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestPageServesOnlyItsAssets asks the page for its assets, its templates,
// a folder and a path it does not have: only the assets are served, and
// every answer, errors too, carries the security headers.
func TestPageServesOnlyItsAssets(t *testing.T) {
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := (&http.Client{Transport: apiClient().Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}).Get(api.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		path  string
		code  int
		ctype string
	}{
		{"/static/capstan.css", http.StatusOK, "text/css"},
		{"/static/live.js", http.StatusOK, "text/javascript"},
		{"/static/edit.html", http.StatusNotFound, ""},
		{"/static/layout.html", http.StatusNotFound, ""},
		{"/static/", http.StatusNotFound, ""},
		{"/static/web/", http.StatusNotFound, ""},
		{"/no-such-page", http.StatusNotFound, ""},
		{"/signin", http.StatusOK, "text/html"},
		{"/addons", http.StatusSeeOther, ""},
	} {
		resp := get(c.path)
		if resp.StatusCode != c.code || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) {
			t.Errorf("GET %s: %d %s; want %d %s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.code, c.ctype)
		}
		h := resp.Header
		if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("X-Frame-Options") != "DENY" || !strings.HasPrefix(h.Get("Strict-Transport-Security"), "max-age=") {
			t.Errorf("GET %s lacks the security headers: %v", c.path, h)
		}
	}
}

// TestEditFormFromAnotherSiteFetchesNothing posts the edit form without
// the session's CSRF token: it is refused before the chart is fetched.
func TestEditFormFromAnotherSiteFetchesNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	// NOTE: a link of its own, so no fetch cache holds the chart.
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz?for=" + ns}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))
	sess.csrf = "not-the-session's"
	before := chartRequests.Load()
	if code, page := sess.send(t, http.MethodPost, "/addons/"+ns+"/forged/edit", url.Values{"uid": {string(a.UID)}}); code != http.StatusForbidden {
		t.Errorf("an edit without the CSRF token: %d; want 403\n%s", code, page)
	}
	if n := chartRequests.Load() - before; n != 0 {
		t.Errorf("an edit without the CSRF token fetched the chart (%d requests)", n)
	}
}

// TestChartFormsFromAnotherSiteFetchNothing opens the chart form and Edit
// values by links of another site, a sibling subdomain too, whose requests
// the SameSite=Strict cookie goes with, and asks for them with HEAD, as a
// script of such a site may (the routes serve HEAD as GET): refused with
// 403 before the chart is fetched. The same links opened from this
// server's page fetch it.
func TestChartFormsFromAnotherSiteFetchNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	// NOTE: links of their own, so no fetch cache holds the chart.
	chart := chartServer.URL + "/form-1.0.0.tgz?from=" + ns
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linked"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chart + "&edit"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch")))
	get := func(method, path, site string) int {
		t.Helper()
		req, err := http.NewRequest(method, api.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: sess.cookie})
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := apiClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/new?" + url.Values{"chart": {chart}, "namespace": {ns}}.Encode(), "/addons/" + ns + "/linked/edit"} {
		// NOTE: every refusal first: once fetched, the chart is cached,
		// and a fetch that should not be would make no request.
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			for _, site := range []string{"same-site", "cross-site"} {
				before := chartRequests.Load()
				if code := get(method, path, site); code != http.StatusForbidden {
					t.Errorf("%s %s from a %s page: %d; want 403", method, path, site, code)
				}
				if n := chartRequests.Load() - before; n != 0 {
					t.Errorf("%s %s from a %s page fetched the chart (%d requests)", method, path, site, n)
				}
			}
		}
		before := chartRequests.Load()
		if code := get(http.MethodGet, path, "same-origin"); code != http.StatusOK {
			t.Errorf("GET %s from this server's page: %d; want 200", path, code)
		}
		if n := chartRequests.Load() - before; n == 0 {
			t.Errorf("GET %s from this server's page fetched no chart", path)
		}
	}
}
