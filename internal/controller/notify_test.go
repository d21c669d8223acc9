package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/notify"
)

// notifySecret is the receiver Secret the suite's controller reads, with
// notifySecret + "-warnings" and notifySecret + "-broken"; a test that
// creates them gets every add-on's transitions while they exist.
const notifySecret = "capstan-notify"

// webhook records what is posted to it, by path; it answers 500 on the
// paths in failing, and 204 elsewhere.
type webhook struct {
	mu      sync.Mutex
	posts   map[string][]webhookPost
	failing map[string]bool
	srv     *httptest.Server
}

type webhookPost struct {
	header http.Header
	body   []byte
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{posts: map[string][]webhookPost{}, failing: map[string]bool{}}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.posts[r.URL.Path] = append(w.posts[r.URL.Path], webhookPost{header: r.Header.Clone(), body: body})
		failing := w.failing[r.URL.Path]
		w.mu.Unlock()
		if failing {
			rw.WriteHeader(http.StatusInternalServerError)
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// events are the JSON events posted to path about the add-on name.
func (w *webhook) events(t *testing.T, path, name string) ([]notify.Event, []webhookPost) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var events []notify.Event
	var posts []webhookPost
	for _, p := range w.posts[path] {
		var e notify.Event
		if err := json.Unmarshal(p.body, &e); err != nil {
			t.Fatalf("a post that is not an event: %s", p.body)
		}
		if e.Name == name {
			events, posts = append(events, e), append(posts, p)
		}
	}
	return events, posts
}

// fail makes the webhook answer 500 on path.
func (w *webhook) fail(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing[path] = true
}

// actions are the event_action of each PagerDuty event posted to path,
// and its dedup_key.
func (w *webhook) actions(t *testing.T, path string) (actions, keys []string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.posts[path] {
		var m map[string]any
		if err := json.Unmarshal(p.body, &m); err != nil {
			t.Fatalf("a PagerDuty event that is not JSON: %s", p.body)
		}
		actions, keys = append(actions, fmt.Sprint(m["event_action"])), append(keys, fmt.Sprint(m["dedup_key"]))
	}
	return actions, keys
}

// count is how many posts path got.
func (w *webhook) count(path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.posts[path])
}

// texts are the Slack texts posted to path that name the add-on.
func (w *webhook) texts(path, name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, p := range w.posts[path] {
		var m map[string]string
		if json.Unmarshal(p.body, &m) == nil && strings.Contains(m["text"], "/"+name+" ") {
			out = append(out, m["text"])
		}
	}
	return out
}

// TestTransitionsAreNotified: with receiver Secrets that point at a
// webhook on loopback, an add-on's install posts Synced, signed, with its
// source, version and revision; a failure posts Failed as a warning; a
// receiver that takes warnings only gets only that, as a Slack text; and a
// receiver that is gone is logged by its Secret's name, never its URL or
// token.
func TestTransitionsAreNotified(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := newWebhook(t)
	gone := newWebhook(t)
	gone.srv.Close()
	key := "the-test's-signing-key"
	for name, data := range map[string]map[string]string{
		notifySecret:                {"url": hook.srv.URL + "/all/T0/s3cretpath", "hmacKey": key},
		notifySecret + "-warnings":  {"url": hook.srv.URL + "/warn", "format": "slack", "severity": "warning"},
		notifySecret + "-broken":    {"url": gone.srv.URL + "/gone/T0/l0stpath?token=qu3ry", "token": "b3arer-token"},
		notifySecret + "-team":      {"url": hook.srv.URL + "/team", "namespaces": controllerNS + ",elsewhere", "selector": "team=" + ns},
		notifySecret + "-elsewhere": {"url": hook.srv.URL + "/elsewhere", "namespaces": "elsewhere"},
		notifySecret + "-other":     {"url": hook.srv.URL + "/other", "selector": "team=other"},
		notifySecret + "-pager":     {"url": hook.srv.URL + "/pager/v2/enqueue", "format": "pagerduty", "token": "r0uting-key", "selector": "team=" + ns},
	} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name}, StringData: data}
		if err := admin.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), sec) })
	}
	// NOTE: the controller reads the Secrets again at most every second.
	time.Sleep(1500 * time.Millisecond)

	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := newAddon(controllerNS, "notify-"+ns[len(ns)-5:], url, withTarget(ns))
	a.Labels = map[string]string{"team": ns}
	a = create(t, a)
	waitPhase(t, a, capstanv1.PhaseSynced)
	var synced notify.Event
	eventually(t, 30*time.Second, "the Synced notification", func() bool {
		events, posts := hook.events(t, "/all/T0/s3cretpath", a.Name)
		for i, e := range events {
			if e.Phase == "Synced" {
				synced = e
				h := posts[i].header
				if got, want := h.Get("X-Capstan-Signature"), notify.Sign([]byte(key), h.Get("X-Capstan-Timestamp"), posts[i].body); got != want {
					t.Fatalf("signature %q; want %q", got, want)
				}
				return true
			}
		}
		return false
	})
	if synced.Namespace != controllerNS || synced.Reason != "Synced" || synced.Severity != notify.SeverityInfo ||
		synced.Version != "1.0.0" || synced.Source == "" || synced.Revision != 1 || synced.Time.IsZero() || synced.Labels["team"] != ns {
		t.Fatalf("the Synced event: %+v", synced)
	}
	// The receiver that selects this add-on by its label gets it too.
	eventually(t, 30*time.Second, "the selected receiver's notification", func() bool {
		events, _ := hook.events(t, "/team", a.Name)
		return len(events) > 0
	})

	// The chart goes missing: Failed, a warning, to both receivers.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url + "-gone.tgz" })
	waitPhase(t, a, capstanv1.PhaseFailed)
	eventually(t, 30*time.Second, "the Failed notification", func() bool {
		events, _ := hook.events(t, "/all/T0/s3cretpath", a.Name)
		for _, e := range events {
			if e.Phase == "Failed" && e.Severity == notify.SeverityWarning && e.Reason == "FetchFailed" && strings.Contains(e.Message, "404") {
				return true
			}
		}
		return false
	})
	eventually(t, 30*time.Second, "the Slack text of the failure", func() bool {
		for _, text := range hook.texts("/warn", a.Name) {
			if strings.HasPrefix(text, ":warning: Addon "+controllerNS+"/"+a.Name+" is Failed (FetchFailed)") {
				return true
			}
		}
		return false
	})
	for _, text := range hook.texts("/warn", a.Name) {
		if strings.Contains(text, "is Synced") {
			t.Fatalf("the warnings receiver got an info event: %q", text)
		}
	}
	if events, _ := hook.events(t, "/elsewhere", a.Name); len(events) > 0 {
		t.Fatalf("a receiver of another namespace got %+v", events)
	}
	if events, _ := hook.events(t, "/other", a.Name); len(events) > 0 {
		t.Fatalf("a receiver that selects another team got %+v", events)
	}
	eventually(t, 30*time.Second, "the broken receiver in the log", func() bool {
		return strings.Contains(logSink.String(), "<"+controllerNS+"/"+notifySecret+"-broken url>")
	})
	// PagerDuty: no incident while the add-on installed; one for the
	// failure, resolved when it is Synced again, and one for the next
	// failure, resolved by the deletion.
	// NOTE: only this add-on's: the receiver takes every add-on of the
	// controller's namespace, and other tests' add-ons there open and
	// close incidents of their own.
	incident := "capstan:Addon:" + controllerNS + ":" + a.Name
	pager := func() []map[string]any {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		var out []map[string]any
		for _, p := range hook.posts["/pager/v2/enqueue"] {
			var m map[string]any
			if err := json.Unmarshal(p.body, &m); err != nil {
				t.Fatalf("a PagerDuty event that is not JSON: %s", p.body)
			}
			if m["dedup_key"] == incident {
				out = append(out, m)
			}
		}
		return out
	}
	eventually(t, 30*time.Second, "the PagerDuty trigger", func() bool { return len(pager()) > 0 })
	if got := pager(); len(got) != 1 || got[0]["event_action"] != "trigger" || got[0]["dedup_key"] != incident || got[0]["routing_key"] != "r0uting-key" {
		t.Fatalf("PagerDuty got %v; want one trigger of %s", got, incident)
	}
	// The status keeps since when the add-on needs a look, for a
	// controller that restarts before it is Synced again.
	since := getAddon(t, a).Status.WarningSince
	if since == nil {
		t.Fatal("a Failed add-on has no status.warningSince")
	}
	// The chart is back: the add-on goes through Progressing to Synced,
	// and the incident is resolved, once.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
	waitPhase(t, a, capstanv1.PhaseSynced)
	// It keeps warningSince until the resolve is delivered, then loses it.
	waitFor(t, a, 30*time.Second, "status.warningSince cleared once the resolve is delivered", func(cur *capstanv1.Addon) bool {
		return cur.Status.WarningSince == nil
	})
	eventually(t, 30*time.Second, "the Synced notification that ends the warning", func() bool {
		events, _ := hook.events(t, "/all/T0/s3cretpath", a.Name)
		last := events[len(events)-1]
		return last.Phase == "Synced" && last.WarningSince.Equal(since.Time)
	})
	eventually(t, 30*time.Second, "the PagerDuty resolve", func() bool { return len(pager()) > 1 })
	time.Sleep(2 * time.Second)
	if got := pager(); len(got) != 2 || got[1]["event_action"] != "resolve" || got[1]["dedup_key"] != incident {
		t.Fatalf("PagerDuty got %v; want a trigger and a resolve", got)
	}
	// It fails again and is deleted while it fails: the deletion, which
	// writes no settled status, resolves the incident.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url + "-gone.tgz" })
	waitPhase(t, a, capstanv1.PhaseFailed)
	eventually(t, 30*time.Second, "the second PagerDuty trigger", func() bool { return len(pager()) > 2 })
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the PagerDuty resolve of the deleted add-on", func() bool { return len(pager()) > 3 })
	if got := pager(); len(got) != 4 || got[2]["event_action"] != "trigger" || got[3]["event_action"] != "resolve" || got[3]["dedup_key"] != incident {
		t.Fatalf("PagerDuty got %v; want a trigger and a resolve, twice", got)
	}
	for _, e := range func() []notify.Event { events, _ := hook.events(t, "/all/T0/s3cretpath", a.Name); return events }() {
		if e.Phase == notify.PhaseDeleted {
			t.Fatalf("a receiver of every transition heard of the deletion, which is for incidents only: %+v", e)
		}
	}
	for _, secret := range []string{"s3cretpath", "l0stpath", "qu3ry", "b3arer-token", "r0uting-key", key} {
		if strings.Contains(logSink.String(), secret) {
			t.Fatalf("the controller's log shows %q from a receiver's Secret", secret)
		}
	}
}

// pagerFor makes the pager receiver (PagerDuty's format, at /pager of a
// webhook of the test's own) take the incidents of add-ons labelled
// team=ns, and returns that webhook once the controller has read it.
func pagerFor(t *testing.T, ns string) *webhook {
	t.Helper()
	hook := newWebhook(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: notifySecret + "-pager"},
		StringData: map[string]string{"url": hook.srv.URL + "/pager", "format": "pagerduty", "token": "k", "selector": "team=" + ns}}
	if err := admin.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), sec) })
	time.Sleep(1500 * time.Millisecond) // the controller reads the Secrets again at most every second
	return hook
}

// TestIncidentOfAnAddonGoneByHand: an add-on whose uninstall failed (its
// pre-delete backup) opens an incident; a person who then removes its
// finalizer by hand leaves no status to settle, and the incident is
// resolved all the same, once the controller finds the Addon gone.
func TestIncidentOfAnAddonGoneByHand(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := pagerFor(t, ns)

	a := dbapp(t, ns, `{hooks: {backup: {fail: true}}}`, withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }),
		func(a *capstanv1.Addon) { a.Labels = map[string]string{"team": ns} })
	synced(t, a)
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	failedWith(t, a, "the pre-delete hook failed")
	// NOTE: the suite's pager Secret is named as other tests' were, and
	// the controller owes a close of an incident it holds to the
	// receiver of that name, whatever its selector now says: only this
	// add-on's incident counts here.
	actions := func() []string {
		var out []string
		all, keys := hook.actions(t, "/pager")
		for i, k := range keys {
			if k == "capstan:Addon:"+a.Namespace+":"+a.Name {
				out = append(out, all[i])
			}
		}
		return out
	}
	eventually(t, 30*time.Second, "the trigger of the failed uninstall", func() bool { return len(actions()) > 0 })

	cur := getAddon(t, a)
	cur.Finalizers = nil
	if err := admin.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the resolve once the Addon is gone", func() bool { return len(actions()) > 1 })
	if got := strings.Join(actions(), ","); got != "trigger,resolve" {
		t.Fatalf("PagerDuty got %s; want a trigger and a resolve", got)
	}
}
