package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// incidentReceivers are a PagerDuty and an Opsgenie receiver posting to
// loopback, as their Secrets give them.
func incidentReceivers(t *testing.T, cluster string) (pd, og Receiver, pdRcv, ogRcv *receiver) {
	t.Helper()
	pdRcv, ogRcv = newReceiver(t), newReceiver(t)
	var err error
	pd, err = ReceiverFromSecret("capstan-system/pager", map[string][]byte{"format": []byte("pagerduty"),
		"url": []byte(pdRcv.srv.URL + "/v2/enqueue"), "token": []byte("R0UT1NGKEY"), "cluster": []byte(cluster)})
	if err != nil {
		t.Fatal(err)
	}
	og, err = ReceiverFromSecret("capstan-system/genie", map[string][]byte{"format": []byte("opsgenie"),
		"url": []byte(ogRcv.srv.URL + "/v2/alerts"), "token": []byte("G3N1EKEY"), "cluster": []byte(cluster), "severity": []byte("warning")})
	if err != nil {
		t.Fatal(err)
	}
	return pd, og, pdRcv, ogRcv
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

// TestIncidentsOpenAndClose: a warning opens one incident per object,
// which a repeat adds to; the phases on the way change nothing; Synced
// closes it; an object that was never in a warning sends no close; after
// a restart, a close follows a warning the process never saw; an add-on
// being deleted closes its incident.
func TestIncidentsOpenAndClose(t *testing.T) {
	pd, og, pdRcv, ogRcv := incidentReceivers(t, "prod-eu")
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(),
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{pd, og}, nil }}
	n.init()
	ctx := context.Background()
	at := func(name, phase, reason string, sev, prev Severity) Event {
		e := event
		e.Name, e.Phase, e.Reason, e.Severity, e.PreviousSeverity = name, phase, reason, sev, prev
		return e
	}
	for _, e := range []Event{
		at("web", "Progressing", "Applying", SeverityInfo, ""),
		at("web", "Failed", "FetchFailed", SeverityWarning, SeverityInfo),
		at("web", "Failed", "RenderFailed", SeverityWarning, SeverityWarning),
		at("web", "Progressing", "WaitingForHealth", SeverityInfo, SeverityWarning),
		at("web", "Synced", "Synced", SeverityInfo, SeverityInfo),
		at("db", "Synced", "Synced", SeverityInfo, SeverityInfo),
		at("db", "OutOfSync", "ApprovalRequired", SeverityInfo, SeverityInfo),
	} {
		n.deliverAll(ctx, e)
	}
	if pdRcv.calls() != 3 || ogRcv.calls() != 3 {
		t.Fatalf("PagerDuty got %d posts, Opsgenie %d; want 3 each (two opens, one close)", pdRcv.calls(), ogRcv.calls())
	}
	trigger := decode(t, pdRcv.bodies[0])
	payload, _ := trigger["payload"].(map[string]any)
	details, _ := payload["custom_details"].(map[string]any)
	if trigger["routing_key"] != "R0UT1NGKEY" || trigger["event_action"] != "trigger" || trigger["dedup_key"] != "capstan:prod-eu:Addon:capstan-system:web" ||
		payload["summary"] != "prod-eu: Addon capstan-system/web is Failed (FetchFailed): Deployment apps/web: Available: 0/1" ||
		payload["severity"] != "error" || payload["source"] != "prod-eu" || payload["component"] != "web" || payload["group"] != "capstan-system" ||
		payload["class"] != "FetchFailed" || payload["timestamp"] != "2026-12-03T12:00:00.000Z" ||
		details["version"] != "1.2.0" || details["revision"] != "3" || details["message"] != event.Message {
		t.Fatalf("the trigger: %s", pdRcv.bodies[0])
	}
	if h := pdRcv.headers[0]; h.Get("Authorization") != "" {
		t.Fatalf("the routing key went in a header too: %v", h)
	}
	if again := decode(t, pdRcv.bodies[1]); again["dedup_key"] != trigger["dedup_key"] || again["event_action"] != "trigger" {
		t.Fatalf("the second failure is not the same incident: %s", pdRcv.bodies[1])
	}
	resolve := decode(t, pdRcv.bodies[2])
	if len(resolve) != 3 || resolve["event_action"] != "resolve" || resolve["dedup_key"] != trigger["dedup_key"] || resolve["routing_key"] != "R0UT1NGKEY" {
		t.Fatalf("the resolve: %s", pdRcv.bodies[2])
	}

	alert := decode(t, ogRcv.bodies[0])
	if alert["alias"] != "capstan:prod-eu:Addon:capstan-system:web" || alert["priority"] != "P2" || alert["source"] != "capstan" ||
		alert["message"] != "prod-eu: Addon capstan-system/web is Failed (FetchFailed)" || alert["entity"] != "Addon capstan-system/web" ||
		!strings.Contains(alert["description"].(string), "web 1.2.0\n\nDeployment apps/web") {
		t.Fatalf("the alert: %s", ogRcv.bodies[0])
	}
	if h := ogRcv.headers[0]; h.Get("Authorization") != "GenieKey G3N1EKEY" {
		t.Fatalf("Opsgenie's key: %q", h.Get("Authorization"))
	}
	if closed := decode(t, ogRcv.bodies[2]); closed["note"] != "prod-eu: Addon capstan-system/web is Synced (Synced)" || closed["alias"] != nil {
		t.Fatalf("the close: %s", ogRcv.bodies[2])
	}
	// Where each went: the alerts, then the close of the alert of that
	// alias.
	if !slices.Equal(ogRcv.paths, []string{"/v2/alerts", "/v2/alerts", "/v2/alerts/capstan:prod-eu:Addon:capstan-system:web/close?identifierType=alias"}) ||
		!slices.Equal(pdRcv.paths, []string{"/v2/enqueue", "/v2/enqueue", "/v2/enqueue"}) {
		t.Fatalf("Opsgenie's addresses %v, PagerDuty's %v", ogRcv.paths, pdRcv.paths)
	}

	// A restarted controller remembers nothing, yet closes what was in a
	// warning before; and a deletion closes the incident.
	fresh := &Notifier{Client: http.DefaultClient, Log: logr.Discard(),
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{pd}, nil }}
	fresh.init()
	fresh.deliverAll(ctx, at("web", "Synced", "Synced", SeverityInfo, SeverityWarning))
	fresh.deliverAll(ctx, at("api", "Blocked", "GuardrailViolated", SeverityWarning, SeverityInfo))
	fresh.deliverAll(ctx, at("api", "Deleting", "Deleting", SeverityInfo, SeverityWarning))
	// And, after a restart while a fix rolled out (Failed, Progressing,
	// then the restart), the Synced that says since when it was in a
	// warning closes that incident too; one that never was sends nothing.
	rolledOut := at("cache", "Synced", "Synced", SeverityInfo, SeverityInfo)
	rolledOut.WarningSince = event.Time.Add(-time.Hour)
	fresh.deliverAll(ctx, at("quiet", "Synced", "Synced", SeverityInfo, SeverityInfo))
	fresh.deliverAll(ctx, rolledOut)
	if pdRcv.calls() != 7 {
		t.Fatalf("after a restart: %d posts, want 7", pdRcv.calls())
	}
	if b := decode(t, pdRcv.bodies[6]); b["event_action"] != "resolve" || b["dedup_key"] != "capstan:prod-eu:Addon:capstan-system:cache" {
		t.Fatalf("the close after a restart mid-fix: %s", pdRcv.bodies[6])
	}
	if b := decode(t, pdRcv.bodies[3]); b["event_action"] != "resolve" {
		t.Fatalf("the close after a restart: %s", pdRcv.bodies[3])
	}
	blocked := decode(t, pdRcv.bodies[4])
	if p := blocked["payload"].(map[string]any); p["severity"] != "warning" {
		t.Fatalf("a Blocked add-on is a warning: %s", pdRcv.bodies[4])
	}
	if b := decode(t, pdRcv.bodies[5]); b["event_action"] != "resolve" || b["dedup_key"] != blocked["dedup_key"] {
		t.Fatalf("the deletion's close: %s", pdRcv.bodies[5])
	}
}

// TestACloseFollowsItsIncident: an incident receiver that selects by
// label closes the incident it opened, though the object was relabeled
// out of its selector since: recovered, or gone. One that never opened
// the object's incident hears nothing of it.
func TestACloseFollowsItsIncident(t *testing.T) {
	pdRcv := newReceiver(t)
	pd, err := ReceiverFromSecret("capstan-system/pager", map[string][]byte{"format": []byte("pagerduty"),
		"url": []byte(pdRcv.srv.URL + "/v2/enqueue"), "token": []byte("R0UT1NGKEY"),
		"namespaces": []byte("capstan-system"), "selector": []byte("team=web")})
	if err != nil {
		t.Fatal(err)
	}
	var closed []string
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(),
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{pd}, nil },
		Closed:    func(e Event) { closed = append(closed, e.Name) }}
	n.init()
	ctx := context.Background()
	at := func(name, team, phase string, sev, prev Severity) Event {
		e := event
		e.Name, e.Phase, e.Reason, e.Severity, e.PreviousSeverity = name, phase, phase, sev, prev
		e.Labels = map[string]string{"team": team}
		return e
	}
	fixed := at("web", "api", "Synced", SeverityInfo, SeverityInfo)
	fixed.WarningSince = event.Time
	gone := at("cache", "api", PhaseDeleted, SeverityInfo, SeverityWarning)
	gone.IncidentOnly = true
	for _, e := range []Event{
		at("web", "web", "Failed", SeverityWarning, SeverityInfo),
		// Relabeled team=api, then fixed.
		at("web", "api", "Progressing", SeverityInfo, SeverityWarning),
		fixed,
		// Relabeled while it fails, then removed.
		at("cache", "web", "Failed", SeverityWarning, SeverityInfo),
		gone,
		// Never the receiver's.
		at("db", "api", "Failed", SeverityWarning, SeverityInfo),
		at("db", "api", "Synced", SeverityInfo, SeverityWarning),
	} {
		n.deliverAll(ctx, e)
	}
	var got []string
	for _, b := range pdRcv.bodies {
		m := decode(t, b)
		got = append(got, fmt.Sprint(m["event_action"], " ", m["dedup_key"]))
	}
	want := []string{"trigger capstan:Addon:capstan-system:web", "resolve capstan:Addon:capstan-system:web",
		"trigger capstan:Addon:capstan-system:cache", "resolve capstan:Addon:capstan-system:cache"}
	if !slices.Equal(got, want) {
		t.Fatalf("PagerDuty got %q; want %q", got, want)
	}
	if !slices.Equal(closed, []string{"web", "cache"}) {
		t.Fatalf("closes reported delivered: %v; want web and cache", closed)
	}
	if len(n.open[pd.Name]) != 0 || len(n.pending[pd.Name]) != 0 {
		t.Fatalf("still held: open %v, pending %v", n.open[pd.Name], n.pending[pd.Name])
	}
}

// TestClosesAreSentAgain: a close that fails, or that comes while its
// receiver is paused, is sent again until it is delivered; a warning in
// between opens the incident anew and drops it; a close refused for good
// is not tried again. Only incident receivers hear of a deletion.
func TestClosesAreSentAgain(t *testing.T) {
	pdRcv := newReceiver(t, 204, 500, 204)
	pd, err := ReceiverFromSecret("capstan-system/pager", map[string][]byte{"format": []byte("pagerduty"),
		"url": []byte(pdRcv.srv.URL + "/v2/enqueue"), "token": []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	chat := newReceiver(t)
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(), Attempts: 1,
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{pd, chat.receiver(t, "/chat")}, nil }}
	n.init()
	ctx := context.Background()
	failed := event
	failed.Phase, failed.Reason = "Failed", "FetchFailed"
	gone := event
	gone.Phase, gone.Reason, gone.Severity, gone.PreviousSeverity, gone.IncidentOnly = PhaseDeleted, PhaseDeleted, SeverityInfo, SeverityWarning, true

	n.deliverAll(ctx, failed) // the trigger: 204
	n.deliverAll(ctx, gone)   // the close: 500, kept
	if pdRcv.calls() != 2 || len(n.pending[pd.Name]) != 1 || chat.calls() != 1 {
		t.Fatalf("PagerDuty %d posts, %d closes kept, the chat %d posts; want 2, 1 and 1 (the failure only)", pdRcv.calls(), len(n.pending[pd.Name]), chat.calls())
	}
	n.retryPending(ctx) // 204
	if pdRcv.calls() != 3 || len(n.pending[pd.Name]) != 0 || len(n.open[pd.Name]) != 0 {
		t.Fatalf("after the retry: %d posts, %d closes kept, %d open", pdRcv.calls(), len(n.pending[pd.Name]), len(n.open[pd.Name]))
	}
	if b := decode(t, pdRcv.bodies[2]); b["event_action"] != "resolve" {
		t.Fatalf("the retry: %s", pdRcv.bodies[2])
	}
	n.retryPending(ctx)
	if pdRcv.calls() != 3 {
		t.Fatal("a delivered close was sent again")
	}

	// Paused: the close waits for the pause to end.
	n.deliverAll(ctx, failed)
	n.paused[pd.Name] = time.Now().Add(time.Hour)
	synced := event
	synced.Phase, synced.Reason, synced.Severity, synced.PreviousSeverity = "Synced", "Synced", SeverityInfo, SeverityWarning
	n.deliverAll(ctx, synced)
	n.retryPending(ctx)
	if pdRcv.calls() != 4 || len(n.pending[pd.Name]) != 1 {
		t.Fatalf("while paused: %d posts, %d closes kept; want 4 and 1", pdRcv.calls(), len(n.pending[pd.Name]))
	}
	// A warning before the retry opens it anew: the close is dropped.
	n.paused[pd.Name] = time.Time{}
	n.deliverAll(ctx, failed)
	n.retryPending(ctx)
	if pdRcv.calls() != 5 || len(n.pending[pd.Name]) != 0 {
		t.Fatalf("a warning after a kept close: %d posts, %d closes kept; want 5 and 0", pdRcv.calls(), len(n.pending[pd.Name]))
	}

	// A retry sends at most pendingPerRetry to one receiver.
	for i := range pendingPerRetry + 5 {
		f := failed
		f.Name = fmt.Sprintf("web-%d", i)
		n.deliverAll(ctx, f)
	}
	n.paused[pd.Name] = time.Now().Add(time.Hour)
	for i := range pendingPerRetry + 5 {
		c := synced
		c.Name = fmt.Sprintf("web-%d", i)
		n.deliverAll(ctx, c)
	}
	n.paused[pd.Name] = time.Time{}
	before := pdRcv.calls()
	n.retryPending(ctx)
	if sent := pdRcv.calls() - before; sent != pendingPerRetry || len(n.pending[pd.Name]) != 5 {
		t.Fatalf("one retry sent %d closes and kept %d; want %d and 5", sent, len(n.pending[pd.Name]), pendingPerRetry)
	}
	// A receiver whose Secret now names another format drops its closes,
	// and sends none of them to a chat.
	pd.Format = FormatSlack
	n.cachedAt = time.Time{}
	before = pdRcv.calls()
	n.retryPending(ctx)
	if pdRcv.calls() != before || len(n.pending[pd.Name]) != 0 {
		t.Fatalf("a receiver that no longer opens incidents: %d posts, %d closes kept", pdRcv.calls()-before, len(n.pending[pd.Name]))
	}
	pd.Format = FormatPagerDuty

	// A close refused for good (400: PagerDuty read no event) is dropped.
	refusing := newReceiver(t, 400)
	pd.URL, _ = url.Parse(refusing.srv.URL + "/v2/enqueue")
	n.cachedAt = time.Time{} // read the receivers again
	n.deliverAll(ctx, synced)
	if refusing.calls() != 1 || len(n.pending[pd.Name]) != 0 || len(n.open[pd.Name]) != 0 {
		t.Fatalf("a refused close: %d posts, %d kept, %d open", refusing.calls(), len(n.pending[pd.Name]), len(n.open[pd.Name]))
	}
}

// TestTriggersAreSentAgain: a PagerDuty receiver that fails three events
// in a row is paused; an add-on that fails meanwhile is still paged once
// the pause ends, as are the failures that paused it. A trigger still
// pending when its object settles is dropped with its close (the tool
// never heard of the incident), unless the incident may be open already.
func TestTriggersAreSentAgain(t *testing.T) {
	pdRcv := newReceiver(t, 500, 500, 500)
	pd, err := ReceiverFromSecret("capstan-system/pager", map[string][]byte{"format": []byte("pagerduty"),
		"url": []byte(pdRcv.srv.URL + "/v2/enqueue"), "token": []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(), Attempts: 1,
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{pd}, nil }}
	n.init()
	ctx := context.Background()
	failed := func(name string, prev Severity) Event {
		e := event
		e.Name, e.Phase, e.Reason, e.PreviousSeverity = name, "Failed", "FetchFailed", prev
		return e
	}
	synced := func(name string) Event {
		e := event
		e.Name, e.Phase, e.Reason, e.Severity, e.PreviousSeverity = name, "Synced", "Synced", SeverityInfo, SeverityWarning
		return e
	}
	for _, name := range []string{"a", "b", "c", "web"} {
		n.deliverAll(ctx, failed(name, SeverityInfo))
	}
	if pdRcv.calls() != pauseAfter || !time.Now().Before(n.paused[pd.Name]) || len(n.pending[pd.Name]) != 4 {
		t.Fatalf("%d posts, paused until %v, %d pending; want %d, paused, 4", pdRcv.calls(), n.paused[pd.Name], len(n.pending[pd.Name]), pauseAfter)
	}
	n.retryPending(ctx) // still paused: nothing
	if pdRcv.calls() != pauseAfter {
		t.Fatal("a paused receiver was sent a pending trigger")
	}
	n.paused[pd.Name] = time.Time{} // the minute is over
	n.retryPending(ctx)
	var paged []string
	for _, b := range pdRcv.bodies[pauseAfter:] {
		m := decode(t, b)
		if m["event_action"] != "trigger" {
			t.Fatalf("a retry sent %s", b)
		}
		paged = append(paged, m["dedup_key"].(string))
	}
	slices.Sort(paged)
	if want := []string{"capstan:Addon:capstan-system:a", "capstan:Addon:capstan-system:b", "capstan:Addon:capstan-system:c", "capstan:Addon:capstan-system:web"}; !slices.Equal(paged, want) || len(n.pending[pd.Name]) != 0 {
		t.Fatalf("after the pause: paged %v, %d pending; want %v", paged, len(n.pending[pd.Name]), want)
	}
	// The incident now exists: its close is sent.
	n.deliverAll(ctx, synced("web"))
	if b := decode(t, pdRcv.bodies[len(pdRcv.bodies)-1]); b["event_action"] != "resolve" || b["dedup_key"] != "capstan:Addon:capstan-system:web" {
		t.Fatalf("the close of a paged incident: %s", pdRcv.bodies[len(pdRcv.bodies)-1])
	}

	// A trigger pending while its object settles: neither is sent.
	before := pdRcv.calls()
	n.paused[pd.Name] = time.Now().Add(time.Hour)
	n.deliverAll(ctx, failed("db", SeverityInfo))
	n.deliverAll(ctx, synced("db"))
	n.paused[pd.Name] = time.Time{}
	n.retryPending(ctx)
	if pdRcv.calls() != before || len(n.pending[pd.Name]) != 0 {
		t.Fatalf("a superseded trigger: %d posts, %d pending; want none", pdRcv.calls()-before, len(n.pending[pd.Name]))
	}
	// But one whose object was in a warning before (a controller before
	// this one may have opened the incident) gives way to its close.
	n.paused[pd.Name] = time.Now().Add(time.Hour)
	n.deliverAll(ctx, failed("cache", SeverityWarning))
	n.deliverAll(ctx, synced("cache"))
	n.paused[pd.Name] = time.Time{}
	n.retryPending(ctx)
	if pdRcv.calls() != before+1 || len(n.pending[pd.Name]) != 0 {
		t.Fatalf("a trigger after a warning, then its close: %d posts, %d pending; want 1 and 0", pdRcv.calls()-before, len(n.pending[pd.Name]))
	}
	if b := decode(t, pdRcv.bodies[before]); b["event_action"] != "resolve" || b["dedup_key"] != "capstan:Addon:capstan-system:cache" {
		t.Fatalf("the close after a warning: %s", pdRcv.bodies[before])
	}
}

// TestClosedReportsSettledCloses: Closed hears of a close once no
// incident receiver that takes it owes it: at once when each delivered it,
// after the retry that delivers the last one, when the tool refuses it
// for good, when it is given up after its tries, and when its receiver
// stops opening incidents or is gone. It hears once per close, and
// nothing of a trigger, of a close that only a chat takes, or of a
// Synced that follows no warning.
func TestClosedReportsSettledCloses(t *testing.T) {
	ctx := context.Background()
	pdRcv := newReceiver(t)
	pd, err := ReceiverFromSecret("capstan-system/pager", map[string][]byte{"format": []byte("pagerduty"),
		"url": []byte(pdRcv.srv.URL + "/v2/enqueue"), "token": []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	ogRcv := newReceiver(t)
	og, err := ReceiverFromSecret("capstan-system/genie", map[string][]byte{"format": []byte("opsgenie"),
		"url": []byte(ogRcv.srv.URL + "/v2/alerts"), "token": []byte("g")})
	if err != nil {
		t.Fatal(err)
	}
	chat := newReceiver(t)
	var receivers []Receiver
	var closed []string
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(), Attempts: 1,
		Receivers: func(context.Context) ([]Receiver, error) { return receivers, nil },
		Closed:    func(e Event) { closed = append(closed, e.Name+" "+e.Phase) }}
	n.init()
	use := func(rs ...Receiver) {
		receivers = rs
		n.cachedAt = time.Time{} // read the receivers again
	}
	failed := func(name string) Event {
		e := event
		e.Name, e.Phase, e.Reason, e.Severity, e.PreviousSeverity = name, "Failed", "FetchFailed", SeverityWarning, SeverityInfo
		return e
	}
	synced := func(name string, prev Severity) Event {
		e := event
		e.Name, e.Phase, e.Reason, e.Severity, e.PreviousSeverity = name, "Synced", "Synced", SeverityInfo, prev
		return e
	}
	answer := func(r *receiver, codes ...int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.codes = codes
	}
	want := func(step string, names ...string) {
		t.Helper()
		if !slices.Equal(closed, names) {
			t.Fatalf("%s: Closed heard %q; want %q", step, closed, names)
		}
		closed = nil
	}

	// Delivered at once, to both incident receivers: one report. A chat
	// that takes the same events changes nothing.
	use(pd, og, chat.receiver(t, "/chat"))
	n.deliverAll(ctx, failed("web"))
	want("a trigger")
	n.deliverAll(ctx, synced("web", SeverityWarning))
	want("a delivered close", "web Synced")
	n.deliverAll(ctx, synced("quiet", SeverityInfo))
	want("a Synced after no warning")
	use(chat.receiver(t, "/chat"))
	n.deliverAll(ctx, synced("chatty", SeverityWarning))
	want("a close only a chat takes")

	// Opsgenie fails the close: owed until the retry delivers it; the
	// retry after that reports nothing more.
	use(pd, og)
	n.deliverAll(ctx, failed("db"))
	answer(ogRcv, 500)
	n.deliverAll(ctx, synced("db", SeverityWarning))
	want("a close Opsgenie failed")
	n.retryPending(ctx)
	want("the retry that delivers it", "db Synced")
	n.retryPending(ctx)
	want("a retry with nothing pending")

	// A close that comes while PagerDuty is paused waits for its retry.
	n.paused[pd.Name] = time.Now().Add(time.Hour)
	n.deliverAll(ctx, synced("paused", SeverityWarning))
	want("a close to a paused receiver")
	n.paused[pd.Name] = time.Time{}
	n.retryPending(ctx)
	want("its retry", "paused Synced")

	// Refused for good, at once or on a retry: given up, so settled.
	answer(pdRcv, 400)
	n.deliverAll(ctx, synced("refused", SeverityWarning))
	want("a refused close", "refused Synced")
	answer(pdRcv, 500, 400)
	n.deliverAll(ctx, synced("refused-later", SeverityWarning))
	want("a close that failed")
	n.retryPending(ctx)
	want("its refusal", "refused-later Synced")

	// Given up after its tries.
	answer(pdRcv, 500, 500)
	n.deliverAll(ctx, synced("tired", SeverityWarning))
	n.pending[pd.Name][incidentKey(pd, synced("tired", ""))].tries = maxCloseTries - 1
	n.paused[pd.Name] = time.Time{} // paused by the failures in a row
	n.retryPending(ctx)
	want("a close given up after its tries", "tired Synced")

	// PagerDuty's Secret names a chat now, and Opsgenie's is gone: their
	// closes are dropped, and each object's is reported once.
	answer(pdRcv, 500)
	answer(ogRcv, 500)
	n.paused[pd.Name] = time.Time{}
	n.deliverAll(ctx, synced("left", SeverityWarning))
	want("a close both failed")
	slack := pd
	slack.Format = FormatSlack
	use(slack)
	n.retryPending(ctx)
	want("receivers that no longer open incidents", "left Synced")
	if len(n.pending) != 0 {
		t.Fatalf("closes still pending for receivers that no longer take them: %v", n.pending)
	}
}

// TestIncidentKeys: one per object and cluster, within PagerDuty's 255
// characters.
func TestIncidentKeys(t *testing.T) {
	r := Receiver{}
	repo := Event{Kind: "AddonRepository", Namespace: "a", Name: "defs"}
	if got := incidentKey(r, repo); got != "capstan:AddonRepository:a:defs" {
		t.Fatal(got)
	}
	long := Event{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("x", 253)}
	k1, k2 := incidentKey(Receiver{Cluster: "a"}, long), incidentKey(Receiver{Cluster: "b"}, long)
	if len(k1) > maxIncidentKey || k1 == k2 || !strings.HasPrefix(k1, "capstan:a:") {
		t.Fatalf("long keys: %q, %q", k1, k2)
	}
	long.Name = strings.Repeat("y", 253)
	if incidentKey(Receiver{Cluster: "a"}, long) == k1 {
		t.Fatal("two long names share a key")
	}
	// A repository's failure is a warning to the tools, and its clean
	// sync closes it; a repository is never Deleting.
	failed := Event{Kind: "AddonRepository", Phase: "Failed", Severity: SeverityWarning}
	if incidentUrgent(failed) || incidentAction(failed) != incidentOpen ||
		incidentAction(Event{Kind: "AddonRepository", Phase: "Synced", Severity: SeverityInfo}) != incidentClose ||
		incidentAction(Event{Kind: "AddonRepository", Phase: "Deleting", Severity: SeverityInfo}) != "" {
		t.Fatal("a repository's incidents")
	}
	if incidentAction(Event{Phase: "Synced", Severity: SeverityInfo, SameState: true}) != "" {
		t.Fatal("a commit status's event closes an incident")
	}
}

func TestIncidentReceivers(t *testing.T) {
	pd, err := ReceiverFromSecret("p", map[string][]byte{"format": []byte("pagerduty"), "token": []byte("k")})
	if err != nil || pd.URL.String() != pagerDutyURL || !pd.incident() {
		t.Fatalf("%+v, %v", pd, err)
	}
	og, err := ReceiverFromSecret("o", map[string][]byte{"format": []byte("opsgenie"), "token": []byte("k")})
	if err != nil || og.URL.String() != opsgenieURL {
		t.Fatalf("%+v, %v", og, err)
	}
	for _, c := range []struct {
		name string
		data map[string][]byte
		says string
	}{
		{"no routing key", map[string][]byte{"format": []byte("pagerduty")}, "format pagerduty needs the key token: set it to the routing key"},
		{"no API key", map[string][]byte{"format": []byte("opsgenie")}, "format opsgenie needs the key token: set it to the key of an Opsgenie API integration"},
		{"every transition", map[string][]byte{"format": []byte("pagerduty"), "token": []byte("s3cret"), "severity": []byte("info")}, "opens incidents for warnings only"},
		{"a cluster", map[string][]byte{"format": []byte("pagerduty"), "token": []byte("s3cret"), "cluster": []byte("prod eu")}, `key cluster is "prod eu"`},
		{"a long cluster", map[string][]byte{"format": []byte("opsgenie"), "token": []byte("s3cret"), "cluster": []byte(strings.Repeat("c", 51))}, "at most 50"},
		{"another url", map[string][]byte{"format": []byte("opsgenie"), "token": []byte("s3cret"), "url": []byte("ftp://h")}, "key url is not"},
	} {
		_, err := ReceiverFromSecret("s", c.data)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// What an incident receiver takes: warnings and settled states, from
	// its namespaces; nothing on the way.
	pd.Namespaces = []string{"tenant-a"}
	for _, c := range []struct {
		e    Event
		want bool
	}{
		{Event{Namespace: "tenant-a", Phase: "Failed", Severity: SeverityWarning}, true},
		{Event{Namespace: "tenant-a", Phase: "Synced", Severity: SeverityInfo}, true},
		{Event{Namespace: "tenant-a", Phase: "Progressing", Severity: SeverityInfo}, false},
		{Event{Namespace: "tenant-a", Phase: "Paused", Severity: SeverityInfo}, false},
		{Event{Namespace: "tenant-b", Phase: "Failed", Severity: SeverityWarning}, false},
	} {
		if got := pd.Wants(c.e); got != c.want {
			t.Errorf("%+v: %v", c.e, got)
		}
	}
}

// TestClosesWaitPastAFullQueue: with the queue full (a receiver that
// hung while a thousand add-ons changed), a close is not dropped: it
// waits, and is sent after the warning queued before it, in order; an
// event that closes nothing, once the overflow's room for them is used,
// is dropped.
func TestClosesWaitPastAFullQueue(t *testing.T) {
	pd, _, pdRcv, _ := incidentReceivers(t, "")
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(),
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{pd}, nil }}
	at := func(name, phase string, sev, prev Severity) Event {
		e := event
		e.Name, e.Phase, e.Reason, e.Severity, e.PreviousSeverity = name, phase, phase, sev, prev
		return e
	}
	if !n.Notify(at("web", "Failed", SeverityWarning, SeverityInfo)) {
		t.Fatal("the first event was dropped")
	}
	for i := 1; i < QueueSize; i++ {
		n.Notify(at(fmt.Sprintf("other-%d", i), "Progressing", SeverityInfo, SeverityInfo))
	}
	if !n.Notify(at("web", "Synced", SeverityInfo, SeverityWarning)) {
		t.Fatal("a close was dropped from a full queue")
	}
	for i := range overflowRoom {
		n.Notify(at(fmt.Sprintf("later-%d", i), "Progressing", SeverityInfo, SeverityInfo))
	}
	if n.Notify(at("late", "Progressing", SeverityInfo, SeverityInfo)) {
		t.Fatal("an event that closes nothing joined a full overflow")
	}
	if !n.Notify(at("db", "Synced", SeverityInfo, SeverityWarning)) {
		t.Fatal("a second close was dropped")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = n.Start(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for pdRcv.calls() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	pdRcv.mu.Lock()
	defer pdRcv.mu.Unlock()
	var got []string
	for _, b := range pdRcv.bodies {
		m := decode(t, b)
		got = append(got, fmt.Sprint(m["event_action"], " ", m["dedup_key"]))
	}
	want := []string{"trigger capstan:Addon:capstan-system:web", "resolve capstan:Addon:capstan-system:web", "resolve capstan:Addon:capstan-system:db"}
	if !slices.Equal(got, want) {
		t.Fatalf("PagerDuty got %q; want %q", got, want)
	}
}

// TestATriggerThatMayHaveArrivedIsClosed: a trigger whose post failed
// after it was sent whole, with no answer that says it was not taken (an
// answer after the post's time, a connection lost after the request, a
// proxy's 502), may have opened the incident: once the add-on settles,
// the close is sent, and Closed hears of it only once it is delivered.
// One whose post never left (nothing listens) still sends neither. So
// does the retry of a pending trigger (retryPending).
func TestATriggerThatMayHaveArrivedIsClosed(t *testing.T) {
	failed := event
	failed.Phase, failed.Reason, failed.PreviousSeverity = "Failed", "FetchFailed", SeverityInfo
	synced := event
	synced.Phase, synced.Reason, synced.Severity, synced.PreviousSeverity = "Synced", "Synced", SeverityInfo, SeverityWarning
	for _, tc := range []struct {
		name string
		// first answers the trigger; every later post is answered 202.
		first func(w http.ResponseWriter)
		// down: nothing listens when the trigger is posted.
		down bool
		// retried: the trigger comes while the receiver is paused, and
		// is posted by the retry of pending events.
		retried      bool
		wantResolves int
	}{
		{name: "answered after the post's time", first: func(http.ResponseWriter) { time.Sleep(300 * time.Millisecond) }, wantResolves: 1},
		{name: "connection lost after the request", first: func(w http.ResponseWriter) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}, wantResolves: 1},
		{name: "a proxy's 502", first: func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }, wantResolves: 1},
		{name: "retried, answered after the post's time", retried: true, first: func(http.ResponseWriter) { time.Sleep(300 * time.Millisecond) }, wantResolves: 1},
		{name: "rate limited", first: func(w http.ResponseWriter) { w.WriteHeader(http.StatusTooManyRequests) }, wantResolves: 0},
		{name: "nothing listens", down: true, wantResolves: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var actions []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				var body struct {
					Action string `json:"event_action"`
				}
				_ = json.NewDecoder(req.Body).Decode(&body)
				mu.Lock()
				actions = append(actions, body.Action)
				first := len(actions) == 1
				mu.Unlock()
				if first && tc.first != nil {
					tc.first(w)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			}))
			defer srv.Close()
			pd, err := ReceiverFromSecret("capstan-system/pager", map[string][]byte{"format": []byte("pagerduty"),
				"url": []byte(srv.URL + "/v2/enqueue"), "token": []byte("k")})
			if err != nil {
				t.Fatal(err)
			}
			closed := 0
			n := &Notifier{Client: &http.Client{}, Log: logr.Discard(), Attempts: 1, Timeout: 100 * time.Millisecond,
				Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{pd}, nil },
				Closed:    func(Event) { closed++ }}
			n.init()
			ctx := context.Background()
			if tc.down {
				srv.Close()
			}
			if tc.retried {
				n.paused[pd.Name] = time.Now().Add(time.Hour)
				n.deliverAll(ctx, failed)
				n.paused[pd.Name] = time.Time{}
				n.retryPending(ctx)
			} else {
				n.deliverAll(ctx, failed)
			}
			n.failing[pd.Name], n.pauses[pd.Name], n.paused[pd.Name] = 0, 0, time.Time{}
			n.deliverAll(ctx, synced)
			n.retryPending(ctx)
			mu.Lock()
			defer mu.Unlock()
			resolves := 0
			for _, a := range actions {
				if a == "resolve" {
					resolves++
				}
			}
			if resolves != tc.wantResolves || closed != 1 || len(n.pending[pd.Name]) != 0 {
				t.Fatalf("posted %v, Closed heard %d, %d pending; want %d resolve, Closed once, none pending", actions, closed, len(n.pending[pd.Name]), tc.wantResolves)
			}
		})
	}
}
