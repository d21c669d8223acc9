package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/clientlimit"
)

// Tokens are reviewed once a minute at most: a revoked token keeps working
// through the API for up to that long, and each API call is then made with
// the token itself, which the API server checks anyway. A refused token is
// remembered, by its hash, for as long: sending it again costs the API
// server nothing.
const (
	tokenTTL       = time.Minute
	tokenCacheSize = 4096
)

// The bounds of the TokenReviews that tokens not in the cache cost. Any
// caller, with no token worth anything, can send a new random token with
// each request, and each such token costs a TokenReview made with the
// controller's own account: without bounds, a loop of them would flood
// the API server as the controller, whose priority and fairness then
// throttles the controller's own reconciles.
//
// NOTE: a client is the address of its connection, never a header it
// sends (X-Forwarded-For is whatever the caller writes). Behind a proxy
// every caller shares the proxy's address, and so one bound: it is set so
// that a person's token is reviewed once a minute at most, and a few
// hundred people a minute behind one proxy still sign in.
const (
	// clientReviewRate and clientReviewBurst are the reviews one client
	// may cost: a burst, then so many a second. The same bound holds the
	// SubjectAccessReviews one user causes (plans of a change, chart
	// forms, commits): a person's clicks stay far inside it, a loop does
	// not take the whole reviewer's budget.
	clientReviewRate  = 5
	clientReviewBurst = 25
	// maxReviewClients bounds the clients whose limiters are kept.
	maxReviewClients = 4096
	// maxReviewsInFlight bounds the TokenReviews running at once, from
	// every client together; reviewSlotWait is how long a review waits for
	// one of them before it is answered 429.
	maxReviewsInFlight = 8
	reviewSlotWait     = time.Second
	// reviewTimeout bounds one TokenReview, which the requests that wait
	// for the same token share.
	reviewTimeout = 10 * time.Second
	// reviewerQPS and reviewerBurst are the client-side rate limit of the
	// controller's client that makes the TokenReviews and
	// SubjectAccessReviews: a bound of its own, apart from the
	// reconciles', which have none.
	reviewerQPS   = 20
	reviewerBurst = 40
)

// ReviewerConfig is the rest.Config of the Server's Reviewer: cfg, the
// controller's own, with a finite client-side rate limit of its own, so
// that the reviews the API's callers cause are bounded whatever else
// bounds them.
func ReviewerConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.QPS, out.Burst = reviewerQPS, reviewerBurst
	out.RateLimiter = nil
	return out
}

// User is the person behind a request, as the API server's TokenReview
// names them. UID and Extra go into every SubjectAccessReview with the name
// and groups: a webhook authorizer, or a token scoped by its extra fields,
// decides on them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
	token  string
}

// errUnauthenticated is a request without a valid token.
var errUnauthenticated = errors.New("a valid Kubernetes bearer token is required (Authorization: Bearer <token>)")

// throttledError is a review that was not made: the client has cost as
// many as it may for now, or every review slot is taken.
type throttledError struct {
	retryAfter time.Duration
	why        string
}

func (e *throttledError) Error() string {
	if n := retryAfterSeconds(e.retryAfter); n > 1 {
		return fmt.Sprintf("%s; try again in %d seconds", e.why, n)
	}
	return e.why + "; try again in a second"
}

// retryAfterSeconds is d as a Retry-After: whole seconds, at least one.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// reviewRefusal is the answer to a review's error: 429 with a Retry-After
// when it was throttled, 401 when the token was refused, 503 when the API
// server did not answer.
func reviewRefusal(err error) apiError {
	var throttled *throttledError
	switch {
	case errors.As(err, &throttled):
		return apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", Message: throttled.Error(),
			retryAfter: retryAfterSeconds(throttled.retryAfter)}
	case errors.Is(err, errUnauthenticated):
		return apiError{Code: http.StatusUnauthorized, Reason: "Unauthorized", Message: "the token was not accepted by the Kubernetes API server"}
	}
	return apiError{Code: http.StatusServiceUnavailable, Reason: "ServiceUnavailable", Message: "the Kubernetes API server could not review the token; try again"}
}

// tokenReviewer authenticates bearer tokens with TokenReviews and keeps the
// answers for tokenTTL in bounded caches: the users of accepted tokens, and
// the hashes of refused ones. A review that failed (the API server did not
// answer) is not cached.
//
// A token in neither cache is reviewed only within the bounds above: the
// client's bucket, then one of the review slots. Requests that carry the
// same token at once wait for one review.
type tokenReviewer struct {
	client kubernetes.Interface
	now    func() time.Time
	// clients is the per-client bound; slots holds a token for each review
	// running.
	clients *clientlimit.Limiter
	slots   chan struct{}
	flight  singleflight.Group

	mu      sync.Mutex
	cache   map[[sha256.Size]byte]cachedUser
	refused map[[sha256.Size]byte]time.Time
}

type cachedUser struct {
	user    User
	expires time.Time
}

// bearerToken reads the token of an Authorization header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func newTokenReviewer(c kubernetes.Interface, now func() time.Time) *tokenReviewer {
	return &tokenReviewer{client: c, now: now,
		clients: clientlimit.New(clientReviewRate, clientReviewBurst, maxReviewClients),
		slots:   make(chan struct{}, maxReviewsInFlight)}
}

// review returns the user a token belongs to, or errUnauthenticated, or a
// *throttledError when client (clientOf the request) may not cost a
// review now.
func (t *tokenReviewer) review(ctx context.Context, token, client string) (User, error) {
	key := sha256.Sum256([]byte(token))
	if u, err, ok := t.cached(key); ok {
		return u, err
	}
	if ok, wait := t.clients.Allow(client, t.now()); !ok {
		return User{}, &throttledError{retryAfter: wait, why: "too many tokens from this address were sent to be reviewed"}
	}
	ch := t.flight.DoChan(string(key[:]), func() (any, error) {
		// NOTE: the review is shared by every request that waits for the
		// token, so it does not end with the first one's context.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		return t.reviewNow(ctx, key, token)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return User{}, res.Err
		}
		return res.Val.(User), nil
	case <-ctx.Done():
		return User{}, ctx.Err()
	}
}

// cached answers a token from the caches; ok is false when it is in
// neither.
func (t *tokenReviewer) cached(key [sha256.Size]byte) (User, error, bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.cache[key]; ok && now.Before(c.expires) {
		return c.user, nil, true
	}
	if expires, ok := t.refused[key]; ok && now.Before(expires) {
		return User{}, errUnauthenticated, true
	}
	return User{}, nil, false
}

// forget drops the cached review of token, so that the server's memory
// keeps it no longer than a session that holds it.
func (t *tokenReviewer) forget(token string) {
	key := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.cache, key)
}

// reviewNow makes the TokenReview, in one of the review slots, and keeps
// its answer.
func (t *tokenReviewer) reviewNow(ctx context.Context, key [sha256.Size]byte, token string) (User, error) {
	// NOTE: a request that waited for another's review of the same token
	// finds its answer here.
	if u, err, ok := t.cached(key); ok {
		return u, err
	}
	wait := time.NewTimer(reviewSlotWait)
	defer wait.Stop()
	select {
	case t.slots <- struct{}{}:
		defer func() { <-t.slots }()
	case <-wait.C:
		return User{}, &throttledError{retryAfter: reviewSlotWait, why: fmt.Sprintf("%d tokens are being reviewed, the most this server has reviewed at once", cap(t.slots))}
	case <-ctx.Done():
		return User{}, ctx.Err()
	}
	tr, err := t.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, err
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !tr.Status.Authenticated {
		if t.refused == nil {
			t.refused = map[[sha256.Size]byte]time.Time{}
		}
		makeRoom(t.refused, tokenCacheSize, func(expires time.Time) bool { return !now.Before(expires) })
		t.refused[key] = now.Add(tokenTTL)
		return User{}, errUnauthenticated
	}
	info := tr.Status.User
	u := User{Name: info.Username, UID: info.UID, Groups: info.Groups, token: token}
	if len(info.Extra) > 0 {
		u.Extra = make(map[string][]string, len(info.Extra))
		for k, v := range info.Extra {
			u.Extra[k] = v
		}
	}
	if t.cache == nil {
		t.cache = map[[sha256.Size]byte]cachedUser{}
	}
	makeRoom(t.cache, tokenCacheSize, func(c cachedUser) bool { return !now.Before(c.expires) })
	t.cache[key] = cachedUser{user: u, expires: now.Add(tokenTTL)}
	return u, nil
}

// makeRoom keeps a cache map under max entries: the expired go first and,
// when all are live, any one, so that memory stays bounded whatever the
// load.
func makeRoom[K comparable, V any](m map[K]V, max int, expired func(V) bool) {
	if len(m) < max {
		return
	}
	for k, v := range m {
		if expired(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) < max {
			return
		}
		delete(m, k)
	}
}
