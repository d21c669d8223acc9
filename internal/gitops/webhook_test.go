package gitops

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestVerify(t *testing.T) {
	const body = `{"ref":"refs/heads/main"}`
	good := sign("s3cret", body)
	bad := sign("other", body)
	cases := []struct {
		name    string
		headers map[string]string
		secret  string
		ok      bool
	}{
		{"github good", map[string]string{"X-Hub-Signature-256": "sha256=" + good}, "s3cret", true},
		{"github bad", map[string]string{"X-Hub-Signature-256": "sha256=" + bad}, "s3cret", false},
		{"github without prefix", map[string]string{"X-Hub-Signature-256": good}, "s3cret", false},
		{"github not hex", map[string]string{"X-Hub-Signature-256": "sha256=zz"}, "s3cret", false},
		{"gitea good", map[string]string{"X-Gitea-Signature": good}, "s3cret", true},
		{"gitea bad", map[string]string{"X-Gitea-Signature": bad}, "s3cret", false},
		{"forgejo good", map[string]string{"X-Forgejo-Signature": good}, "s3cret", true},
		{"gitlab good", map[string]string{"X-Gitlab-Token": "s3cret"}, "s3cret", true},
		{"gitlab bad", map[string]string{"X-Gitlab-Token": "s3cre"}, "s3cret", false},
		{"no signature", map[string]string{}, "s3cret", false},
		{"no secret configured", map[string]string{"X-Gitlab-Token": ""}, "", false},
		{"no secret but a signature of the empty key", map[string]string{"X-Hub-Signature-256": "sha256=" + sign("", body)}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			err := Verify(h, []byte(body), []byte(tc.secret))
			if (err == nil) != tc.ok {
				t.Fatalf("Verify = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && strings.Contains(err.Error(), tc.secret) && tc.secret != "" {
				t.Fatalf("the error carries the secret: %v", err)
			}
		})
	}
}

func TestParsePush(t *testing.T) {
	cases := []struct{ body, want string }{
		{`{"ref":"refs/heads/main","before":"0","commits":[]}`, "refs/heads/main"},
		{`{"object_kind":"push","ref":"refs/heads/dev"}`, "refs/heads/dev"},
		{`{"ref":"refs/tags/v1"}`, "refs/tags/v1"},
		{`{"zen":"ping"}`, ""},
		{`[1,2]`, ""},
		{`not json`, ""},
	}
	for _, tc := range cases {
		got, err := ParsePush([]byte(tc.body))
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("ParsePush(%s) = %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
}

// FuzzParsePush feeds any body to the push event parser: it returns a ref
// under refs/ or an error, never both.
func FuzzParsePush(f *testing.F) {
	f.Add([]byte(`{"ref":"refs/heads/main"}`))
	f.Add([]byte(`{"ref":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ref, err := ParsePush(body)
		if err == nil && !strings.HasPrefix(ref, "refs/") {
			t.Fatalf("accepted ref %q", ref)
		}
		if err != nil && ref != "" {
			t.Fatalf("ref %q with error %v", ref, err)
		}
	})
}

// FuzzVerify feeds any signature header, body and secret to the webhook
// check. It accepts a request only when the header holds the body's
// HMAC-SHA256 under the secret (or, for GitLab, the secret itself).
func FuzzVerify(f *testing.F) {
	body := []byte(`{"ref":"refs/heads/main"}`)
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(body)
	sig := hex.EncodeToString(mac.Sum(nil))
	headers := []string{"X-Hub-Signature-256", "X-Gitea-Signature", "X-Forgejo-Signature", "X-Gitlab-Token", "X-Other"}
	for i := range headers {
		v := sig
		switch i {
		case 0:
			v = "sha256=" + sig
		case 3:
			v = "s3cret"
		}
		f.Add(uint8(i), v, body, []byte("s3cret"))
		f.Add(uint8(i), v, body, []byte{})
		f.Add(uint8(i), v+" ", append(body, ' '), []byte("s3cret"))
	}
	f.Fuzz(func(t *testing.T, which uint8, value string, body, secret []byte) {
		h := http.Header{}
		name := headers[int(which)%len(headers)]
		h.Set(name, value)
		if Verify(h, body, secret) != nil {
			return
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		want := mac.Sum(nil)
		got := h.Get(name)
		switch name {
		case "X-Gitlab-Token":
			if got != string(secret) {
				t.Fatalf("accepted the GitLab token %q for the secret %q", got, secret)
			}
		case "X-Hub-Signature-256":
			got = strings.TrimPrefix(got, "sha256=")
			fallthrough
		default:
			sum, err := hex.DecodeString(strings.TrimSpace(got))
			if err != nil || !hmac.Equal(sum, want) {
				t.Fatalf("accepted %s: %q for the body %q", name, h.Get(name), body)
			}
		}
		if len(secret) == 0 {
			t.Fatal("accepted a request with no secret")
		}
	})
}

// hookReader answers the webhook's reads of one AddonRepository, hooks/gitops
// on branch main, and its webhook Secret, whose token is s3cret; getErr,
// when set, is every read's answer instead, and secretErr the Secret's.
type hookReader struct{ getErr, secretErr error }

func (h hookReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if h.getErr != nil {
		return h.getErr
	}
	if _, ok := obj.(*corev1.Secret); ok && h.secretErr != nil {
		return h.secretErr
	}
	switch dst := obj.(type) {
	case *capstanv1.AddonRepository:
		if key == (client.ObjectKey{Namespace: "hooks", Name: "gitops"}) {
			*dst = capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: capstanv1.AddonRepositorySpec{URL: "https://git.example.com/gitops.git", Branch: "main",
					WebhookSecretRef: &capstanv1.LocalObjectReference{Name: "hook"}}}
			return nil
		}
	case *corev1.Secret:
		if key == (client.ObjectKey{Namespace: "hooks", Name: "hook"}) {
			*dst = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Data: map[string][]byte{WebhookSecretKey: []byte("s3cret")}}
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

func (hookReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

// triggers records the syncs a webhook queues.
type triggers struct {
	mu   sync.Mutex
	keys []types.NamespacedName
}

func (t *triggers) Trigger(_ context.Context, key types.NamespacedName) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.keys = append(t.keys, key)
	return nil
}

func (t *triggers) queued() []types.NamespacedName {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]types.NamespacedName(nil), t.keys...)
}

// post sends a webhook request to the repository hooks/gitops and returns
// the answer's status, body and Retry-After.
func post(t *testing.T, hook http.Handler, contentType, body string, headers map[string]string) (int, string, string) {
	t.Helper()
	srv := httptest.NewServer(hook)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/git/hooks/gitops", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got), resp.Header.Get("Retry-After")
}

// TestWebhookReadsAFormPush: GitHub's default content type, which Gitea
// and Forgejo offer too, sends the push event as the form field payload.
// GitHub signs the form as sent; Gitea and Forgejo sign the JSON event
// alone, in every header they send. Either queues a sync as a JSON body
// does; a form with no payload is a bad request that queues nothing.
func TestWebhookReadsAFormPush(t *testing.T) {
	event := `{"ref":"refs/heads/main","before":"0","commits":[]}`
	form := url.Values{"payload": {event}}.Encode()
	for _, tc := range []struct {
		name, contentType, body, signed, header, event string
	}{
		{"github form", "application/x-www-form-urlencoded", form, form, "X-Hub-Signature-256", "push"},
		{"github form with a charset", "application/x-www-form-urlencoded; charset=utf-8", form, form, "X-Hub-Signature-256", "push"},
		{"gitea form", "application/x-www-form-urlencoded", form, event, "X-Gitea-Signature", "push"},
		{"gitea form, its X-Hub-Signature-256", "application/x-www-form-urlencoded", form, event, "X-Hub-Signature-256", "push"},
		{"forgejo form", "application/x-www-form-urlencoded", form, event, "X-Forgejo-Signature", "push"},
		{"github json", "application/json", event, event, "X-Hub-Signature-256", "push"},
		{"gitea json", "application/json", event, event, "X-Gitea-Signature", "push"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := sign("s3cret", tc.signed)
			if tc.header == "X-Hub-Signature-256" {
				sig = "sha256=" + sig
			}
			syncer := &triggers{}
			code, body, _ := post(t, &Webhook{Client: hookReader{}, Syncer: syncer}, tc.contentType, tc.body,
				map[string]string{tc.header: sig, "X-GitHub-Event": tc.event, "X-Gitea-Event": tc.event})
			if code != http.StatusAccepted || !strings.Contains(body, "queued") {
				t.Fatalf("a signed push: %d %q; want 202 queued", code, body)
			}
			if got := syncer.queued(); len(got) != 1 || got[0] != (types.NamespacedName{Namespace: "hooks", Name: "gitops"}) {
				t.Fatalf("queued %v; want one sync of hooks/gitops", got)
			}
		})
	}
	for _, tc := range []struct{ name, contentType, body, sig string }{
		{"a form whose payload is signed with another secret", "application/x-www-form-urlencoded", form, sign("other", event)},
		{"a form signed over another event", "application/x-www-form-urlencoded", form, sign("s3cret", `{"ref":"refs/heads/main"}`)},
		{"a json body signed over the form", "application/json", event, sign("s3cret", form)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			syncer := &triggers{}
			code, msg, _ := post(t, &Webhook{Client: hookReader{}, Syncer: syncer}, tc.contentType, tc.body,
				map[string]string{"X-Gitea-Signature": tc.sig, "X-Gitea-Event": "push"})
			if code != http.StatusUnauthorized || len(syncer.queued()) != 0 {
				t.Fatalf("%d %q, queued %v; want 401 and nothing queued", code, msg, syncer.queued())
			}
		})
	}
	t.Run("a form without payload", func(t *testing.T) {
		body := url.Values{"other": {event}}.Encode()
		syncer := &triggers{}
		code, msg, _ := post(t, &Webhook{Client: hookReader{}, Syncer: syncer}, "application/x-www-form-urlencoded", body,
			map[string]string{"X-Hub-Signature-256": "sha256=" + sign("s3cret", body), "X-GitHub-Event": "push"})
		if code != http.StatusBadRequest || len(syncer.queued()) != 0 {
			t.Fatalf("%d %q, queued %v; want 400 and nothing queued", code, msg, syncer.queued())
		}
	})
}

// strictReader is a hookReader that refuses, as client-go does before any
// request, a namespace or name the API server cannot hold, with an error
// that is not NotFound.
type strictReader struct{ hookReader }

func (s strictReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if strings.ContainsAny(key.Namespace+key.Name, "%/ ") {
		return fmt.Errorf("invalid resource name %q", key.Name)
	}
	return s.hookReader.Get(ctx, key, obj, opts...)
}

// TestWebhookRefusesANameNoRepositoryHas: a path whose namespace or name
// no object can have (a%25b is a%b once unescaped) is a repository that is
// not there: 401, as for any other, nothing read or queued, and no 503
// that blames the API server.
func TestWebhookRefusesANameNoRepositoryHas(t *testing.T) {
	const event = `{"ref":"refs/heads/main"}`
	for _, path := range []string{"/hooks/git/hooks/a%25b", "/hooks/git/a%25b/gitops", "/hooks/git/hooks/A", "/hooks/git/hooks/a%20b", "/hooks/git/Hooks/gitops"} {
		t.Run(path, func(t *testing.T) {
			syncer := &triggers{}
			srv := httptest.NewServer(&Webhook{Client: strictReader{}, Syncer: syncer})
			defer srv.Close()
			req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(event))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Hub-Signature-256", "sha256="+sign("s3cret", event))
			req.Header.Set("X-GitHub-Event", "push")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), errUnverified) || len(syncer.queued()) != 0 {
				t.Fatalf("%d %q, queued %v; want 401 as for a repository that is not there", resp.StatusCode, body, syncer.queued())
			}
		})
	}
}

// TestWebhookSaysTheAPIServerFailed: a signed push whose repository or
// webhook Secret the API server does not give (a timeout, a 503) cannot be
// checked. It gets 503 with Retry-After, not the 401 of a bad signature,
// and queues nothing; a repository that is not there is still a 401.
func TestWebhookSaysTheAPIServerFailed(t *testing.T) {
	const event = `{"ref":"refs/heads/main"}`
	headers := map[string]string{"X-Hub-Signature-256": "sha256=" + sign("s3cret", event), "X-GitHub-Event": "push"}
	timeout := apierrors.NewServerTimeout(schema.GroupResource{Group: "capstan.dev", Resource: "addonrepositories"}, "get", 1)
	for _, tc := range []struct {
		name   string
		reader hookReader
	}{
		{"the repository's read times out", hookReader{getErr: timeout}},
		{"the Secret's read is refused", hookReader{secretErr: apierrors.NewServiceUnavailable("etcd is not answering")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			syncer := &triggers{}
			code, body, retry := post(t, &Webhook{Client: tc.reader, Syncer: syncer}, "application/json", event, headers)
			if code != http.StatusServiceUnavailable || retry == "" || strings.Contains(body, "signature") {
				t.Fatalf("%d %q, Retry-After %q; want 503 with Retry-After, not a signature's fault", code, body, retry)
			}
			if got := syncer.queued(); len(got) != 0 {
				t.Fatalf("queued %v on a push nobody checked", got)
			}
		})
	}
	t.Run("no such repository", func(t *testing.T) {
		srv := httptest.NewServer(&Webhook{Client: hookReader{}, Syncer: &triggers{}})
		defer srv.Close()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/git/hooks/nothing", strings.NewReader(event))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a push for a repository that is not there: %d; want 401", resp.StatusCode)
		}
	})
}

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	left int
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), b.left)
	b.left -= n
	b.read.Add(int64(n))
	return n, nil
}

// TestWebhookRefusesAnUnsignedPushUnread: a request with no signature is
// answered 401 before a byte of its body is read.
func TestWebhookRefusesAnUnsignedPushUnread(t *testing.T) {
	body := &countingBody{left: MaxWebhookBody}
	req := httptest.NewRequest(http.MethodPost, "/hooks/git/hooks/gitops", body)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	(&Webhook{Client: hookReader{}, Syncer: &triggers{}}).ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || body.read.Load() != 0 {
		t.Fatalf("%d, %d bytes of the body read; want 401 and none read", rec.Code, body.read.Load())
	}
}

// blockingReader counts the webhook's reads and holds each until release
// is closed.
type blockingReader struct {
	hookReader
	reads   atomic.Int64
	release chan struct{}
}

func (b *blockingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	b.reads.Add(1)
	<-b.release
	return b.hookReader.Get(ctx, key, obj, opts...)
}

// webhookAnswer sends one push with a bad GitLab token from the client at
// addr, without a network, and returns the answer.
func webhookAnswer(hook http.Handler, addr string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/hooks/git/hooks/gitops", strings.NewReader(`{"ref":"refs/heads/main"}`))
	req.RemoteAddr = addr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Token", "guess")
	req.Header.Set("X-Gitlab-Event", "Push Hook")
	rec := httptest.NewRecorder()
	hook.ServeHTTP(rec, req)
	return rec
}

// TestWebhookBoundsPushesInFlight: any value of X-Gitlab-Token gets a push
// checked against the API server, so at most maxWebhooksInFlight are
// checked at once; the others get 429 with Retry-After and query nothing.
func TestWebhookBoundsPushesInFlight(t *testing.T) {
	reader := &blockingReader{release: make(chan struct{})}
	hook := &Webhook{Client: reader, Syncer: &triggers{}}
	const n = 100
	answers := make(chan *httptest.ResponseRecorder, n)
	for i := range n {
		go func() { answers <- webhookAnswer(hook, fmt.Sprintf("127.0.%d.%d:40000", i/250, i%250+1)) }()
	}
	for range n - maxWebhooksInFlight {
		var rec *httptest.ResponseRecorder
		select {
		case rec = <-answers:
		case <-time.After(10 * time.Second):
			close(reader.release)
			t.Fatalf("%d pushes are checked at once; want %d, and the others answered", reader.reads.Load(), maxWebhooksInFlight)
		}
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%d %q, Retry-After %q; want 429 with Retry-After", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"))
		}
	}
	if got := reader.reads.Load(); got != maxWebhooksInFlight {
		t.Errorf("%d reads in flight; want %d", got, maxWebhooksInFlight)
	}
	close(reader.release)
	for range maxWebhooksInFlight {
		if rec := <-answers; rec.Code != http.StatusUnauthorized {
			t.Errorf("a checked push with a bad token: %d; want 401", rec.Code)
		}
	}
	if rec := webhookAnswer(hook, "127.0.9.1:40000"); rec.Code != http.StatusUnauthorized {
		t.Errorf("a push once the others are done: %d; want 401", rec.Code)
	}
}

// stalledBody is a request body that never arrives: its first Read closes
// reading, and every Read waits until done is closed, then fails.
type stalledBody struct {
	once    sync.Once
	reading chan struct{}
	done    chan struct{}
}

func (b *stalledBody) Read([]byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	<-b.done
	return 0, io.ErrUnexpectedEOF
}

// stallBodies sends hook n pushes with any X-Gitlab-Token, each from an
// address of its own, whose bodies stall once their read began, until
// done is closed; answers gets each one's status code then.
func stallBodies(t *testing.T, hook *Webhook, n int) (done chan struct{}, answers chan int) {
	t.Helper()
	done, answers = make(chan struct{}), make(chan int, n)
	for i := range n {
		body := &stalledBody{reading: make(chan struct{}), done: done}
		req := httptest.NewRequest(http.MethodPost, "/hooks/git/hooks/gitops", body)
		req.RemoteAddr = fmt.Sprintf("127.0.%d.%d:40000", 1+i/200, 1+i%200)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gitlab-Token", "guess")
		go func() {
			rec := httptest.NewRecorder()
			hook.ServeHTTP(rec, req)
			answers <- rec.Code
		}()
		select {
		case <-body.reading:
		case <-time.After(10 * time.Second):
			close(done)
			t.Fatal("the webhook does not read a signed push's body")
		}
	}
	return done, answers
}

// signedPush sends hook a push signed with the repository's token.
func signedPush(hook *Webhook) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/hooks/git/hooks/gitops", strings.NewReader(`{"ref":"refs/heads/main"}`))
	req.RemoteAddr = "127.0.9.1:40000"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Token", "s3cret")
	req.Header.Set("X-Gitlab-Event", "Push Hook")
	rec := httptest.NewRecorder()
	hook.ServeHTTP(rec, req)
	return rec
}

// TestWebhookReadsTheBodyBeforeTakingASlot: a body still being sent holds
// none of the maxWebhooksInFlight checks, so callers who send theirs
// slowly, with any X-Gitlab-Token, do not turn the git host's pushes away.
func TestWebhookReadsTheBodyBeforeTakingASlot(t *testing.T) {
	syncer := &triggers{}
	hook := &Webhook{Client: hookReader{}, Syncer: syncer}
	done, answers := stallBodies(t, hook, maxWebhooksInFlight)
	rec := signedPush(hook)
	close(done)
	if rec.Code != http.StatusAccepted || len(syncer.queued()) != 1 {
		t.Errorf("a signed push while %d bodies stall: %d %q; want 202 and a sync queued", maxWebhooksInFlight, rec.Code, rec.Body.String())
	}
	for range maxWebhooksInFlight {
		if code := <-answers; code != http.StatusBadRequest {
			t.Errorf("a body that breaks off: %d; want 400", code)
		}
	}
}

// TestWebhookBoundsTheBodiesRead: bodies being read are bounded in all,
// from however many addresses they come, so that their memory is: one
// more than maxWebhookBodyReads is answered 429 without being read, and
// once the reads end, a push is read and checked again.
func TestWebhookBoundsTheBodiesRead(t *testing.T) {
	syncer := &triggers{}
	hook := &Webhook{Client: hookReader{}, Syncer: syncer}
	done, answers := stallBodies(t, hook, maxWebhookBodyReads)
	if rec := signedPush(hook); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || len(syncer.queued()) != 0 {
		t.Errorf("a push while %d bodies are read: %d %q; want 429 with Retry-After, nothing queued", maxWebhookBodyReads, rec.Code, rec.Body.String())
	}
	close(done)
	for range maxWebhookBodyReads {
		<-answers
	}
	if rec := signedPush(hook); rec.Code != http.StatusAccepted || len(syncer.queued()) != 1 {
		t.Errorf("a push once the reads ended: %d %q; want 202 and a sync queued", rec.Code, rec.Body.String())
	}
}

// slowReader is a hookReader whose reads take delay, and then fail as
// the API server would if the request's context was cancelled meanwhile.
type slowReader struct {
	hookReader
	delay time.Duration
}

func (s slowReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	time.Sleep(s.delay)
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.hookReader.Get(ctx, key, obj, opts...)
}

// TestWebhookBoundsTheBodyRead: on a real server, a body that does not
// arrive within webhookBodyTimeout is answered 408, however long the
// server's own read timeout; and that deadline, once the body is read,
// does not cut the checks that follow.
func TestWebhookBoundsTheBodyRead(t *testing.T) {
	syncer := &triggers{}
	srv := httptest.NewServer(&Webhook{Client: slowReader{delay: webhookBodyTimeout / 2}, Syncer: syncer})
	t.Cleanup(srv.Close)

	t.Run("a stalled body", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(4 * webhookBodyTimeout)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := io.WriteString(conn, "POST /hooks/git/hooks/gitops HTTP/1.1\r\nHost: capstan\r\n"+
			"Content-Type: application/json\r\nX-Gitlab-Token: guess\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a stalled body within %s: %v", 4*webhookBodyTimeout, err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(msg), "did not arrive within") {
			t.Fatalf("a stalled body: %d %q; want 408", resp.StatusCode, msg)
		}
		if waited := time.Since(start); waited < webhookBodyTimeout-time.Second {
			t.Fatalf("answered after %s; want about %s", waited, webhookBodyTimeout)
		}
	})
	t.Run("a check past the body's deadline", func(t *testing.T) {
		t.Parallel()
		event := `{"ref":"refs/heads/main"}`
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/git/hooks/gitops", strings.NewReader(event))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gitlab-Token", "s3cret")
		req.Header.Set("X-Gitlab-Event", "Push Hook")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusAccepted || len(syncer.queued()) != 1 {
			t.Fatalf("a push whose two reads take %s: %d %q; want 202 and a sync queued", webhookBodyTimeout, resp.StatusCode, msg)
		}
	})
}

// TestWebhookBoundsOneClient: one address gets webhookClientBurst pushes
// checked at once, then webhookClientRate a second; the others get 429 with
// Retry-After and read nothing. Another address is not held back by it.
func TestWebhookBoundsOneClient(t *testing.T) {
	reader := &blockingReader{release: make(chan struct{})}
	close(reader.release)
	hook := &Webhook{Client: reader, Syncer: &triggers{}}
	start := time.Now()
	refused := 0
	for range 3 * webhookClientBurst {
		rec := webhookAnswer(hook, "[::1]:40000")
		if rec.Code == http.StatusTooManyRequests {
			refused++
			if rec.Header().Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
	}
	checked := 3*webhookClientBurst - refused
	allowed := webhookClientBurst + int(time.Since(start).Seconds()*webhookClientRate) + 1
	if refused == 0 || checked > allowed {
		t.Fatalf("%d of %d pushes checked from one address; want at most %d", checked, 3*webhookClientBurst, allowed)
	}
	if got := int(reader.reads.Load()); got != 2*checked {
		t.Fatalf("%d reads for %d pushes checked; want two each (the repository and its webhook Secret)", got, checked)
	}
	if rec := webhookAnswer(hook, "127.0.0.1:40000"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("another address: %d; want 401", rec.Code)
	}
}
