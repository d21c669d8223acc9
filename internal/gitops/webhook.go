package gitops

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/clientlimit"
)

// WebhookPattern is where the webhook handler answers: one URL per
// AddonRepository, given to the git host as the push webhook's URL.
const WebhookPattern = "POST /hooks/git/{namespace}/{name}"

// WebhookSecretKey is the key of the webhook Secret that holds the secret.
const WebhookSecretKey = "token"

// MaxWebhookBody caps the body of a push webhook. Pushes with many commits
// are a few hundred KiB at most.
const MaxWebhookBody = 1 << 20

// Triggerer starts a sync of one repository; the AddonRepository controller
// (controller.AddonRepositoryReconciler) is one. It returns an error for a
// repository it does not sync, an *OtherShardError for one of another
// controller shard.
type Triggerer interface {
	Trigger(ctx context.Context, key types.NamespacedName) error
}

// OtherShardError is a Triggerer's answer for a repository that its
// controller's shard (--watch-label-selector) does not select. That
// syncer's cache does not hold the repository, so a sync queued there
// would find nothing and be dropped, while the caller was told it was
// queued.
type OtherShardError struct {
	// Key is the repository.
	Key types.NamespacedName
	// Shard is the repository's ShardLabel; "" for none.
	Shard string
	// Selector is the controller's --watch-label-selector.
	Selector string
}

func (e *OtherShardError) Error() string {
	shard := "no shard (no " + ShardLabel + " label)"
	if e.Shard != "" {
		shard = fmt.Sprintf("shard %q (%s=%s)", e.Shard, ShardLabel, e.Shard)
	}
	return fmt.Sprintf("AddonRepository %s is in %s, which this controller (--watch-label-selector %s) does not sync: "+
		"send its push webhook to the controller of that shard", e.Key, shard, e.Selector)
}

// Webhook is the push webhook of GitHub, GitLab, Gitea and Forgejo. A push
// with a valid signature to the repository's branch triggers a sync; a bad or
// missing signature gets 401 and triggers nothing.
type Webhook struct {
	// Client reads AddonRepositories and their webhook Secrets. Give it the
	// manager's API reader, so that no cache of every Secret is started.
	Client client.Reader
	// Syncer is triggered by valid pushes.
	Syncer Triggerer

	once    sync.Once
	mux     *http.ServeMux
	slots   chan struct{}
	reads   chan struct{}
	clients *clientlimit.Limiter
}

// ServeHTTP implements http.Handler. Mount it on the controller's server so
// that WebhookPattern's path reaches it unchanged.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(func() {
		h.slots = make(chan struct{}, maxWebhooksInFlight)
		h.reads = make(chan struct{}, maxWebhookBodyReads)
		h.clients = clientlimit.New(webhookClientRate, webhookClientBurst, maxWebhookClients)
		h.mux = http.NewServeMux()
		h.mux.HandleFunc(WebhookPattern, h.push)
	})
	h.mux.ServeHTTP(w, r)
}

func (h *Webhook) push(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	logger := log.FromContext(ctx).WithValues("addonRepository", key.String())

	// NOTE: before any read, of the body too: a request with no signature
	// at all costs neither the controller's memory nor the API server.
	if !signed(r.Header) {
		http.Error(w, "unauthorized: the request has no signature: set the webhook's secret in the git host", http.StatusUnauthorized)
		return
	}
	// NOTE: a name the API server cannot hold (a%25b in the path is a%b)
	// is refused by client-go before any request, with an error that is
	// not NotFound; read, it would be taken for the API server failing.
	// It is a repository that is not there, and gets the same answer.
	if errs := append(validation.IsDNS1123Label(key.Namespace), validation.IsDNS1123Subdomain(key.Name)...); len(errs) > 0 {
		logger.Info("Refused a push webhook", "reason", "the path names no namespace and AddonRepository: "+strings.Join(errs, "; "))
		http.Error(w, "unauthorized: "+errUnverified, http.StatusUnauthorized)
		return
	}
	// NOTE: any value of a signature header gets this far, so the body's
	// read and the uncached reads below are bounded per client and in all.
	if ok, wait := h.clients.Allow(clientlimit.Of(r), time.Now()); !ok {
		tooManyWebhooks(w, fmt.Sprintf("this address sent more than %d at once or %d a second", webhookClientBurst, webhookClientRate), wait)
		return
	}
	// NOTE: the body is read before a slot is taken, under a deadline of its
	// own, so the slots bound only the checks against the API server: a
	// caller that sends its body slowly would otherwise hold a slot until
	// the server's read timeout, and a few of them every real push. A
	// server that cannot set the deadline (http.ErrNotSupported) still has
	// its own read timeout, and the read holds no slot either way. The
	// reads have a bound of their own, on the memory they hold.
	select {
	case h.reads <- struct{}{}:
	default:
		tooManyWebhooks(w, fmt.Sprintf("the controller reads %d bodies at a time", maxWebhookBodyReads), time.Second)
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(webhookBodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	<-h.reads
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			http.Error(w, fmt.Sprintf("the body is larger than %d bytes", MaxWebhookBody), http.StatusRequestEntityTooLarge)
		case errors.Is(err, os.ErrDeadlineExceeded):
			http.Error(w, fmt.Sprintf("the body did not arrive within %s; nothing was queued: deliver the push again", webhookBodyTimeout), http.StatusRequestTimeout)
		default:
			http.Error(w, "cannot read the body", http.StatusBadRequest)
		}
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		tooManyWebhooks(w, fmt.Sprintf("the controller checks %d at a time", maxWebhooksInFlight), time.Second)
		return
	}

	repo := &capstanv1.AddonRepository{}
	secret := &corev1.Secret{}
	var token []byte
	switch err := h.Client.Get(ctx, key, repo); {
	case err != nil && !apierrors.IsNotFound(err):
		apiUnavailable(w, logger, "the AddonRepository", err)
		return
	case err == nil && repo.Spec.WebhookSecretRef != nil:
		sk := types.NamespacedName{Namespace: key.Namespace, Name: repo.Spec.WebhookSecretRef.Name}
		switch err := h.Client.Get(ctx, sk, secret); {
		case err == nil:
			token = secret.Data[WebhookSecretKey]
		case apierrors.IsNotFound(err):
			logger.Info("Cannot read the webhook Secret", "secret", sk.String(), "error", err.Error())
		default:
			apiUnavailable(w, logger, "the webhook Secret "+sk.String(), err)
			return
		}
	}
	// NOTE: a missing repository, a missing Secret and a bad signature get
	// the same answer, so the endpoint tells an unauthenticated caller nothing.
	payload, payloadErr := signedPayload(r.Header, body, token)
	var unverified *unverifiedError
	if errors.As(payloadErr, &unverified) {
		logger.Info("Refused a push webhook", "reason", unverified.Error())
		http.Error(w, "unauthorized: "+errUnverified, http.StatusUnauthorized)
		return
	}

	switch event := eventName(r.Header); event {
	case "ping":
		fmt.Fprintln(w, "pong")
		return
	case "", "push", "Push Hook":
	default:
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "ignored: the event %q is not a push\n", event)
		return
	}
	if payloadErr != nil {
		http.Error(w, payloadErr.Error(), http.StatusBadRequest)
		return
	}
	ref, err := ParsePush(payload)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	branch := repo.Spec.Branch
	if branch == "" {
		branch = repo.Status.Branch
	}
	if branch != "" && ref != "refs/heads/"+branch {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "ignored: the push is to %s, and the repository follows refs/heads/%s\n", ref, branch)
		return
	}
	if err := h.Syncer.Trigger(ctx, key); err != nil {
		// NOTE: a repository of another shard is a 409, not a 202: the git
		// host shows the delivery failed, and says where to send it.
		var other *OtherShardError
		if errors.As(err, &other) {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "sync of %s queued\n", key)
}

// apiUnavailable answers a push whose signature cannot be checked, as the
// API server did not give the repository or its webhook Secret (a timeout,
// a 503): 503 with Retry-After, and the log says what failed.
//
// NOTE: not the 401 of a bad signature, which would blame the git host's
// secret for the API server's trouble and hide it from the log; and not a
// queued sync, which a request whose signature nobody checked must never
// start. The answer depends on the API server failing, which no caller
// controls; the repository's read fails alike whether it exists or not.
func apiUnavailable(w http.ResponseWriter, logger logr.Logger, what string, err error) {
	logger.Info("Cannot check a push webhook's signature: the API server did not answer", "read", what, "error", err.Error())
	w.Header().Set("Retry-After", strconv.Itoa(int(webhookRetryAfter/time.Second)))
	http.Error(w, "the controller cannot read the repository's webhook secret from the API server for now; nothing was queued: deliver the push again later", http.StatusServiceUnavailable)
}

// webhookRetryAfter is the wait a 503 asks of the git host.
const webhookRetryAfter = 30 * time.Second

// errUnverified is the one answer to a signature that is not verified,
// whatever the reason, which the log says.
const errUnverified = "the signature does not match, or there is no such repository, or it has no webhook secret (spec.webhookSecretRef)"

// signed reports whether a request carries a signature of a kind Verify
// checks.
func signed(h http.Header) bool {
	for _, k := range []string{"X-Hub-Signature-256", "X-Gitea-Signature", "X-Forgejo-Signature", "X-Gitlab-Token"} {
		if h.Get(k) != "" {
			return true
		}
	}
	return false
}

// Verify checks a webhook's signature against the secret: GitHub's
// X-Hub-Signature-256, Gitea's and Forgejo's X-Gitea-Signature and
// X-Forgejo-Signature (HMAC-SHA256 of the body), or GitLab's X-Gitlab-Token.
// An empty secret verifies nothing.
func Verify(h http.Header, body, secret []byte) error {
	if len(secret) == 0 {
		return errors.New("the signature does not match, or the repository has no webhook secret (spec.webhookSecretRef)")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	sum := mac.Sum(nil)
	checkHex := func(got string) error {
		want, err := hex.DecodeString(strings.TrimSpace(got))
		if err != nil || !hmac.Equal(want, sum) {
			return errors.New("the signature does not match the webhook secret")
		}
		return nil
	}
	switch {
	case h.Get("X-Hub-Signature-256") != "":
		sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
		if !ok {
			return errors.New("X-Hub-Signature-256 must start with sha256=")
		}
		return checkHex(sig)
	case h.Get("X-Gitea-Signature") != "":
		return checkHex(h.Get("X-Gitea-Signature"))
	case h.Get("X-Forgejo-Signature") != "":
		return checkHex(h.Get("X-Forgejo-Signature"))
	case h.Get("X-Gitlab-Token") != "":
		if subtle.ConstantTimeCompare([]byte(h.Get("X-Gitlab-Token")), secret) != 1 {
			return errors.New("the signature does not match the webhook secret")
		}
		return nil
	default:
		return errors.New("the request has no signature: set the webhook's secret in the git host")
	}
}

func eventName(h http.Header) string {
	for _, k := range []string{"X-GitHub-Event", "X-Gitea-Event", "X-Forgejo-Event", "X-Gitlab-Event"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// unverifiedError is signedPayload's answer to a signature that does not
// hold.
type unverifiedError struct{ err error }

func (e *unverifiedError) Error() string { return e.err.Error() }

// signedPayload checks a webhook's signature against the secret and returns
// the JSON event, read only from bytes the signature covers. A JSON body is
// the event, signed as sent. A form (GitHub's default content type, which
// Gitea and Forgejo offer too) holds the event in its field payload, and
// the hosts sign it differently: GitHub signs the form as sent, while Gitea
// and Forgejo sign the event alone, whatever the content type. So a form's
// signature is checked over the body first and, when that fails, over the
// payload field's bytes.
//
// The error is an *unverifiedError when no signature holds, and otherwise
// says why a form whose body is signed holds no event.
func signedPayload(h http.Header, body, secret []byte) ([]byte, error) {
	verr := Verify(h, body, secret)
	if !isForm(h) {
		if verr != nil {
			return nil, &unverifiedError{verr}
		}
		return body, nil
	}
	if verr == nil {
		return formPayload(body)
	}
	// NOTE: the form is parsed before its signature is checked only to find
	// the bytes Gitea and Forgejo sign; nothing of it is used unless those
	// bytes verify, and then only they are parsed.
	payload, err := formPayload(body)
	if err != nil || Verify(h, payload, secret) != nil {
		return nil, &unverifiedError{verr}
	}
	return payload, nil
}

// isForm reports whether a webhook's body is a form.
func isForm(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// formPayload returns the field payload of a form body, which holds the
// JSON event.
func formPayload(body []byte) ([]byte, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("the body is not a form: %v", err)
	}
	if !form.Has("payload") {
		return nil, errors.New("the form has no payload field holding the push event")
	}
	return []byte(form.Get("payload")), nil
}

// ParsePush reads the pushed ref, such as refs/heads/main, from the body of
// a push event. GitHub, GitLab, Gitea and Forgejo all send it as "ref".
func ParsePush(body []byte) (string, error) {
	var push struct {
		Ref string `json:"ref"`
	}
	if err := json.Unmarshal(body, &push); err != nil {
		return "", fmt.Errorf("the body is not a push event in JSON: %v", err)
	}
	if !strings.HasPrefix(push.Ref, "refs/") || len(push.Ref) > 1024 {
		return "", errors.New("the push event has no ref such as refs/heads/main")
	}
	return push.Ref, nil
}
