package gitops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/notify"
)

// TestRepositoryTransitionsAreNotified: a repository whose files are
// skipped as invalid is a warning to the receivers, one synced clean
// again is news, and one that cannot be read is a failure, each once, with
// the commit and the repository's address without its credentials; a
// PagerDuty receiver opens an incident for each warning, resolves it on
// the clean sync, and resolves the last when the failing repository is
// deleted.
func TestRepositoryTransitionsAreNotified(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-notify")
	var mu sync.Mutex
	var got []notify.Event
	var pages []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e notify.Event
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/pager" {
			var m map[string]any
			if json.Unmarshal(body, &m) == nil && strings.Contains(fmt.Sprint(m["dedup_key"]), ":"+ns+":") {
				mu.Lock()
				pages = append(pages, m)
				mu.Unlock()
			}
		} else if json.Unmarshal(body, &e) == nil && e.Namespace == ns {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	u, _ := url.Parse(hook.URL + "/repos")
	env.mu.Lock()
	pager, err := notify.ReceiverFromSecret("pager", map[string][]byte{"url": []byte(hook.URL + "/pager"), "format": []byte("pagerduty"), "token": []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	env.receivers = []notify.Receiver{{Name: "test", URL: u, Format: notify.FormatJSON, MinSeverity: notify.SeverityInfo}, pager}
	env.mu.Unlock()
	t.Cleanup(func() { env.mu.Lock(); env.receivers = nil; env.mu.Unlock() })
	seen := func(what, reason string, severity notify.Severity) notify.Event {
		t.Helper()
		var found notify.Event
		eventually(t, 20*time.Second, what, func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range got {
				if e.Kind == "AddonRepository" && e.Name == "gitops" && e.Reason == reason && e.Severity == severity {
					found = e
					return nil
				}
			}
			return fmt.Errorf("posted so far: %+v", got)
		})
		return found
	}

	srv := gitserver.Start(t)
	repoURL := srv.Create(t, "gitops")
	w := gitserver.Clone(t, repoURL)
	c1 := w.Write("addons/ok.yaml", "name: ok\nhelm: {repo: https://x, chart: c}\n").
		Write("addons/broken.yaml", "name: broken\nhelm: {repo: https://x, chart: c}\ncolour: red\n").
		CommitAndPush("one good, one broken")
	createRepo(t, ns, "gitops", repoURL)
	waitSynced(t, ns, "gitops", c1)
	e := seen("the invalid files", "InvalidFiles", notify.SeverityWarning)
	if e.Phase != "Synced" || e.Version != gitops.ShortCommit(c1) || e.Source != repoURL || !strings.Contains(e.Message, "1 invalid files") {
		t.Fatalf("the invalid files' event: %+v", e)
	}

	c2 := w.Remove("addons/broken.yaml").CommitAndPush("fixed")
	trigger(t, ns, "gitops")
	waitSynced(t, ns, "gitops", c2)
	if e := seen("synced clean", "Synced", notify.SeverityInfo); e.Version != gitops.ShortCommit(c2) {
		t.Fatalf("the clean sync's event: %+v", e)
	}

	// Moved to an address with a token in it that Go cannot even parse (a
	// bare %): refused before any request, and neither the post nor the
	// status shows it. (A password, user:password@, the API server
	// refuses before it is stored; a token as the user it takes.)
	repo := getRepo(t, ns, "gitops")
	repo.Spec.URL = strings.Replace(repoURL, "://", "://someone-pa55%word@", 1) + "-gone"
	if err := env.client.Update(ctx, repo); err != nil {
		t.Fatal(err)
	}
	e = seen("the unreadable repository", "RepositoryUnreadable", notify.SeverityWarning)
	for _, text := range []string{e.Source, e.Message} {
		if e.Phase != "Failed" || strings.Contains(text, "pa55") || strings.Contains(text, "someone") {
			t.Fatalf("the failure's event: %+v", e)
		}
	}
	// Nor does the status show the password to every reader.
	if c := meta.FindStatusCondition(getRepo(t, ns, "gitops").Status.Conditions, "Ready"); c == nil || strings.Contains(c.Message, "pa55") || strings.Contains(c.Message, "someone") {
		t.Fatalf("the repository's Ready condition: %+v", c)
	}

	// Back where it was: news again. With its post come all those before
	// it (one worker, in order), so each transition can be counted.
	repo = getRepo(t, ns, "gitops")
	repo.Spec.URL = repoURL
	if err := env.client.Update(ctx, repo); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the repository back", func() error {
		mu.Lock()
		defer mu.Unlock()
		if n := len(got); n == 0 || got[n-1].Reason != "Synced" || got[n-1].Phase != "Synced" || n < 4 {
			return fmt.Errorf("posted so far: %+v", got)
		}
		return nil
	})
	mu.Lock()
	count := map[string]int{}
	for _, e := range got {
		count[e.Reason]++
	}
	if count["InvalidFiles"] != 1 || count["Synced"] != 2 || count["RepositoryUnreadable"] != 1 || len(got) != 4 {
		t.Fatalf("transitions posted: %v", count)
	}
	// Each says how the one before it stood.
	for i, want := range []notify.Severity{"", notify.SeverityWarning, notify.SeverityInfo, notify.SeverityWarning} {
		if got[i].PreviousSeverity != want {
			t.Fatalf("transition %d (%s): previousSeverity %q, want %q", i, got[i].Reason, got[i].PreviousSeverity, want)
		}
	}
	// PagerDuty: an incident for the invalid files, resolved by the clean
	// sync, and one for the failure, resolved when it is back.
	// NOTE: the worker posts to the receivers in turn, PagerDuty after the
	// JSON receiver waited for above: its post may still be on its way.
	actions := func() []string {
		var out []string
		for _, p := range pages {
			out = append(out, fmt.Sprint(p["event_action"]))
		}
		return out
	}
	mu.Unlock()
	eventually(t, 10*time.Second, "PagerDuty's resolve of the failure", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(pages) < 4 {
			return fmt.Errorf("PagerDuty got %v", actions())
		}
		return nil
	})
	mu.Lock()
	if a := actions(); strings.Join(a, ",") != "trigger,resolve,trigger,resolve" {
		t.Fatalf("PagerDuty got %v", a)
	}
	mu.Unlock()

	// It fails again and is deleted while it fails: the incident is
	// resolved, since nothing is left to fix.
	repo = getRepo(t, ns, "gitops")
	repo.Spec.URL = repoURL + "-gone"
	if err := env.client.Update(ctx, repo); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the second failure's incident", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(pages) < 5 {
			return fmt.Errorf("PagerDuty got %v", actions())
		}
		return nil
	})
	if err := env.client.Delete(ctx, getRepo(t, ns, "gitops")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the deleted repository's incident resolved", func() error {
		mu.Lock()
		defer mu.Unlock()
		if a := actions(); strings.Join(a, ",") != "trigger,resolve,trigger,resolve,trigger,resolve" {
			return fmt.Errorf("PagerDuty got %v", a)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, e := range got {
		if e.Phase == notify.PhaseDeleted {
			t.Fatalf("a receiver of every transition heard of the deletion: %+v", e)
		}
	}
}
