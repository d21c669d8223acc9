package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
)

func TestRepositoryKey(t *testing.T) {
	for raw, want := range map[string]string{
		"https://github.com/Org/Repo":               "github.com/org/repo",
		"https://github.com/org/repo.git":           "github.com/org/repo",
		"https://user@github.com/org/repo/":         "github.com/org/repo",
		"git@github.com:org/repo.git":               "github.com/org/repo",
		"ssh://git@github.com:22/org/repo.git":      "github.com/org/repo",
		"http://127.0.0.1:8080/org/repo.git":        "127.0.0.1/org/repo",
		"https://github.com/org/repo/tree/main":     "github.com/org/repo/tree/main",
		"https://github.com/org":                    "",
		"https://ghe.example:443/o/r":               "ghe.example/o/r",
		"github.com:org/repo":                       "github.com/org/repo",
		"file:///srv/git/repo":                      "",
		"":                                          "",
		"https://github.com/org/.git":               "",
		"https://gitlab.example/group/sub/repo.git": "gitlab.example/group/sub/repo",
	} {
		if got := repositoryKey(raw); got != want {
			t.Errorf("repositoryKey(%q) = %q; want %q", raw, got, want)
		}
	}
}

func TestGitHubReceiver(t *testing.T) {
	for raw, want := range map[string]string{
		"https://github.com/org/repo":        "https://api.github.com/repos/org/repo/statuses/",
		"https://github.com/org/repo.git":    "https://api.github.com/repos/org/repo/statuses/",
		"https://ghe.example:8443/team/app/": "https://ghe.example:8443/api/v3/repos/team/app/statuses/",
		"http://127.0.0.1:9/org/repo":        "http://127.0.0.1:9/api/v3/repos/org/repo/statuses/",
		"https://octo.ghe.com/org/repo":      "https://api.octo.ghe.com/repos/org/repo/statuses/",
	} {
		r, err := ReceiverFromSecret("gh", map[string][]byte{"url": []byte(raw), "format": []byte("github"), "token": []byte("t")})
		if err != nil || r.Format != FormatGitHub || r.statuses.String() != want {
			t.Errorf("%s: %v, %v; want %s", raw, r.statuses, err, want)
		}
	}
	for _, raw := range []string{"https://github.com/org", "https://github.com/org/repo/tree/main", "https://github.com/org/repo?x=1"} {
		_, err := ReceiverFromSecret("gh", map[string][]byte{"url": []byte(raw), "format": []byte("github")})
		if err == nil || !strings.Contains(err.Error(), "with format github, key url is the repository's address") {
			t.Errorf("%s: %v", raw, err)
		}
	}
	// GitHub and GitLab refuse a status posted without a token: a
	// receiver without one is refused when its Secret is read, not paused
	// after its first posts.
	for format, says := range map[string]string{
		"github": "format github needs the key token: set it to a fine-grained token with the permission Commit statuses: write",
		"gitlab": "format gitlab needs the key token: set it to a project access token with the api scope",
	} {
		_, err := ReceiverFromSecret("s", map[string][]byte{"url": []byte("https://git.example/org/repo"), "format": []byte(format), "token": []byte(" \n")})
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s without a token: %v; want %q", format, err, says)
		}
	}
}

// TestGitHubStatus: a receiver of format github, on loopback as a GitHub
// Enterprise server would be, is posted each add-on state of a commit of
// its repository as that commit's status, with the token and GitHub's
// media type; it takes no event of another repository, of a chart, of a
// repository of definitions, of a phase that says nothing of the commit,
// or of a commit that is not whole, and only it takes a new commit in the
// same phase.
func TestGitHubStatus(t *testing.T) {
	srv := newStatusAPI(t)
	r, err := ReceiverFromSecret("gh", map[string][]byte{"url": []byte(srv.URL + "/org/repo"), "format": []byte("github"), "token": []byte("ghp_t0ken")})
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.Repeat("0123456789abcdef", 3)[:40]
	e := Event{Kind: "Addon", Namespace: "apps", Name: "web", Phase: "Failed", Reason: "ApplyFailed", Severity: SeverityWarning,
		Message:    "the pre-upgrade hook Job apps/migrate failed: " + strings.Repeat("BackoffLimitExceeded ", 20),
		Repository: srv.URL + "/org/repo.git", Commit: commit}
	if !r.Wants(e) {
		t.Fatal("the receiver does not want a failure of a commit of its repository")
	}
	n := &Notifier{Client: srv.Client(), Attempts: 1}
	if err := n.Deliver(context.Background(), r, e); err != nil {
		t.Fatal(err)
	}
	got, bodies := srv.posted()
	if len(got) != 1 {
		t.Fatalf("%d requests; want one", len(got))
	}
	req, body := got[0], bodies[0]
	if req.Method != http.MethodPost || req.URL.Path != "/api/v3/repos/org/repo/statuses/"+commit {
		t.Errorf("%s %s; want POST to the commit's statuses", req.Method, req.URL.Path)
	}
	if req.Header.Get("Authorization") != "Bearer ghp_t0ken" || req.Header.Get("Accept") != "application/vnd.github+json" {
		t.Errorf("headers %v", req.Header)
	}
	if body["state"] != "failure" || body["context"] != "capstan/apps/web" || !strings.HasPrefix(body["description"], "Failed (ApplyFailed): the pre-upgrade hook") ||
		utf8.RuneCountInString(body["description"]) > 140 {
		t.Errorf("body %v", body)
	}

	for name, other := range map[string]Event{
		"another repository":          {Kind: "Addon", Phase: "Synced", Repository: "https://github.com/org/other.git", Commit: commit},
		"a chart":                     {Kind: "Addon", Phase: "Synced", Source: "https://charts.example/web", Version: "1.0.0"},
		"a short commit":              {Kind: "Addon", Phase: "Synced", Repository: e.Repository, Commit: commit[:12]},
		"a paused add-on":             {Kind: "Addon", Phase: "Paused", Repository: e.Repository, Commit: commit},
		"a repository of definitions": {Kind: "AddonRepository", Phase: "Synced", Repository: e.Repository, Commit: commit},
	} {
		if r.Wants(other) {
			t.Errorf("the receiver wants %s", name)
		}
	}
	// Two clusters that deploy one commit set a status each.
	r.Cluster = "prod-eu"
	b, _ := r.Body(e)
	var named map[string]string
	if err := json.Unmarshal(b, &named); err != nil || named["context"] != "capstan/prod-eu/apps/web" {
		t.Errorf("the context with a cluster: %s", b)
	}
	r.Cluster = ""
	moved := Event{Kind: "Addon", Phase: "Synced", Repository: e.Repository, Commit: commit, SameState: true}
	if !r.Wants(moved) || (Receiver{Format: FormatJSON}).Wants(moved) || (Receiver{Format: FormatSlack}).Wants(moved) {
		t.Error("a new commit in the same phase goes to commit statuses, and only to them")
	}
	for phase, want := range map[string]string{"Synced": "success", "Degraded": "failure", "Blocked": "failure", "Progressing": "pending",
		"OutOfSync": "pending", "Deleting": "", "Suspended": ""} {
		if got := githubState(phase); got != want {
			t.Errorf("githubState(%s) = %q; want %q", phase, got, want)
		}
	}
}

// TestGitHubRateLimitIsRetried: GitHub answers a rate limit with 403 and
// X-RateLimit-Remaining: 0, which is tried again; a plain 403, a token
// that may not post, is not.
func TestGitHubRateLimitIsRetried(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch {
		case strings.HasPrefix(req.URL.Path, "/api/v3/repos/org/limited/") && n == 1:
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.WriteHeader(http.StatusForbidden)
		case strings.HasPrefix(req.URL.Path, "/api/v3/repos/org/denied/"):
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	n := &Notifier{Client: srv.Client(), Attempts: 3, Backoff: time.Millisecond}
	commit := strings.Repeat("a", 40)
	for repo, wantCalls := range map[string]int{"limited": 2, "denied": 1} {
		mu.Lock()
		calls = 0
		mu.Unlock()
		r, err := ReceiverFromSecret("gh", map[string][]byte{"url": []byte(srv.URL + "/org/" + repo), "format": []byte("github"), "token": []byte("t")})
		if err != nil {
			t.Fatal(err)
		}
		err = n.Deliver(context.Background(), r, Event{Kind: "Addon", Phase: "Synced", Repository: srv.URL + "/org/" + repo, Commit: commit})
		if (repo == "limited") != (err == nil) || calls != wantCalls {
			t.Errorf("%s: %v after %d posts; want %d", repo, err, calls, wantCalls)
		}
	}
}

// TestARateLimitIsWaitedOutUntilItsReset: GitHub's primary rate limit
// (403, X-RateLimit-Remaining: 0 and X-RateLimit-Reset, no Retry-After)
// and GitLab's (429 with RateLimit-Reset) are posted once, and the
// receiver is paused until the reset, as for a Retry-After that long,
// rather than posted again and again while every post is refused; a
// reset that has passed is waited for a second, and posted again.
func TestARateLimitIsWaitedOutUntilItsReset(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	var reset time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		calls[req.URL.Path]++
		n, at := calls[req.URL.Path], reset
		mu.Unlock()
		epoch := strconv.FormatInt(at.Unix(), 10)
		switch {
		case strings.HasPrefix(req.URL.Path, "/api/v3/") && n == 1:
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", epoch)
			w.WriteHeader(http.StatusForbidden)
		case strings.HasPrefix(req.URL.Path, "/api/v4/") && n == 1:
			w.Header().Set("RateLimit-Remaining", "0")
			w.Header().Set("RateLimit-Reset", epoch)
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	commit := strings.Repeat("a", 40)
	for _, c := range []struct{ format, repo string }{{FormatGitHub, "org/gh"}, {FormatGitLab, "group/gl"}} {
		r, err := ReceiverFromSecret(c.format, map[string][]byte{"url": []byte(srv.URL + "/" + c.repo), "format": []byte(c.format), "token": []byte("t")})
		if err != nil {
			t.Fatal(err)
		}
		e := Event{Kind: "Addon", Phase: "Synced", Repository: srv.URL + "/" + c.repo, Commit: commit}
		path := r.statuses.JoinPath(commit).Path
		posts := func() int {
			mu.Lock()
			defer mu.Unlock()
			return calls[path]
		}

		// A reset beyond a post's timeout: one post, then a pause until it.
		mu.Lock()
		reset = time.Now().Add(5 * time.Minute)
		mu.Unlock()
		n := &Notifier{Client: srv.Client(), Attempts: 4, Backoff: time.Millisecond, Timeout: 2 * time.Second, Log: logr.Discard(),
			ReceiversTTL: time.Hour, Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{r}, nil }}
		n.init()
		n.deliverAll(context.Background(), e)
		until := n.paused[r.Name]
		if posts() != 1 || until.Before(reset.Add(-2*time.Second)) || until.After(reset.Add(time.Second)) {
			t.Errorf("%s: %d posts, paused until %v; want 1, and paused until the reset at %v", c.format, posts(), until, reset)
		}
		// A reset just past: a second's wait, then the post again.
		mu.Lock()
		delete(calls, path)
		reset = time.Now().Add(-time.Minute)
		mu.Unlock()
		if err := n.Deliver(context.Background(), r, e); err != nil || posts() != 2 {
			t.Errorf("%s, a reset past: %v after %d posts; want the second to pass", c.format, err, posts())
		}
	}
	if d := rateLimitWait(http.StatusTooManyRequests, http.Header{"Ratelimit-Reset": {"30"}}, time.Now()); d != 30*time.Second {
		t.Errorf("a RateLimit-Reset of seconds left: %s; want 30s", d)
	}
}

// TestSameStateLeavesRoomForTransitions: a new commit in the same phase,
// and a warning's trigger sent again after a restart, join the queue only
// while it is less than half full; a close sent again always does.
func TestSameStateLeavesRoomForTransitions(t *testing.T) {
	n := &Notifier{}
	for range sameStateRoom {
		if !n.Notify(Event{Kind: "Addon"}) {
			t.Fatal("a transition was dropped from a queue with room")
		}
	}
	if n.Notify(Event{Kind: "Addon", SameState: true}) {
		t.Error("a new commit in the same phase joined a queue half full")
	}
	if n.Notify(Event{Kind: "Addon", Phase: "Failed", Severity: SeverityWarning, IncidentOnly: true}) {
		t.Error("a trigger sent again joined a queue half full")
	}
	if !n.Notify(Event{Kind: "Addon", Phase: "Synced", Severity: SeverityInfo, IncidentOnly: true, WarningSince: time.Now()}) {
		t.Error("a close sent again was dropped from a queue half full")
	}
	if !n.Notify(Event{Kind: "Addon"}) {
		t.Error("a transition was dropped from a queue half full")
	}
}

// TestGitLabStatus: a receiver of format gitlab names a project in its
// groups; a state of an add-on from a commit of it is posted to the
// project's statuses, its path one escaped segment, as GitLab's states.
func TestGitLabStatus(t *testing.T) {
	srv := newStatusAPI(t)
	r, err := ReceiverFromSecret("gl", map[string][]byte{"url": []byte(srv.URL + "/platform/team/addons.git"), "format": []byte("gitlab"), "token": []byte("glpat-x")})
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.Repeat("b", 40)
	e := Event{Kind: "Addon", Namespace: "apps", Name: "web", Phase: "Progressing", Reason: "WaitingForWorkloads",
		Repository: "ssh://git@127.0.0.1:22/platform/team/addons.git", Commit: commit}
	if !r.Wants(e) {
		t.Fatal("the receiver does not want a state of a commit of its project")
	}
	if err := (&Notifier{Client: srv.Client(), Attempts: 1}).Deliver(context.Background(), r, e); err != nil {
		t.Fatal(err)
	}
	got, bodies := srv.posted()
	if len(got) != 1 || got[0].RequestURI != "/api/v4/projects/platform%2Fteam%2Faddons/statuses/"+commit {
		t.Fatalf("posted %d times, first to %v; want once, to the project's statuses, its path escaped", len(got), got)
	}
	if b := bodies[0]; b["state"] != "running" || b["name"] != "capstan/apps/web" || b["description"] != "Progressing (WaitingForWorkloads)" {
		t.Errorf("body %v", b)
	}
	// GitLab refuses a state the status has already; that is delivered.
	repeat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"message":"Cannot transition status via :run from :running"}`))
	}))
	defer repeat.Close()
	rr, err := ReceiverFromSecret("gl", map[string][]byte{"url": []byte(repeat.URL + "/platform/team/addons"), "format": []byte("gitlab"), "token": []byte("t")})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Notifier{Client: repeat.Client(), Attempts: 1}).Deliver(context.Background(), rr, e); err != nil {
		t.Errorf("a state the status had already: %v", err)
	}
	if r.Wants(Event{Kind: "Addon", Phase: "Synced", Repository: srv.URL + "/platform/addons.git", Commit: commit}) {
		t.Error("the receiver wants a project of another group")
	}
	for phase, want := range map[string]string{"Synced": "success", "Failed": "failed", "Degraded": "failed", "Progressing": "running", "OutOfSync": "pending", "Paused": ""} {
		if got := gitlabState(phase); got != want {
			t.Errorf("gitlabState(%s) = %q; want %q", phase, got, want)
		}
	}
	for _, raw := range []string{"https://gitlab.com/group", "https://gitlab.com/group/project/-/tree/main"} {
		if _, err := ReceiverFromSecret("gl", map[string][]byte{"url": []byte(raw), "format": []byte("gitlab")}); err == nil ||
			!strings.Contains(err.Error(), "with format gitlab, key url is the project's address") {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// statusAPI is a loopback server that takes commit statuses as GitHub or
// GitLab does, answering 201, and records each request with its JSON body.
type statusAPI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	bodies   []map[string]string
}

func newStatusAPI(t *testing.T) *statusAPI {
	a := &statusAPI{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var m map[string]string
		_ = json.Unmarshal(b, &m)
		a.mu.Lock()
		a.requests, a.bodies = append(a.requests, req), append(a.bodies, m)
		a.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(a.Close)
	return a
}

// posted are the requests so far, and their bodies.
func (a *statusAPI) posted() ([]*http.Request, []map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests), slices.Clone(a.bodies)
}
