// Package server is Capstan's one HTTP server: the git push webhooks under
// /hooks/git/ and the JSON API under /api/v1/, over HTTPS. The API is a thin
// layer over internal/addons: it authenticates a Kubernetes bearer token
// with a TokenReview and then makes every call to the API server with that
// token, so nobody gets more through it than kubectl would give them.
// docs/api.md documents it.
package server

import (
	"context"
	"crypto/tls"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/clientlimit"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/source"
)

// openAPI describes the API: every path, its body and its errors.
//
//go:embed openapi.json
var openAPI []byte

// MaxBody is the largest request body the API reads: an Addon with its
// values and secret inputs fits many times over.
const MaxBody = 1 << 20

// Server serves the API and the webhooks.
type Server struct {
	// Base is the API server's address and CA, without credentials: every
	// API call is made with the requesting user's own token.
	Base *rest.Config
	// Reviewer creates TokenReviews; the controller's client, built from
	// ReviewerConfig so that the reviews the API's callers cause have a
	// rate limit of their own.
	Reviewer kubernetes.Interface
	// AccessReviewer creates SubjectAccessReviews: another client built
	// from ReviewerConfig, with a limiter of its own. nil uses Reviewer.
	//
	// NOTE: any signed-in caller, with no RBAC right at all, causes an
	// access review per plan of a change or chart form; sharing the
	// TokenReviews' limiter, a loop of them would hold up every other
	// person's sign-in behind it.
	AccessReviewer kubernetes.Interface
	// Scheme and Mapper build the users' clients.
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper
	// Fetcher fetches sources for plans on demand, through the fetch guard.
	Fetcher *source.Fetcher
	// Config is the controller's whole configuration, the one its reconciler
	// runs with. A plan on demand is computed with it, so that it renders in
	// the controller's render sandbox and gives each namespace the profile
	// the controller gives it. Its Namespace is the controller's (the
	// catalog's ConfigMaps live there); a new add-on of one of its
	// TrustedNamespaces that holds an AddonRepository is committed to it.
	Config controller.Config
	// MaxPlans bounds the plans on demand computed at once, and one user,
	// or the ServiceAccounts of one namespace together, get at most half of
	// them (at least one); a plan past either is answered 429. Zero means defaultMaxPlans.
	MaxPlans int
	// MaxPageFetches bounds the charts the pages fetch at once for their
	// forms, and one user, or the ServiceAccounts of one namespace
	// together, get at most half of them (at least one); a page past either
	// is answered 429. Zero means defaultMaxPageFetches.
	MaxPageFetches int
	// FetchTimeout bounds how long a page's form or a plan on demand
	// waits for its chart or git tree. Zero means DefaultFetchTimeout.
	FetchTimeout time.Duration
	// MaxLists bounds the lists of Addons read at once, by the API and the
	// pages together; a list that finds none of its turns free within
	// listWait is answered 429. Zero means defaultMaxLists.
	MaxLists int
	// MaxReads bounds the reads of one Addon answered at once: the API's
	// get and events, and the page's views of one add-on (its page, its
	// edit view, and the forms that answer with them). One user, or the
	// ServiceAccounts of one namespace together, get at most a quarter of
	// them (at least one); a read that finds no turn free within listWait
	// is answered 429. Zero means defaultMaxReads.
	MaxReads int
	// Webhook serves /hooks/git/; nil leaves it out.
	Webhook http.Handler
	// Controller is the controller's own client. It reads AddonRepositories
	// and their credentials for commits to git-managed Addons, and the
	// platform ConfigMap for plans on demand, and nothing else; nil makes
	// the commits unavailable, and a plan then reads the platform's facts
	// with the user's token.
	Controller client.Reader
	// GitAuth turns a repository's credentials Secret into git auth.
	GitAuth gitops.AuthFunc
	// Syncer is asked to sync a repository at once after a commit.
	Syncer gitops.Triggerer
	// Log receives one line per write: who, what, which Addon, which plan.
	Log logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	tokens *tokenReviewer
	// catalog keeps the catalog's entries for the pages.
	catalog catalogCache
	// repositoryViews keeps, for the pages' views, the AddonRepositories
	// that manage Addons.
	repositoryViews repositoryViews
	// accessReviews bounds the SubjectAccessReviews each user causes.
	accessReviews *clientlimit.Limiter
	sessions      sessions
	// plans holds a turn for each plan being computed.
	plans *turns
	// pageFetches holds a turn for each chart a page is fetching.
	pageFetches *turns
	// lists holds a turn for each list of Addons being read.
	lists *turns
	// reads holds a turn for each read of one Addon being answered.
	reads *turns
}

// defaultMaxLists is how many lists of Addons a server reads at once unless
// told. NOTE: a list is read whole into the controller's memory, and
// written out again from there: a page of 100 Addons by default, of 250
// when asked, and each Addon may carry 128 KiB of diffs besides its
// inventory and history. Anyone who may list one namespace may ask for
// lists without end, and unbounded, lists at once would take the
// controller past its memory limit.
const defaultMaxLists = 4

// defaultMaxReads is how many reads of one Addon a server answers at once
// unless told. NOTE: each holds one Addon, up to about a megabyte with its
// diffs, inventory and history, two or three times over while it is
// answered: 32 of them stay well inside the controller's 1 GiB.
const defaultMaxReads = 32

// readShares is how many users at least share the read turns: one user,
// or the ServiceAccounts of one namespace, get 1/readShares of them.
// NOTE: a tenant may make its own Addon big, and a client that asks for it
// and reads nothing holds its turn for listWriteTimeout, again and again:
// without a share, a few such connections would turn every other person's
// reads away. A quarter leaves a person's page, its live refresh and an
// edit view in a few tabs room enough.
const readShares = 4

// defaultMaxPageFetches is how many charts the pages fetch at once unless
// told. NOTE: each may fetch 20 MiB and unpack 100 MiB into the chart cache
// the reconciles share, and anyone who may create or change one Addon may
// ask for one. A turn counts a fetch, not a page that waits: a fetch for
// pages and plans alone stops when the last of them stops waiting
// (source.Interactive), and the turn is let go only then.
const defaultMaxPageFetches = 2

// DefaultFetchTimeout is how long a page's form or a plan on demand waits
// for its source unless told. NOTE: a person waits for it, and a turn is
// held all that while; the reconciles' fetches keep the guard's longer
// timeout.
const DefaultFetchTimeout = 30 * time.Second

// defaultMaxPlans is how many plans on demand a server computes at once
// unless told. NOTE: each fetches a chart, renders it (a sandbox worker,
// shared with the controller's reconciles) and dry-runs every object, and
// anyone who may read one Addon may ask for one; more at once would take
// the controller's CPU and its render workers from the reconciles.
const defaultMaxPlans = 2

// fetchTimeout is how long a page's form or a plan on demand waits for
// its source.
func (s *Server) fetchTimeout() time.Duration {
	if s.FetchTimeout > 0 {
		return s.FetchTimeout
	}
	return DefaultFetchTimeout
}

// config is the controller's configuration with its defaults.
func (s *Server) config() controller.Config { return s.Config.WithDefaults() }

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Handler is the server's one mux.
func (s *Server) Handler() http.Handler {
	// The pages are parsed here, so that a broken one stops the server as
	// it starts rather than failing its first request.
	pages()
	s.tokens = newTokenReviewer(s.Reviewer, s.now)
	s.accessReviews = clientlimit.New(clientReviewRate, clientReviewBurst, maxReviewClients)
	maxPlans := s.MaxPlans
	if maxPlans <= 0 {
		maxPlans = defaultMaxPlans
	}
	s.plans = newTurns(maxPlans)
	maxPageFetches := s.MaxPageFetches
	if maxPageFetches <= 0 {
		maxPageFetches = defaultMaxPageFetches
	}
	s.pageFetches = newTurns(maxPageFetches)
	maxLists := s.MaxLists
	if maxLists <= 0 {
		maxLists = defaultMaxLists
	}
	s.lists = newUnsharedTurns(maxLists)
	maxReads := s.MaxReads
	if maxReads <= 0 {
		maxReads = defaultMaxReads
	}
	s.reads = newSharedTurns(maxReads, max(1, maxReads/readShares))
	mux := http.NewServeMux()
	if s.Webhook != nil {
		mux.Handle("/hooks/git/", s.Webhook)
	}
	api := http.NewServeMux()
	// NOTE: every route that answers with one Addon whole, the add and
	// the edit too, takes a read turn: an answer its client does not read
	// would otherwise hold the Addon in memory for the server's
	// WriteTimeout. The actions answer a few fields, and take none.
	api.HandleFunc("GET /api/v1/addons", s.list)
	api.HandleFunc("GET /api/v1/namespaces/{namespace}/addons", s.list)
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons", s.apiRead(s.add))
	api.HandleFunc("GET /api/v1/namespaces/{namespace}/addons/{name}", s.apiRead(s.get))
	api.HandleFunc("DELETE /api/v1/namespaces/{namespace}/addons/{name}", s.remove)
	api.HandleFunc("PATCH /api/v1/namespaces/{namespace}/addons/{name}", s.apiRead(s.edit))
	api.HandleFunc("GET /api/v1/namespaces/{namespace}/capabilities", s.capabilities)
	api.HandleFunc("GET /api/v1/namespaces/{namespace}/addons/{name}/capabilities", s.capabilities)
	api.HandleFunc("GET /api/v1/namespaces/{namespace}/addons/{name}/events", s.apiRead(s.events))
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/plan", s.plan)
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/approve", s.approve)
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/install", s.install)
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/refresh", s.refresh)
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/test", s.test)
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/suspend", s.suspend(true))
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/resume", s.suspend(false))
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(r, api, mux); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, apiError{Code: http.StatusMethodNotAllowed, Reason: "MethodNotAllowed",
				Message: fmt.Sprintf("%s is not allowed on %s; it takes %s", r.Method, r.URL.Path, strings.Join(allow, ", "))})
			return
		}
		writeError(w, apiError{Code: http.StatusNotFound, Reason: "NotFound", Message: "no such API path: " + r.URL.Path})
	})
	mux.Handle("/api/", s.authenticate(api))
	s.pageRoutes(mux)
	mux.HandleFunc("POST /api/v1/session", s.signIn)
	mux.HandleFunc("DELETE /api/v1/session", s.signOut)
	mux.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	})
	return mux
}

// apiMethods are the methods the API's routes use.
var apiMethods = []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete}

// allowedMethods lists the methods that some route of muxes takes for r's
// path, other than the catch-all "/api/": a path the API has, asked with a
// method it does not take, is answered 405 with them, not 404. The
// catch-all, which matches every method, would otherwise hide them.
func allowedMethods(r *http.Request, muxes ...*http.ServeMux) []string {
	var allow []string
	for _, m := range apiMethods {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		for _, mux := range muxes {
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/api/" {
				allow = append(allow, m)
				break
			}
		}
	}
	return allow
}

// Run serves the handler on addr with TLS until ctx ends, then shuts down
// gracefully.
func (s *Server) Run(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("the HTTPS endpoint on %s: %w", addr, err)
	}
	return s.serve(ctx, tls.NewListener(ln, tlsConfig))
}

func (s *Server) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// NOTE: a plan on demand fetches and dry-runs a whole chart.
		WriteTimeout:   2 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       nil,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("the HTTPS endpoint on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

type userKey struct{}

// authenticate lets a request through with a valid bearer token only, and
// puts its user in the request's context.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			// A signed-in page: its session cookie, and a CSRF token on writes.
			u, refused := s.sessionUser(r)
			if refused != nil {
				writeError(w, *refused)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
			return
		}
		u, err := s.tokens.review(r.Context(), token, clientlimit.Of(r))
		if err != nil {
			writeError(w, reviewRefusal(err))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

func userOf(r *http.Request) User {
	u, _ := r.Context().Value(userKey{}).(User)
	return u
}

// userConfig is the API server's config with the user's token and nothing
// of the controller's.
func (s *Server) userConfig(u User) *rest.Config {
	cfg := rest.AnonymousClientConfig(s.Base)
	cfg.BearerToken = u.token
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

// userClient is a client that acts as the user.
func (s *Server) userClient(u User) (client.Client, *rest.Config, error) {
	cfg := s.userConfig(u)
	c, err := client.New(cfg, client.Options{Scheme: s.Scheme, Mapper: s.Mapper})
	if err != nil {
		return nil, nil, fmt.Errorf("building a client for %s: %w", u.Name, err)
	}
	return c, cfg, nil
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
