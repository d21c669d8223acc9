package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// tokenReviewer authenticates bearer tokens with TokenReviews and keeps the
// answers for tokenTTL in bounded caches: the users of accepted tokens, and
// the hashes of refused ones. A review that failed (the API server did not
// answer) is not cached.
type tokenReviewer struct {
	client kubernetes.Interface
	now    func() time.Time

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

// review returns the user a token belongs to, or errUnauthenticated.
func (t *tokenReviewer) review(ctx context.Context, token string) (User, error) {
	key := sha256.Sum256([]byte(token))
	now := t.now()
	t.mu.Lock()
	if c, ok := t.cache[key]; ok && now.Before(c.expires) {
		t.mu.Unlock()
		return c.user, nil
	}
	if expires, ok := t.refused[key]; ok && now.Before(expires) {
		t.mu.Unlock()
		return User{}, errUnauthenticated
	}
	t.mu.Unlock()
	tr, err := t.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, err
	}
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
