package server

import (
	"cmp"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"capstan.dev/capstan/internal/clientlimit"
	"capstan.dev/capstan/internal/server/body"
)

// The web page signs in with a Kubernetes token too. The server keeps the
// token, never the browser: the browser holds only a random session id in
// an HttpOnly, Secure, SameSite=Strict cookie, and sends the session's CSRF
// token in a header with every write. Every request of a session reviews
// its token again, through the tokens' cache: a session lasts only as long
// as the API server accepts its token, and acts with the groups the token
// has now, not those it had at sign-in.
const (
	sessionCookie   = "__Host-capstan_session"
	csrfHeader      = "X-CSRF-Token"
	sessionTTL      = 8 * time.Hour
	maxSessions     = 10000
	sessionIDLength = 32
	// maxUserSessions bounds one user's sessions: a sign-in past it ends
	// that user's oldest. NOTE: without it, one valid token signed in
	// maxSessions times would fill the table, and every sign-in after that
	// would end someone else's session.
	maxUserSessions = 20
	// maxNamespaceSessions bounds the sessions of the service accounts of
	// one namespace together. NOTE: whoever may create service accounts
	// and their tokens in a namespace (a tenant's admin) could otherwise
	// sign in as many accounts, 20 sessions each, and fill the table.
	maxNamespaceSessions = 100
)

type session struct {
	// user is, as stored, the name and token of who signed in, and nothing
	// else; liveSession fills in the rest from the token's latest review.
	user    User
	csrf    string
	expires time.Time
	// seq orders the sessions by sign-in.
	seq uint64
}

// sessions are the signed-in browsers, in memory: a restarted server signs
// everyone out, which costs a sign-in and leaks nothing.
type sessions struct {
	mu  sync.Mutex
	m   map[string]session
	seq uint64
	// max bounds the table; 0 means maxSessions.
	max int
}

func randomToken() string {
	b := make([]byte, sessionIDLength)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(u User, now time.Time) (id string, sess session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]session{}
	}
	s.endOldest(func(name string) bool { return name == u.Name }, maxUserSessions-1, now)
	if ns, ok := serviceAccountNamespace(u.Name); ok {
		s.endOldest(func(name string) bool {
			other, ok := serviceAccountNamespace(name)
			return ok && other == ns
		}, maxNamespaceSessions-1, now)
	}
	s.makeRoom(now)
	s.seq++
	id = randomToken()
	sess = session{user: User{Name: u.Name, token: u.token}, csrf: randomToken(), expires: now.Add(sessionTTL), seq: s.seq}
	s.m[id] = sess
	return id, sess
}

// makeRoom keeps the table under its bound: the expired sessions go
// first and, when all are live, the oldest session of the groups that hold
// the most (the service accounts of one namespace, else one user).
//
// NOTE: not any session: when one namespace or user fills the table, the
// sign-ins after that end its own sessions, not others'. Among groups of
// the same size (a table full of people with one session each), the
// oldest session goes, so that no one loses theirs at every sign-in for
// their name alone. A filler who spreads its sessions over many groups of
// the same size as others' can still end others' sessions; it cannot end
// one person's again and again.
func (s *sessions) makeRoom(now time.Time) {
	bound := cmp.Or(s.max, maxSessions)
	if len(s.m) < bound {
		return
	}
	counts := map[string]int{}
	for id, sess := range s.m {
		if !now.Before(sess.expires) {
			delete(s.m, id)
			continue
		}
		counts[sessionGroup(sess.user.Name)]++
	}
	for len(s.m) >= bound {
		most := 0
		for _, n := range counts {
			most = max(most, n)
		}
		var oldest string
		for id, sess := range s.m {
			if counts[sessionGroup(sess.user.Name)] == most && (oldest == "" || sess.seq < s.m[oldest].seq) {
				oldest = id
			}
		}
		counts[sessionGroup(s.m[oldest].user.Name)]--
		delete(s.m, oldest)
	}
}

// sessionGroup is the group a user's sessions count in when the table is
// full: the namespace of a service account, else the user.
func sessionGroup(user string) string {
	if ns, ok := serviceAccountNamespace(user); ok {
		return "namespace " + ns
	}
	return "user " + user
}

// serviceAccountNamespace is the namespace of a service account's user
// name (system:serviceaccount:NAMESPACE:NAME).
func serviceAccountNamespace(user string) (string, bool) {
	ns, _, err := serviceaccount.SplitUsername(user)
	return ns, err == nil
}

// endOldest ends the oldest sessions of the users that match until keep
// are left, and those that expired.
func (s *sessions) endOldest(match func(user string) bool, keep int, now time.Time) {
	var ids []string
	for id, sess := range s.m {
		if !match(sess.user.Name) {
			continue
		}
		if !now.Before(sess.expires) {
			delete(s.m, id)
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) <= keep {
		return
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(s.m[a].seq, s.m[b].seq) })
	for _, id := range ids[:len(ids)-keep] {
		delete(s.m, id)
	}
}

func (s *sessions) get(id string, now time.Time) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok || !now.Before(sess.expires) {
		delete(s.m, id)
		return session{}, false
	}
	return sess, true
}

// remove ends the session id, and returns it: ok is false when there was
// none.
func (s *sessions) remove(id string) (sess session, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok = s.m[id]
	delete(s.m, id)
	return sess, ok
}

// maxSignInBody bounds a sign-in's body, and a sign-out's: a token is a
// few KiB at most.
const maxSignInBody = 64 << 10

// signIn takes a token in the body, reviews it, and answers with a session
// cookie and the CSRF token.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		writeError(w, apiError{Code: http.StatusForbidden, Reason: "Forbidden", Message: crossSiteSignIn})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	var req body.SignIn
	err := noQuery(r)
	if err == nil {
		err = body.Decode(r.Body, &req)
	}
	if err == nil {
		err = req.Check()
	}
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	u, err := s.tokens.review(r.Context(), req.Token, clientlimit.Of(r))
	if err != nil {
		writeError(w, reviewRefusal(err))
		return
	}
	id, sess := s.sessions.create(u, s.now())
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, Expires: sess.expires})
	writeJSON(w, http.StatusOK, map[string]string{"user": u.Name, "csrfToken": sess.csrf})
}

// crossSiteSignIn is the answer to a sign-in sent from another site.
const crossSiteSignIn = "a sign-in must come from this server's own page; this one came from another site, and nothing was signed in"

// crossSite reports whether a browser sent r from another page than this
// server's: its Sec-Fetch-Site says cross-site or same-site, or, when it
// sends none, its Origin is not this server. A client that is no browser
// sends neither and passes.
//
// NOTE: the session cookie is SameSite=Strict, but a sign-in sets it
// rather than sends it: another site's form could otherwise sign the
// browser in with that site's token, and the person would then act, and
// type secret inputs, as someone else.
func crossSite(r *http.Request) bool {
	// NOTE: a browser's Sec-Fetch-Site decides when it is there: behind a
	// proxy that rewrites Host, the Origin never matches it.
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	case "same-origin", "none":
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != r.Host
}

// signOut forgets the session, and answers 204.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.endSession(w, r)
	w.WriteHeader(http.StatusNoContent)
}

// endSession forgets the request's session, and clears its cookie.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if sess, ok := s.sessions.remove(c.Value); ok {
			// NOTE: the review cache holds the token too; a request
			// that carries it (another session of it, the CLI) only
			// costs a review again.
			s.tokens.forget(sess.user.token)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// liveSession returns the session of a request's cookie, with its user as
// the API server's review of the session's token names them now. A session
// whose token the API server no longer accepts (it expired, or its
// ServiceAccount was deleted) ends. The error is the answer to give.
func (s *Server) liveSession(r *http.Request) (session, *apiError) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, &apiError{Code: http.StatusUnauthorized, Reason: "Unauthorized", Message: errUnauthenticated.Error()}
	}
	sess, ok := s.sessions.get(c.Value, s.now())
	if !ok {
		return session{}, &apiError{Code: http.StatusUnauthorized, Reason: "Unauthorized", Message: "the session has ended: sign in again"}
	}
	u, err := s.tokens.review(r.Context(), sess.user.token, clientlimit.Of(r))
	if errors.Is(err, errUnauthenticated) {
		s.sessions.remove(c.Value)
		return session{}, &apiError{Code: http.StatusUnauthorized, Reason: "Unauthorized",
			Message: "the session has ended: the Kubernetes API server no longer accepts its token (it expired, or its account was removed); sign in again"}
	}
	if err != nil {
		if refusal := reviewRefusal(err); refusal.Code == http.StatusTooManyRequests {
			return session{}, &refusal
		}
		return session{}, &apiError{Code: http.StatusServiceUnavailable, Reason: "ServiceUnavailable",
			Message: "the Kubernetes API server could not review the session's token; try again"}
	}
	sess.user = u
	return sess, nil
}

// sessionUser returns the user of a request's session cookie, as
// liveSession does. A write must carry the session's CSRF token; the
// error is the answer to give otherwise.
func (s *Server) sessionUser(r *http.Request) (User, *apiError) {
	sess, refused := s.liveSession(r)
	if refused != nil {
		return User{}, refused
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(sess.csrf)) != 1 {
			return User{}, &apiError{Code: http.StatusForbidden, Reason: "Forbidden", Message: "a write from a signed-in page must carry the session's " + csrfHeader + " header"}
		}
	}
	return sess.user, nil
}
