package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/server"
)

// serve serves srv over TLS on loopback until the test ends, with the
// certificate api has, which apiClient trusts.
func serve(t *testing.T, srv *server.Server) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL
}

// recordingReviewer is the controller's client for TokenReviews and
// SubjectAccessReviews, which keeps the spec of every SubjectAccessReview
// it sends to the API server.
func recordingReviewer(t *testing.T) (kubernetes.Interface, func() []authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	var (
		mu   sync.Mutex
		sent []authorizationv1.SubjectAccessReviewSpec
	)
	cfg := rest.CopyConfig(cluster.ConfigFor(install.ControllerUser))
	cfg.ContentType = "application/json"
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/subjectaccessreviews") && req.Body != nil {
				data, err := io.ReadAll(req.Body)
				if err != nil {
					return nil, err
				}
				req.Body = io.NopCloser(bytes.NewReader(data))
				var review authorizationv1.SubjectAccessReview
				if err := json.Unmarshal(data, &review); err != nil {
					t.Errorf("a SubjectAccessReview that is no JSON: %v", err)
				}
				mu.Lock()
				sent = append(sent, review.Spec)
				mu.Unlock()
			}
			return next.RoundTrip(req)
		})
	})
	reviewer, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return reviewer, func() []authorizationv1.SubjectAccessReviewSpec {
		mu.Lock()
		defer mu.Unlock()
		return append([]authorizationv1.SubjectAccessReviewSpec(nil), sent...)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// gitManagedLonghorn is the Addon longhorn of ns, managed by the
// AddonRepository ops on a loopback git server; it returns the
// repository's URL.
func gitManagedLonghorn(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	git := gitserver.Start(t)
	url := git.Create(t, "ops")
	def, err := os.ReadFile(filepath.Join("..", "gitops", "testdata", "longhorn.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gitserver.Clone(t, url).Write("addons/longhorn.yaml", string(def)).CommitAndPush("longhorn")
	if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: url}}); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "longhorn", Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: "https://charts.longhorn.io/", Name: "longhorn", Version: "v1.10.2"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	return url
}

// TestGitUninstallIsReviewedOnce removes a git-managed Addon with its
// software: one SubjectAccessReview covers both the uninstall mark and the
// commit, so a removal costs the user one of their reviews, not two.
func TestGitUninstallIsReviewedOnce(t *testing.T) {
	ns := namespace(t)
	url := gitManagedLonghorn(t, ns)
	gitserver.Clone(t, url).Write("addons/other.yaml", "name: other\nhelm:\n  repo: https://charts.invalid/\n  chart: other\n  version: 1.0.0\n").CommitAndPush("other")
	remover := user(t, ns, "remover", addonRule("get", "list", "update", "patch", "delete"))
	reviewer, reviews := recordingReviewer(t)
	srv := newServer()
	srv.Reviewer = reviewer
	base := serve(t, srv)

	code, body := callAt(t, base, remover, http.MethodDelete, "/api/v1/namespaces/"+ns+"/addons/longhorn?uninstall=true", nil)
	expect(t, "a remover uninstalls a git-managed add-on", code, body, http.StatusAccepted)
	if _, err := os.Stat(filepath.Join(gitserver.Clone(t, url).Dir, "addons/longhorn.yaml")); !os.IsNotExist(err) {
		t.Fatalf("the definition is still in git after the removal was accepted: %v", err)
	}
	if sent := reviews(); len(sent) != 1 {
		t.Errorf("%d SubjectAccessReviews for one removal with uninstall; want 1: %+v", len(sent), sent)
	}
}

// TestCommitReviewNamesTheWholeUser suspends a git-managed Addon: the
// SubjectAccessReview made before the commit names the user as the
// token's review does, with the UID and the extra fields that a webhook
// authorizer or a scoped token decides on.
func TestCommitReviewNamesTheWholeUser(t *testing.T) {
	ns := namespace(t)
	gitManagedLonghorn(t, ns)
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	reviewer, reviews := recordingReviewer(t)
	srv := newServer()
	srv.Reviewer = reviewer
	base := serve(t, srv)

	code, body := callAt(t, base, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/longhorn/suspend", nil)
	expect(t, "an editor suspends a git-managed add-on", code, body, http.StatusAccepted)
	tr, err := kube.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: editor}}, metav1.CreateOptions{})
	if err != nil || !tr.Status.Authenticated {
		t.Fatalf("reviewing the editor's token: %v, %+v", err, tr.Status)
	}
	want := tr.Status.User
	if want.UID == "" || len(want.Extra) == 0 {
		t.Fatalf("a ServiceAccount token's review has UID %q and extra %v; the test needs both", want.UID, want.Extra)
	}
	sent := reviews()
	if len(sent) != 1 {
		t.Fatalf("%d SubjectAccessReviews for one commit; want 1", len(sent))
	}
	got := sent[0]
	extra := map[string]authenticationv1.ExtraValue{}
	for k, v := range got.Extra {
		extra[k] = authenticationv1.ExtraValue(v)
	}
	if got.User != want.Username || got.UID != want.UID || !reflect.DeepEqual(got.Groups, want.Groups) || !reflect.DeepEqual(extra, want.Extra) {
		t.Errorf("the review named user %q, UID %q, groups %v, extra %v; the token is %q, UID %q, groups %v, extra %v",
			got.User, got.UID, got.Groups, got.Extra, want.Username, want.UID, want.Groups, want.Extra)
	}
}

// clock is a server's clock that a test moves on: a session's next
// request past the token cache's minute reviews its token again, without
// the test waiting that minute.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// serveWithClock serves a server of its own, with reviewer (the tests'
// own when nil) and a clock the test moves on.
func serveWithClock(t *testing.T, reviewer kubernetes.Interface) (string, *clock) {
	t.Helper()
	c := &clock{now: time.Now()}
	srv := newServer()
	srv.Now = c.Now
	if reviewer != nil {
		srv.Reviewer = reviewer
	}
	return serve(t, srv), c
}

// pageSession is a signed-in session: its cookie and CSRF token.
type pageSession struct {
	base, cookie, csrf string
}

// signInAt signs in to the server at base with token.
func signInAt(t *testing.T, base, token string) pageSession {
	t.Helper()
	data, _ := json.Marshal(map[string]string{"token": token})
	resp, err := apiClient().Post(base+"/api/v1/session", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct{ CSRFToken string }
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("signing in: %d, %v", resp.StatusCode, err)
	}
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookieName {
			return pageSession{base: base, cookie: c.Value, csrf: answer.CSRFToken}
		}
	}
	t.Fatal("a sign-in set no session cookie")
	return pageSession{}
}

// do sends one request with the session, its CSRF token in a header and
// form in the body when given, and follows no redirect.
func (s pageSession) do(t *testing.T, method, path string, form url.Values) *http.Response {
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
	req.Header.Set("X-CSRF-Token", s.csrf)
	resp, err := (&http.Client{Transport: apiClient().Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// commits counts the commits of the git repository at url.
func commits(t *testing.T, url string) int {
	t.Helper()
	return strings.Count(gitserver.Clone(t, url).Git("log", "--format=%H"), "\n")
}

// TestSessionEndsWithItsToken signs in with a ServiceAccount's token and
// deletes the ServiceAccount, whose RoleBinding still names it: once the
// token cache's minute has passed, the session's next request is refused,
// through the API and the page alike, and a catalog commit to a trusted
// namespace, which Capstan makes with the repository's credentials, is
// not made.
func TestSessionEndsWithItsToken(t *testing.T) {
	ctx := context.Background()
	git := gitserver.Start(t)
	repoURL := git.Create(t, "stale")
	gitserver.Clone(t, repoURL).Write("README.md", "platform\n").CommitAndPush("start")
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-stale"},
		Spec: capstanv1.AddonRepositorySpec{URL: repoURL}}
	if err := admin.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	const name = "session-stale"
	t.Cleanup(func() {
		_ = admin.Delete(ctx, repo)
		_ = kube.RbacV1().RoleBindings(install.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = kube.RbacV1().Roles(install.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
	token := user(t, install.Namespace, name, addonRule("get", "list", "create", "update", "patch"))
	base, clk := serveWithClock(t, nil)
	viaAPI, viaPage := signInAt(t, base, token), signInAt(t, base, token)
	list := "/api/v1/namespaces/" + install.Namespace + "/addons"
	if resp := viaAPI.do(t, http.MethodGet, list, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a list with a fresh session: %d", resp.StatusCode)
	}

	if err := kube.CoreV1().ServiceAccounts(install.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// NOTE: the API server may accept the token for a few seconds more,
	// from its own cache: each try moves the server's clock past the
	// token cache's minute, so that each asks the API server again. A
	// list is made with the token itself; the commit below is not.
	deadline := time.Now().Add(30 * time.Second)
	for {
		clk.advance(time.Minute + time.Second)
		resp := viaAPI.do(t, http.MethodGet, list, nil)
		if resp.StatusCode == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a session whose ServiceAccount was deleted still lists Addons: %d", resp.StatusCode)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if resp := viaAPI.do(t, http.MethodGet, list, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session that ended lists Addons again: %d", resp.StatusCode)
	}

	before := commits(t, repoURL)
	resp := viaPage.do(t, http.MethodPost, "/catalog/longhorn", url.Values{"namespace": {install.Namespace}, "name": {name}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("a catalog form sent with the ended session: %d to %q; want a redirect to /signin", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := commits(t, repoURL) - before; n != 0 {
		t.Errorf("a session whose token is no longer valid committed %d add-ons", n)
	}
}

// groupsReviewer is the controller's client for TokenReviews and
// SubjectAccessReviews, which adds the groups that groups returns to every
// TokenReview the API server accepts. A ServiceAccount's groups never
// change; it stands in for an authenticator (OIDC, a webhook) whose
// groups do, when a person leaves a team.
func groupsReviewer(t *testing.T, groups func() []string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.ConfigFor(install.ControllerUser))
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if err != nil || !strings.HasSuffix(req.URL.Path, "/tokenreviews") || resp.StatusCode != http.StatusCreated {
				return resp, err
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			var review authenticationv1.TokenReview
			if err := json.Unmarshal(data, &review); err != nil {
				return nil, err
			}
			if review.Status.Authenticated {
				review.Status.User.Groups = append(review.Status.User.Groups, groups()...)
			}
			if data, err = json.Marshal(&review); err != nil {
				return nil, err
			}
			resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
			resp.Header.Del("Content-Length")
			return resp, nil
		})
	})
	reviewer, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return reviewer
}

// TestSessionCommitsWithTheGroupsOfNow signs in as a member of a group
// that may update an Addon that git manages, which the person may only
// read themselves: a suspend through the session is a commit. Once the
// person has left the group, and the token cache's minute has passed, the
// access review sees the groups of now, and refuses a resume.
func TestSessionCommitsWithTheGroupsOfNow(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	repoURL := gitManagedLonghorn(t, ns)
	const group = "capstan-test:addon-admins"
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "admins"},
		Rules: []rbacv1.PolicyRule{addonRule("get", "list", "update", "patch")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "admins"},
		Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: group}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		member = true
	)
	reviewer := groupsReviewer(t, func() []string {
		mu.Lock()
		defer mu.Unlock()
		if member {
			return []string{group}
		}
		return nil
	})
	token := user(t, ns, "person", addonRule("get", "list"))
	base, clk := serveWithClock(t, reviewer)
	sess := signInAt(t, base, token)
	suspend := "/api/v1/namespaces/" + ns + "/addons/longhorn/suspend"
	before := commits(t, repoURL)
	if resp := sess.do(t, http.MethodPost, suspend, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a member of %s suspends a git-managed add-on: %d; want 202", group, resp.StatusCode)
	}
	if n := commits(t, repoURL) - before; n != 1 {
		t.Fatalf("a member's suspend made %d commits; want 1", n)
	}

	mu.Lock()
	member = false
	mu.Unlock()
	clk.advance(time.Minute + time.Second)
	if resp := sess.do(t, http.MethodPost, strings.Replace(suspend, "/suspend", "/resume", 1), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("someone who left %s resumes a git-managed add-on: %d; want 403", group, resp.StatusCode)
	}
	if n := commits(t, repoURL) - before; n != 1 {
		t.Errorf("someone who left the group made %d more commits", n-1)
	}
}

// TestSignInsOfOneUserEndNoOthersSession signs one user in 25 times, and
// another once: the first user keeps their 20 latest sessions, and the
// other's stays. One valid token signed in without end would otherwise
// fill the server's sessions, and each sign-in after that would end
// someone else's.
func TestSignInsOfOneUserEndNoOthersSession(t *testing.T) {
	ns := namespace(t)
	many := user(t, ns, "many", addonRule("list"))
	other := signInAt(t, api.URL, user(t, ns, "other", addonRule("list")))
	var sessions []pageSession
	for range 25 {
		sessions = append(sessions, signInAt(t, api.URL, many))
	}
	list := "/api/v1/namespaces/" + ns + "/addons"
	for i, sess := range sessions {
		want := http.StatusOK
		if i < 5 {
			want = http.StatusUnauthorized
		}
		if resp := sess.do(t, http.MethodGet, list, nil); resp.StatusCode != want {
			t.Errorf("sign-in %d of 25 by one user: a list is %d; want %d", i+1, resp.StatusCode, want)
		}
	}
	if resp := other.do(t, http.MethodGet, list, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("another user's session after 25 sign-ins of one user: a list is %d; want 200", resp.StatusCode)
	}
}

// TestRefusedTokenIsRemembered sends one token that the API server does
// not accept, three times as a bearer token and once to sign in: each is
// 401, and only the first costs a TokenReview.
func TestRefusedTokenIsRemembered(t *testing.T) {
	reviews := func() int { return tokenReviews(t) }
	token := "not-a-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	before := reviews()
	for range 3 {
		code, body := call(t, token, http.MethodGet, "/api/v1/addons", nil)
		expect(t, "a list with a refused token", code, body, http.StatusUnauthorized)
	}
	code, body := call(t, "", http.MethodPost, "/api/v1/session", map[string]string{"token": token})
	expect(t, "a sign-in with a refused token", code, body, http.StatusUnauthorized)
	if n := reviews() - before; n != 1 {
		t.Errorf("one refused token sent four times cost %d TokenReviews; want 1", n)
	}
}
