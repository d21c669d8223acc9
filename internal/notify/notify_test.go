package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestReceiverFromSecret(t *testing.T) {
	good, err := ReceiverFromSecret("team", map[string][]byte{"url": []byte(" https://hooks.example.com/services/T0/B0/secret \n"),
		"format": []byte("slack"), "severity": []byte("warning"), "token": []byte("tok"), "hmacKey": []byte("k")})
	if err != nil || good.URL.Path != "/services/T0/B0/secret" || good.Format != FormatSlack || good.MinSeverity != SeverityWarning ||
		good.Token != "tok" || string(good.HMACKey) != "k" {
		t.Fatalf("%+v, %v", good, err)
	}
	// The key signs byte for byte, spaces and line breaks inside included:
	// the receiver checks it as it was given.
	signed, err := ReceiverFromSecret("team", map[string][]byte{"url": []byte("https://h/x"), "hmacKey": []byte(" k\nk ")})
	if err != nil || string(signed.HMACKey) != " k\nk " {
		t.Fatalf("an hmacKey with spaces and a line break inside: %q, %v; want it kept as it is", signed.HMACKey, err)
	}
	// A binary key (random bytes, not text) may end in a line break's
	// byte: it is taken as it is, as the receiver holds it.
	binary := []byte{0x9c, 0x01, 0xff, 0x42, 0x0a}
	if b, err := ReceiverFromSecret("team", map[string][]byte{"url": []byte("https://h/x"), "hmacKey": binary}); err != nil || !bytes.Equal(b.HMACKey, binary) {
		t.Fatalf("a binary hmacKey that ends with 0x0a: %q, %v; want it kept as it is", b.HMACKey, err)
	}
	if d, err := ReceiverFromSecret("d", map[string][]byte{"url": []byte("http://127.0.0.1:9/x")}); err != nil || d.Format != FormatJSON || d.MinSeverity != SeverityInfo {
		t.Fatalf("defaults: %+v, %v", d, err)
	}
	for _, c := range []struct {
		name string
		data map[string][]byte
		says string
	}{
		{"no url", map[string][]byte{}, "has no key url"},
		{"not http", map[string][]byte{"url": []byte("ftp://h/x")}, "key url is not an http or https address"},
		{"no host", map[string][]byte{"url": []byte("https:///x")}, "key url is not an http or https address"},
		{"a password in the url", map[string][]byte{"url": []byte("https://u:hunter2@h/x")}, "carries a user and password"},
		{"a format", map[string][]byte{"url": []byte("https://h/x"), "format": []byte("teams")}, `key format is "teams"; use json, slack, discord, msteams, googlechat, github, gitlab, pagerduty or opsgenie`},
		{"a severity", map[string][]byte{"url": []byte("https://h/x"), "severity": []byte("error")}, "key severity"},
		{"a token over lines", map[string][]byte{"url": []byte("https://h/x"), "token": []byte("a\nb")}, "key token holds characters a header cannot carry"},
		{"a huge value", map[string][]byte{"url": []byte("https://h/" + strings.Repeat("x", maxField))}, "bytes; at most"},
		{"a namespace", map[string][]byte{"url": []byte("https://h/x"), "namespaces": []byte("team-a, Team_B")}, `key namespaces names "Team_B", which is not a namespace`},
		{"a selector", map[string][]byte{"url": []byte("https://h/x"), "selector": []byte("team in (a")}, "key selector is not a label selector"},
		{"no namespace", map[string][]byte{"url": []byte("https://h/x"), "namespaces": []byte(" , ")}, "key namespaces names no namespace"},
		// A key that ends with a line break is refused, not cut: cut, it
		// would sign with another key than the receiver's, or with none.
		{"an hmacKey from echo", map[string][]byte{"url": []byte("https://h/x"), "hmacKey": []byte("hunter2\n")}, "key hmacKey ends with a line break"},
		{"an hmacKey with CRLF", map[string][]byte{"url": []byte("https://h/x"), "hmacKey": []byte("hunter2\r\n")}, "key hmacKey ends with a line break"},
		{"an hmacKey of a line break", map[string][]byte{"url": []byte("https://h/x"), "hmacKey": []byte("\n")}, "key hmacKey ends with a line break"},
		// A misspelt key would widen the receiver, or stop its signing,
		// without a word: it is refused, naming the key, never its value.
		{"namespace for namespaces", map[string][]byte{"url": []byte("https://h/x"), "namespace": []byte("hunter2")}, `has the key "namespace", which Capstan does not read (did you mean namespaces?)`},
		{"a misspelt severity", map[string][]byte{"url": []byte("https://h/x"), "severty": []byte("warning")}, `"severty", which Capstan does not read (did you mean severity?)`},
		{"selectors", map[string][]byte{"url": []byte("https://h/x"), "selectors": []byte("team=a")}, "(did you mean selector?)"},
		{"hmac-key", map[string][]byte{"url": []byte("https://h/x"), "hmac-key": []byte("hunter2")}, "(did you mean hmacKey?)"},
		{"hmac_key", map[string][]byte{"url": []byte("https://h/x"), "hmac_key": []byte("hunter2")}, "(did you mean hmacKey?)"},
		{"URL", map[string][]byte{"URL": []byte("https://h/x")}, "(did you mean url?)"},
		{"a key of another tool", map[string][]byte{"url": []byte("https://h/x"), "webhook-secret": []byte("hunter2")}, `"webhook-secret", which Capstan does not read; its keys are url, format, severity, token, hmacKey, namespaces, selector, cluster`},
	} {
		_, err := ReceiverFromSecret("s", c.data)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

var event = Event{Time: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), Namespace: "capstan-system", Name: "web",
	Phase: "Degraded", Reason: "Degraded", Message: "Deployment apps/web: Available: 0/1", Severity: SeverityWarning,
	Source: "web", Version: "1.2.0", Revision: 3, Labels: map[string]string{"team": "web"}}

func TestBodies(t *testing.T) {
	b, err := Receiver{Format: FormatJSON}.Body(event)
	var back Event
	if err != nil || json.Unmarshal(b, &back) != nil || !reflect.DeepEqual(back, event) {
		t.Fatalf("json: %s, %v", b, err)
	}
	b, err = Receiver{Format: FormatSlack}.Body(event)
	var slack map[string]string
	if err != nil || json.Unmarshal(b, &slack) != nil ||
		slack["text"] != ":warning: Addon capstan-system/web is Degraded (Degraded) · web 1.2.0\nDeployment apps/web: Available: 0/1" {
		t.Fatalf("slack: %s, %v", b, err)
	}
	if got := SlackText(Event{Namespace: "a", Name: "b", Phase: "Synced", Reason: "Synced", Severity: SeverityInfo}); got != ":white_check_mark: Addon a/b is Synced (Synced)" {
		t.Fatalf("synced: %q", got)
	}
	// A receiver that names its cluster says which cluster speaks, in
	// the JSON and in every chat's headline.
	b, err = Receiver{Format: FormatSlack, Cluster: "prod-eu"}.Body(event)
	if err != nil || json.Unmarshal(b, &slack) != nil || !strings.HasPrefix(slack["text"], ":warning: prod-eu: Addon capstan-system/web is Degraded") {
		t.Fatalf("slack with a cluster: %s, %v", b, err)
	}
	b, err = Receiver{Format: FormatJSON, Cluster: "prod-eu"}.Body(event)
	if err != nil || json.Unmarshal(b, &back) != nil || back.Cluster != "prod-eu" {
		t.Fatalf("json with a cluster: %s, %v", b, err)
	}
	for _, f := range []string{FormatDiscord, FormatTeams, FormatGoogleChat} {
		if b, _ := (Receiver{Format: f, Cluster: "prod-eu"}).Body(event); !strings.Contains(string(b), "prod-eu: Addon capstan-system/web") {
			t.Errorf("%s with a cluster: %s", f, b)
		}
	}
	repo := Event{Kind: "AddonRepository", Namespace: "a", Name: "defs", Phase: "Synced", Reason: "InvalidFiles", Severity: SeverityWarning,
		Source: "https://git.example.com/defs.git", Version: "0123456789ab", Message: "Synced commit 0123456789ab; 2 invalid files"}
	if got := SlackText(repo); got != ":warning: AddonRepository a/defs is Synced (InvalidFiles) · https://git.example.com/defs.git 0123456789ab\nSynced commit 0123456789ab; 2 invalid files" {
		t.Fatalf("a repository: %q", got)
	}
	// The signature a receiver checks: HMAC-SHA256 of the timestamp, a
	// dot and the body, as `printf '1764763200.{"a":1}' | openssl dgst
	// -sha256 -hmac key` computes it.
	if got := Sign([]byte("key"), "1764763200", []byte(`{"a":1}`)); got != "sha256=163aa04e37e0ac81bcb1c78b4e3bc87df6058488a086cce7174e07b7f8e3bf0e" {
		t.Fatalf("Sign: %s", got)
	}
	// Slack's markup in a message is shown, not followed.
	text := SlackText(Event{Namespace: "a", Name: "b", Phase: "Failed", Reason: "RenderFailed", Severity: SeverityWarning,
		Message: "<!channel> see <https://evil.example|Approve> & more"})
	if strings.Contains(text, "<!channel>") || !strings.Contains(text, "&lt;!channel&gt; see &lt;https://evil.example|Approve&gt; &amp; more") {
		t.Fatalf("slack markup: %q", text)
	}
	// Mattermost and Rocket.Chat take the same text as Markdown: what a
	// chart writes (the message, the source) neither pings, nor links,
	// nor loads an image, and still reads the same.
	markdown := "Failed: [Approve the rollback](https://evil.example) ![](https://evil.example/px.png) " +
		"[Docs][1] @channel @all,@here -@all _@channel x.@here é@all (@channel) [x][] [y]:\n[1]: https://evil.example/docs"
	text = SlackText(Event{Namespace: "a", Name: "b", Phase: "Failed", Reason: "RenderFailed", Severity: SeverityWarning,
		Source: "https://charts.example.com/[x](https://evil.example)@here", Version: "1.0.0", Message: markdown})
	_, untrusted, _ := strings.Cut(text, " · ")
	for _, markup := range []string{"](", "![", "][", "]:", "@channel", "@here", "@all"} {
		if strings.Contains(untrusted, markup) {
			t.Errorf("slack text keeps the markup %q: %q", markup, text)
		}
	}
	if got := strings.ReplaceAll(untrusted, "\u200b", ""); got != "https://charts.example.com/[x](https://evil.example)@here 1.0.0\n"+markdown {
		t.Errorf("slack text reads differently: %q", got)
	}
	// Where no markup can start, the text is left as it is, so that what
	// a reader copies from the chat works: an @ inside a word is no
	// mention, and a ] that no ( [ or : follows starts no link.
	plain := Event{Namespace: "a", Name: "b", Phase: "Failed", Reason: "RenderFailed", Severity: SeverityWarning,
		Source: "ssh://git@github.com/org/repo.git", Version: "0123456789ab",
		Message: "image registry.example.com/app@sha256:abc is not allowed in spec.template.spec.containers[0].image; mail ops@example.com [docs]"}
	if got, want := SlackText(plain), ":warning: Addon a/b is Failed (RenderFailed) · ssh://git@github.com/org/repo.git 0123456789ab\n"+plain.Message; got != want {
		t.Errorf("slack text changes what no chat reads as markup:\n got %q\nwant %q", got, want)
	}
	// A long message is cut between characters.
	long := strings.Repeat("é", 600)
	if got := SlackText(Event{Message: long}); !utf8.ValidString(got) || !strings.HasSuffix(got, "é...") {
		t.Fatalf("a long message cut inside a character: %q", got[len(got)-10:])
	}
}

// receiver is a webhook on loopback that answers with codes, in turn,
// and then 204.
type receiver struct {
	mu      sync.Mutex
	codes   []int
	headers []http.Header
	bodies  [][]byte
	paths   []string
	srv     *httptest.Server
}

func newReceiver(t *testing.T, codes ...int) *receiver {
	r := &receiver{codes: codes}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.headers = append(r.headers, req.Header.Clone())
		r.bodies = append(r.bodies, body)
		r.paths = append(r.paths, req.URL.RequestURI())
		code := http.StatusNoContent
		if len(r.codes) > 0 {
			code, r.codes = r.codes[0], r.codes[1:]
		}
		r.mu.Unlock()
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) receiver(t *testing.T, path string) Receiver {
	u, err := url.Parse(r.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	return Receiver{Name: "team", URL: u, Format: FormatJSON, Token: "tok", HMACKey: []byte("key")}
}

func (r *receiver) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func TestDeliverRetriesWhatMayPass(t *testing.T) {
	n := &Notifier{Client: http.DefaultClient, Backoff: 10 * time.Millisecond, Attempts: 4}
	ctx := context.Background()

	rcv := newReceiver(t, 500, 503, 204)
	r := rcv.receiver(t, "/hook")
	if err := n.Deliver(ctx, r, event); err != nil || rcv.calls() != 3 {
		t.Fatalf("after 500 and 503: %v, %d calls", err, rcv.calls())
	}
	h := rcv.headers[2]
	if h.Get("Authorization") != "Bearer tok" || h.Get("Content-Type") != "application/json" ||
		h.Get("X-Capstan-Signature") != Sign([]byte("key"), h.Get("X-Capstan-Timestamp"), rcv.bodies[2]) {
		t.Fatalf("headers: %v", h)
	}
	if ts, err := strconv.ParseInt(h.Get("X-Capstan-Timestamp"), 10, 64); err != nil || time.Since(time.Unix(ts, 0)) > time.Minute {
		t.Fatalf("timestamp %q", h.Get("X-Capstan-Timestamp"))
	}
	if d := h.Get("X-Capstan-Delivery"); len(d) != 24 || rcv.headers[0].Get("X-Capstan-Delivery") != d {
		t.Fatalf("the retries of one delivery carry different ids: %q, %q", rcv.headers[0].Get("X-Capstan-Delivery"), d)
	}

	// A refusal is not retried, and the error says what to check but not
	// the URL, a webhook's password.
	rcv = newReceiver(t, 404)
	err := n.Deliver(ctx, rcv.receiver(t, "/services/T0/B0/s3cret"), event)
	if err == nil || rcv.calls() != 1 || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "check its url and token") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a 404: %v, %d calls", err, rcv.calls())
	}
	// Failures that may pass end after Attempts.
	rcv = newReceiver(t, 500, 500, 500, 500, 500)
	if err := n.Deliver(ctx, rcv.receiver(t, "/x"), event); err == nil || rcv.calls() != 4 {
		t.Fatalf("five 500s: %v, %d calls", err, rcv.calls())
	}
	// 408 is retried.
	rcv = newReceiver(t, 408)
	if err := n.Deliver(ctx, rcv.receiver(t, "/x"), event); err != nil || rcv.calls() != 2 {
		t.Fatalf("a 408: %v, %d calls", err, rcv.calls())
	}
	// A redirect is not followed: the body and its signature stay with
	// the address the Secret names.
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		rcv = newReceiver(t, code)
		err := n.Deliver(ctx, rcv.receiver(t, "/x"), event)
		if err == nil || rcv.calls() != 1 || !strings.Contains(err.Error(), "not followed elsewhere") {
			t.Fatalf("a %d: %v, %d calls", code, err, rcv.calls())
		}
	}
	// A 429 waits what Retry-After says.
	rcv = newReceiver(t, 429)
	began := time.Now()
	if err := n.Deliver(ctx, rcv.receiver(t, "/x"), event); err != nil || rcv.calls() != 2 || time.Since(began) < time.Second {
		t.Fatalf("a 429: %v, %d calls after %s", err, rcv.calls(), time.Since(began))
	}
	// A receiver that is not there: the error quotes neither the URL,
	// with a query that Go would quote otherwise, nor the token.
	gone := newReceiver(t)
	r = gone.receiver(t, `/services/T0/B0/s3cret?k=a"b\c`)
	r.Token = "tok-0123456789"
	gone.srv.Close()
	err = n.Deliver(ctx, r, event)
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "0123456789") || !strings.Contains(err.Error(), "<team url>") {
		t.Fatalf("a receiver that is gone: %v", err)
	}
	// A cancelled context ends the retries at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	rcv = newReceiver(t, 500, 500, 500, 500)
	slow := &Notifier{Client: http.DefaultClient, Backoff: time.Hour, Attempts: 4}
	if err := slow.Deliver(cctx, rcv.receiver(t, "/x"), event); err == nil || rcv.calls() > 1 {
		t.Fatalf("cancelled: %v, %d calls", err, rcv.calls())
	}
}

func TestWaits(t *testing.T) {
	for _, c := range []struct {
		attempt int
		asked   time.Duration
		want    time.Duration
	}{
		{1, 0, time.Second}, {2, 0, 2 * time.Second}, {3, 0, 4 * time.Second}, {7, 0, maxWait}, {60, 0, maxWait},
		{1, 5 * time.Second, 5 * time.Second}, {3, time.Hour, maxWait},
	} {
		if got := wait(time.Second, c.attempt, c.asked); got != c.want {
			t.Errorf("after post %d, asked %s: %s; want %s", c.attempt, c.asked, got, c.want)
		}
	}
	// A Retry-After once does not stretch the waits after it: each is
	// worked out on its own.
	if got := wait(time.Second, 3, 0); got != 4*time.Second {
		t.Errorf("%s", got)
	}
}

// TestDoubled: the one doubling that the waits between posts and the
// pauses of a failing receiver share stops at its limit, whatever the
// count, and leaves a duration that is not positive as it is.
func TestDoubled(t *testing.T) {
	for _, c := range []struct {
		d     time.Duration
		times int
		limit time.Duration
		want  time.Duration
	}{
		{time.Second, 0, time.Minute, time.Second},
		{time.Second, 1, time.Minute, 2 * time.Second},
		{time.Second, 5, time.Minute, 32 * time.Second},
		{time.Second, 6, time.Minute, time.Minute},
		{time.Second, 1 << 40, time.Minute, time.Minute},
		{time.Hour, 0, time.Minute, time.Minute},
		{0, 1 << 40, time.Minute, 0},
		{-time.Second, 3, time.Minute, -time.Second},
	} {
		if got := doubled(c.d, c.times, c.limit); got != c.want {
			t.Errorf("%s doubled %d times, at most %s: %s; want %s", c.d, c.times, c.limit, got, c.want)
		}
	}
	// A receiver paused once before is paused twice as long as the first
	// time, and one paused many times at most maxPause.
	n := &Notifier{pauseFor: time.Minute, failing: map[string]int{}, pauses: map[string]int{"r": 1}, paused: map[string]time.Time{}}
	if got := n.pauseFailing(Receiver{Name: "r"}); got != 2*time.Minute {
		t.Errorf("second pause: %s; want 2m", got)
	}
	n.pauses["r"] = 1 << 40
	if got := n.pauseFailing(Receiver{Name: "r"}); got != maxPause {
		t.Errorf("pause after many: %s; want %s", got, maxPause)
	}
}

// TestAFailingReceiverIsPaused: a receiver that fails several events in a
// row is skipped for a while, and the others keep getting every event.
func TestAFailingReceiverIsPaused(t *testing.T) {
	bad := newReceiver(t, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500)
	good := newReceiver(t)
	b, g := bad.receiver(t, "/bad"), good.receiver(t, "/good")
	b.Name = "bad"
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(), Backoff: time.Millisecond, Attempts: 2,
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{b, g}, nil }}
	n.init()
	for range pauseAfter + 2 {
		n.deliverAll(context.Background(), event)
	}
	if bad.calls() != 2*pauseAfter || good.calls() != pauseAfter+2 {
		t.Fatalf("the failing receiver got %d posts, want %d; the other %d events, want %d", bad.calls(), 2*pauseAfter, good.calls(), pauseAfter+2)
	}
}

// TestAHangingReceiverIsTriedOncePerPause: a receiver that hangs past
// a post's Timeout is posted each event once, not Attempts times, is
// paused after pauseAfter events, and after each pause gets one post, which
// pauses it again at once for twice as long; the other receiver gets every
// event meanwhile, each held at most one Timeout by the hanging one. The
// events come spread over several pauses; the test counts posts and
// pauses, not time. Once the receiver answers again it is posted as before.
func TestAHangingReceiverIsTriedOncePerPause(t *testing.T) {
	var answers atomic.Bool
	var hangs atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		hangs.Add(1)
		if !answers.Load() {
			<-req.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hang.Close()
	fast := newReceiver(t)
	hu, err := url.Parse(hang.URL + "/hang")
	if err != nil {
		t.Fatal(err)
	}
	h, f := Receiver{Name: "hang", URL: hu, Format: FormatJSON}, fast.receiver(t, "/fast")
	f.Name = "fast"

	var mu sync.Mutex
	var pauses []string
	skipped := regexp.MustCompile(`"skippedFor"="([^"]+)"`)
	log := funcr.New(func(_, args string) {
		if m := skipped.FindStringSubmatch(args); m != nil && strings.Contains(args, `"receiver"="hang"`) {
			mu.Lock()
			pauses = append(pauses, m[1])
			mu.Unlock()
		}
	}, funcr.Options{})
	const base = 600 * time.Millisecond
	n := &Notifier{Client: http.DefaultClient, Log: log, Backoff: time.Millisecond, Timeout: 400 * time.Millisecond,
		ReceiversTTL: time.Hour, pauseFor: base,
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{h, f}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { _ = n.Start(ctx); close(done) }()

	const events = 20
	for i := 1; i <= events; i++ {
		n.Notify(event)
		// NOTE: the other receiver gets each event after the hanging
		// one's post (the receivers' order), so once it has it, the
		// hanging receiver's post and pause for it are counted. The
		// deadline only ends a test that would otherwise wait for good.
		deadline := time.Now().Add(time.Minute)
		for fast.calls() < i {
			if time.Now().After(deadline) {
				t.Fatalf("the fast receiver got %d of %d events", fast.calls(), i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Spread the events over several pauses.
		time.Sleep(150 * time.Millisecond)
	}
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	if len(pauses) < 2 {
		t.Fatalf("the hanging receiver was paused %d times; the events should span at least two pauses", len(pauses))
	}
	// One post for each of the first pauseAfter events, then one after
	// each pause but the last, whose end no event has reached.
	if got, want := int(hangs.Load()), pauseAfter+len(pauses)-1; got != want {
		t.Errorf("the hanging receiver got %d posts over %d pauses; want %d", got, len(pauses), want)
	}
	for i, p := range pauses {
		if want := min(base<<i, maxPause).String(); p != want {
			t.Errorf("pause %d is %s; want %s (%v)", i+1, p, want, pauses)
		}
	}

	// Back: one post after the pause takes the event, and the receiver
	// is posted as any other again.
	answers.Store(true)
	n.paused["hang"] = time.Now().Add(-time.Second)
	before := hangs.Load()
	n.deliverAll(context.Background(), event)
	if hangs.Load() != before+1 || n.pauses["hang"] != 0 || n.failing["hang"] != 0 {
		t.Errorf("after it answers: %d posts, %d pauses, %d failures; want 1, 0, 0", hangs.Load()-before, n.pauses["hang"], n.failing["hang"])
	}
}

// TestARateLimitedReceiverHoldsNoOther: a receiver that answers 429 with
// a Retry-After longer than a post may take is paused for that long at
// once, rather than waited for on the one worker: the other receiver
// gets every event promptly; a Retry-After of a day pauses at most
// maxPause.
func TestARateLimitedReceiverHoldsNoOther(t *testing.T) {
	limited := newReceiver(t, 429, 429, 429, 429, 429, 429, 429, 429, 429, 429, 429, 429)
	good := newReceiver(t)
	l, g := limited.receiver(t, "/limited"), good.receiver(t, "/good")
	l.Name = "limited"
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(), Backoff: time.Millisecond, Attempts: 4,
		Timeout: 500 * time.Millisecond, ReceiversTTL: time.Hour,
		Receivers: func(context.Context) ([]Receiver, error) { return []Receiver{l, g}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { _ = n.Start(ctx); close(done) }()
	start := time.Now()
	for range 3 {
		n.Notify(event)
	}
	// NOTE: waiting out the Retry-After (1 s) of each of the limited
	// receiver's retries would hold the first event alone for 3 s.
	for good.calls() < 3 {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("after %v the other receiver got %d of 3 events", time.Since(start), good.calls())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if limited.calls() != 1 {
		t.Fatalf("the rate-limited receiver got %d posts; want 1, then a pause", limited.calls())
	}
	if until := n.paused["limited"]; time.Until(until) <= 0 || time.Until(until) > time.Second {
		t.Fatalf("paused until %v; want about a second from the 429", until)
	}
	if _, ok := n.pauseBusy(l, &busyError{errors.New("429"), 24 * time.Hour}); !ok || time.Until(n.paused["limited"]) > maxPause {
		t.Fatalf("a day's Retry-After pauses until %v; want at most %v", n.paused["limited"], maxPause)
	}
}

func TestNotifierDeliversInTheBackground(t *testing.T) {
	warn := newReceiver(t)
	all := newReceiver(t)
	var reads atomic.Int32
	w, a := warn.receiver(t, "/w"), all.receiver(t, "/a")
	w.MinSeverity = SeverityWarning
	n := &Notifier{Client: http.DefaultClient, Log: logr.Discard(), ReceiversTTL: time.Hour,
		Receivers: func(context.Context) ([]Receiver, error) { reads.Add(1); return []Receiver{w, a}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { _ = n.Start(ctx); close(done) }()
	synced := event
	synced.Phase, synced.Reason, synced.Severity = "Synced", "Synced", SeverityInfo
	if !n.Notify(synced) || !n.Notify(event) {
		t.Fatal("Notify refused with room in the queue")
	}
	deadline := time.Now().Add(10 * time.Second)
	for all.calls() < 2 || warn.calls() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %d and %d deliveries", all.calls(), warn.calls())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if warn.calls() != 1 || reads.Load() != 1 {
		t.Fatalf("the warning receiver got %d events; the receivers were read %d times", warn.calls(), reads.Load())
	}
	cancel()
	<-done

	// With nobody delivering, a full queue and a full overflow drop and
	// say so, never wait.
	idle := &Notifier{}
	for i := range QueueSize + overflowRoom {
		if !idle.Notify(event) {
			t.Fatalf("event %d dropped", i)
		}
	}
	if idle.Notify(event) {
		t.Fatal("a full queue took one more")
	}
	var nilNotifier *Notifier
	if nilNotifier.Notify(event) {
		t.Fatal("a nil Notifier took an event")
	}
}

func TestFromSecrets(t *testing.T) {
	good := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "team"}, Data: map[string][]byte{"url": []byte("https://h/x")}}
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "bad"}, Data: map[string][]byte{"url": []byte("ftp://h/s3cret")}}
	c := fake.NewClientBuilder().WithObjects(good, bad).Build()
	rs, err := FromSecrets(c, "capstan-system", []string{"team", "bad", "gone"})(context.Background())
	if len(rs) != 1 || rs[0].Name != "capstan-system/team" {
		t.Fatalf("receivers %+v", rs)
	}
	if err == nil || !strings.Contains(err.Error(), "capstan-system/gone does not exist") || !strings.Contains(err.Error(), "capstan-system/bad: key url") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error: %v", err)
	}
}

// TestWhatAReceiverWants: severity, namespaces and the Addon's labels.
func TestWhatAReceiverWants(t *testing.T) {
	r, err := ReceiverFromSecret("team", map[string][]byte{"url": []byte("https://h/x"),
		"namespaces": []byte("tenant-a,tenant-b\ntenant-c"), "selector": []byte("team=web,tier!=test")})
	if err != nil || !slices.Equal(r.Namespaces, []string{"tenant-a", "tenant-b", "tenant-c"}) || r.Selector == nil {
		t.Fatalf("%+v, %v", r, err)
	}
	at := func(ns string, lbls map[string]string, sev Severity) Event {
		return Event{Namespace: ns, Name: "x", Labels: lbls, Severity: sev}
	}
	web := map[string]string{"team": "web"}
	for _, c := range []struct {
		e    Event
		want bool
	}{
		{at("tenant-a", web, SeverityInfo), true},
		{at("tenant-c", web, SeverityWarning), true},
		{at("capstan-system", web, SeverityWarning), false},
		{at("tenant-a", map[string]string{"team": "db"}, SeverityWarning), false},
		{at("tenant-a", map[string]string{"team": "web", "tier": "test"}, SeverityWarning), false},
		{at("tenant-a", nil, SeverityWarning), false},
	} {
		if got := r.Wants(c.e); got != c.want {
			t.Errorf("%+v: %v", c.e, got)
		}
	}
	all := Receiver{MinSeverity: SeverityWarning}
	if all.Wants(at("any", nil, SeverityInfo)) || !all.Wants(at("any", nil, SeverityWarning)) {
		t.Error("a receiver of warnings from everywhere")
	}
}

// TestASelectorAloneReachesNoTenant: a receiver with a selector and no
// namespaces takes the labelled objects of the trusted namespaces only,
// since a tenant labels its own Addons as it likes; to reach tenants, the
// receiver names their namespaces.
func TestASelectorAloneReachesNoTenant(t *testing.T) {
	sel, err := ReceiverFromSecret("web", map[string][]byte{"url": []byte("https://h/x"), "selector": []byte("team=web")})
	if err != nil {
		t.Fatal(err)
	}
	sel.Trusted = []string{"capstan-system", "platform"}
	named := sel
	named.Namespaces = []string{"tenant-a"}
	untrusted := sel
	untrusted.Trusted = nil
	plain := Receiver{Trusted: sel.Trusted}
	web, db := map[string]string{"team": "web"}, map[string]string{"team": "db"}
	for _, c := range []struct {
		name string
		r    Receiver
		ns   string
		lbls map[string]string
		want bool
	}{
		{"selector, trusted namespace", sel, "capstan-system", web, true},
		{"selector, another trusted namespace", sel, "platform", web, true},
		{"selector, trusted namespace, other label", sel, "capstan-system", db, false},
		{"selector, a tenant that labels itself", sel, "tenant-a", web, false},
		{"selector, no trusted namespace known", untrusted, "capstan-system", web, false},
		{"selector and the tenant's namespace", named, "tenant-a", web, true},
		{"selector and the tenant's namespace, other label", named, "tenant-a", db, false},
		{"selector and a tenant's namespace, another tenant", named, "tenant-b", web, false},
		{"selector and a tenant's namespace, trusted namespace", named, "capstan-system", web, false},
		{"no selector, a tenant", plain, "tenant-a", web, true},
	} {
		e := Event{Kind: "Addon", Namespace: c.ns, Name: "x", Labels: c.lbls, Severity: SeverityWarning}
		if got := c.r.Wants(e); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// FromSecrets trusts the controller's namespace; the Notifier's
	// TrustedNamespaces replace it.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"},
		Data: map[string][]byte{"url": []byte("https://h/x"), "selector": []byte("team=web")}}
	read := FromSecrets(fake.NewClientBuilder().WithObjects(secret).Build(), "capstan-system", []string{"web"})
	rs, err := read(context.Background())
	if err != nil || len(rs) != 1 || !slices.Equal(rs[0].Trusted, []string{"capstan-system"}) {
		t.Fatalf("%+v, %v", rs, err)
	}
	n := &Notifier{Receivers: read, TrustedNamespaces: []string{"platform"}, Log: logr.Discard()}
	n.init()
	if rs := n.receivers(context.Background()); len(rs) != 1 || !slices.Equal(rs[0].Trusted, []string{"platform"}) {
		t.Fatalf("with TrustedNamespaces: %+v", rs)
	}
}
