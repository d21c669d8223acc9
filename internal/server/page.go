package server

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/clientlimit"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/plan"
)

// The web page is server-rendered HTML over the same operations as the API,
// with the signed-in user's own token. Every flow works without JavaScript;
// live.js only refreshes an add-on's status while a sync runs.

//go:embed web
var webFS embed.FS

var pageFuncs = template.FuncMap{
	"phaseLabel": func(p capstanv1.Phase) string {
		if p == "" {
			return "Pending"
		}
		return string(p)
	},
	"ready": func(a capstanv1.Addon) string {
		if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); c != nil {
			return string(c.Status)
		}
		return "Unknown"
	},
	"healthy": func(a capstanv1.Addon) string {
		if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionHealthy); c != nil {
			return string(c.Status)
		}
		return "Unknown"
	},
	"readyMessage": func(a *capstanv1.Addon) string {
		if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); c != nil {
			return c.Message
		}
		return "The controller has not reported on this add-on yet."
	},
	"planSummary": plan.String,
	"short":       gitops.ShortCommit,
	"join":        strings.Join,
	"eventTime":   func(e eventsv1.Event) string { return eventTime(e).UTC().Format("2006-01-02 15:04:05") },
	"diffLines":   diffLines,
	"onlyCounted": plan.OnlyCounted,
	"removal":     removalOf,
	// blocked says why no approval could apply an Addon's plan, or
	// nothing: the page offers no Approve or Install for it. An add-on
	// whose sync is held since its profile changed is refused first.
	"blocked": func(a *capstanv1.Addon) string {
		if err := addons.RefuseHeld(a, client.ObjectKeyFromObject(a)); err != nil {
			return err.Error()
		}
		if err := addons.Blocked(a.Status.Plan); err != nil {
			return err.Error()
		}
		return ""
	},
	// redact shows a URL without its user information, which may hold a
	// password or a token, as every message and log line shows one.
	"redact": netguard.Redact,
}

// pages are parsed once, when the server builds its handler: each is the
// layout with one page's content. NOTE: not at package init, because every
// capstan command links this package, and `capstan render` has no use for
// pages.
var pages = sync.OnceValue(func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"signin", "list", "addon", "new", "catalog", "edit"} {
		out[name] = template.Must(template.New(name).Funcs(pageFuncs).ParseFS(webFS, "web/layout.html", "web/field.html", "web/"+name+".html"))
	}
	return out
})

// diffLine is one line of a unified diff, with its class for colour. The
// sign at the start of the line says the same, so colour is never the only
// signal.
type diffLine struct{ Class, Text string }

func diffLines(diff string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimRight(diff, "\n"), "\n") {
		class := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		}
		out = append(out, diffLine{Class: class, Text: l})
	}
	return out
}

// pageData is what every page's layout reads.
type pageData struct {
	Title, User, CSRF, Flash, Error string
	Live                            bool

	// The list, read ListLimit Addons at a time: More links the next page
	// when there is one. MoreRepositories says that there are more
	// AddonRepositories than the page shows.
	Addons           []capstanv1.Addon
	Repositories     []capstanv1.AddonRepository
	Namespace, Phase string
	Phases           []capstanv1.Phase
	ListLimit        int
	More             string
	MoreRepositories bool
	// An add-on, and the profile the controller places it in now: ""
	// when this server's controller does not select it (another shard's).
	Addon   *capstanv1.Addon
	Placed  capstanv1.Profile
	Can     map[string]bool
	Actions bool
	Events  []eventsv1.Event
	// GitManaged names the AddonRepository that manages the add-on, if any.
	GitManaged string
	// The form from a chart's schema, and the catalog.
	Form    *newForm
	Catalog *catalogView
	Edit    *editForm
}

// flashes are the only messages a redirect may ask a page to show, so that
// no text from a link is ever shown back.
var flashes = map[string]string{
	"add":     "Added, suspended: review its plan, then install it.",
	"install": "Installing exactly the reviewed plan.",
	"approve": "Approved exactly the reviewed plan.",
	"suspend": "Suspended: the add-on is planned, nothing is applied.",
	"resume":  "Resumed.",
	"refresh": "Refresh requested: the add-on is reconciled now, and its source read again.",
	"test":    "Tests requested: they run once every object is ready; the result shows under Last test.",
	"edit":    "Values changed; a new plan follows.",
	"commit":  "Committed to the add-on's git repository; the syncer applies the commit.",
	"remove":  "Removing the add-on.",
}

func (s *Server) render(w http.ResponseWriter, name string, code int, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := pages()[name].ExecuteTemplate(w, "layout", d); err != nil {
		s.Log.Error(err, "Rendering a page failed", "page", name)
	}
}

// pageSession returns the live session, as liveSession does, or redirects
// to the sign-in page.
func (s *Server) pageSession(w http.ResponseWriter, r *http.Request) (session, bool) {
	sess, refused := s.liveSession(r)
	if refused == nil {
		return sess, true
	}
	if refused.Code == http.StatusServiceUnavailable || refused.Code == http.StatusTooManyRequests {
		if refused.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(refused.retryAfter))
		}
		s.render(w, "signin", refused.Code, pageData{Title: "Sign in",
			Error: "The Kubernetes API server could not check your session just now; nothing was changed. Reload the page in a moment."})
		return session{}, false
	}
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
	return session{}, false
}

// pageWrite checks a form's CSRF token against the session.
func pageWrite(r *http.Request, sess session) bool {
	return r.PostFormValue("csrf") != "" && r.PostFormValue("csrf") == sess.csrf
}

// pageForm reads a page's posted form, of at most MaxBody bytes, and
// checks its CSRF token against the session. It returns 0, or the code and
// the message of the refusal: 413 for a form over MaxBody, 400 for a body
// that is no form, 403 for a CSRF token that is missing or old. nothing
// says what was not done ("changed", "created").
//
// NOTE: the form is parsed, and its error read, before the token is
// looked for: a body cut at the bound is read as no form at all, and its
// refusal blamed the CSRF token.
func pageForm(w http.ResponseWriter, r *http.Request, sess session, nothing string) (int, string) {
	if err := parseForm(w, r, MaxBody); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is over %d MiB, the most a page's form may send, so nothing was %s. Keep large values in a ConfigMap or Secret that the add-on's valuesFrom names.",
				tooLarge.Limit>>20, nothing)
		}
		return http.StatusBadRequest, fmt.Sprintf("The form could not be read (%v), so nothing was %s.", err, nothing)
	}
	if !pageWrite(r, sess) {
		return http.StatusForbidden, "The form was not sent from this page (its CSRF token is missing or old); nothing was " + nothing + "."
	}
	return 0, ""
}

// parseForm reads r's form, urlencoded or multipart, from a body bounded
// to limit bytes; a body past it is an *http.MaxBytesError.
func parseForm(w http.ResponseWriter, r *http.Request, limit int64) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	// NOTE: ParseMultipartForm too: ParseForm reads no multipart body
	// (curl -F, a form with enctype multipart/form-data) and leaves an
	// empty form, whose refusal blamed the CSRF token. ParseForm first,
	// since ParseMultipartForm drops its error (a body over the bound)
	// when it then says ErrNotMultipart.
	err := r.ParseForm()
	if err == nil {
		if err = r.ParseMultipartForm(limit); errors.Is(err, http.ErrNotMultipart) {
			err = nil
		}
	}
	return err
}

func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.render(w, "signin", http.StatusOK, pageData{Title: "Sign in"})
		return
	}
	if crossSite(r) {
		s.render(w, "signin", http.StatusForbidden, pageData{Title: "Sign in", Error: "Sign in from this page: the form was sent from another site, and nothing was signed in."})
		return
	}
	// NOTE: a form that cannot be read is said so, not read as one with
	// no token: a kubeconfig pasted in place of the token is over the
	// bound, and "paste a token" would not say what went wrong.
	if err := parseForm(w, r, maxSignInBody); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.render(w, "signin", http.StatusRequestEntityTooLarge, pageData{Title: "Sign in",
				Error: fmt.Sprintf("The form is over %d KiB, the most a sign-in may send, so nothing was signed in. Paste only the token, not a whole kubeconfig.", tooLarge.Limit>>10)})
			return
		}
		s.render(w, "signin", http.StatusBadRequest, pageData{Title: "Sign in", Error: fmt.Sprintf("The form could not be read (%v), so nothing was signed in.", err)})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		s.render(w, "signin", http.StatusUnauthorized, pageData{Title: "Sign in", Error: "Paste a Kubernetes token to sign in."})
		return
	}
	u, err := s.tokens.review(r.Context(), token, clientlimit.Of(r))
	if err != nil {
		// NOTE: only a refused token is blamed on the token: one the API
		// server could not review may be good, and would be rotated for
		// nothing.
		switch refusal := reviewRefusal(err); refusal.Code {
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", strconv.Itoa(refusal.retryAfter))
			s.render(w, "signin", refusal.Code, pageData{Title: "Sign in",
				Error: "Too many sign-ins came from your address just now; nothing was signed in. Try again in a few seconds."})
		case http.StatusUnauthorized:
			s.render(w, "signin", refusal.Code, pageData{Title: "Sign in", Error: "The Kubernetes API server did not accept that token."})
		default:
			s.render(w, "signin", http.StatusServiceUnavailable, pageData{Title: "Sign in",
				Error: "The Kubernetes API server could not check the token just now; nothing was signed in. Try again in a moment."})
		}
		return
	}
	id, sess := s.sessions.create(u, s.now())
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, Expires: sess.expires})
	http.Redirect(w, r, "/addons", http.StatusSeeOther)
}

// signOutPage ends the session whose form sent the CSRF token, and goes
// to the sign-in page.
//
// NOTE: the session is looked up, not reviewed: signing out only forgets
// what the server holds, as DELETE /api/v1/session does. A sign-out that
// waited for a TokenReview would fail while the API server is slow or the
// address's reviews are used up, and leave the session, and the user's
// token, in the server's memory for hours behind a cookie the person
// believes gone.
func (s *Server) signOutPage(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		// NOTE: no cookie to clear. A form another site's page sends
		// carries no Strict cookie, and a cookie-clearing answer to that
		// top-level navigation could clear it all the same: the person
		// would be signed out while the session, and their token, stayed
		// on the server, with no cookie left to end it by.
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	sess, ok := s.sessions.get(c.Value, s.now())
	if !ok {
		s.endSession(w, r)
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	// NOTE: a form that cannot be read is said so: read as one with no
	// CSRF token, it went back to the add-ons without a word, the session
	// still on.
	if err := parseForm(w, r, maxSignInBody); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the sign-out form is over %d KiB, the most it may send, so nothing was signed out: sign out from the page's button", tooLarge.Limit>>10), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, fmt.Sprintf("the form could not be read (%v), so nothing was signed out", err), http.StatusBadRequest)
		return
	}
	if pageWrite(r, sess) {
		// NOTE: a redirect, not an empty answer: the browser would stay
		// on the page it signed out from, showing its add-ons.
		s.endSession(w, r)
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/addons", http.StatusSeeOther)
}

func (s *Server) listPage(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.pageSession(w, r)
	if !ok {
		return
	}
	d := pageData{Title: "Add-ons", User: sess.user.Name, CSRF: sess.csrf,
		Namespace: strings.TrimSpace(r.URL.Query().Get("namespace")), Phase: r.URL.Query().Get("phase"),
		Phases: []capstanv1.Phase{capstanv1.PhaseProgressing, capstanv1.PhaseSynced, capstanv1.PhaseDegraded, capstanv1.PhaseOutOfSync, capstanv1.PhaseBlocked,
			capstanv1.PhaseSuspended, capstanv1.PhasePaused, capstanv1.PhaseFailed, capstanv1.PhaseDeleting}}
	// NOTE: the filter is checked as the API checks a namespace: a name
	// that is no DNS label would list nothing without a word, or fail in
	// the client as no answer of the API server's.
	if errs := validation.IsDNS1123Label(d.Namespace); d.Namespace != "" && len(errs) > 0 {
		d.Error = "Namespace: " + strings.Join(errs, "; ") + ". Type a namespace's name, or leave it empty for every namespace you may read."
		s.render(w, "list", http.StatusBadRequest, d)
		return
	}
	c, _, err := s.userClient(sess.user)
	if err != nil {
		d.Error = err.Error()
		s.render(w, "list", http.StatusInternalServerError, d)
		return
	}
	release, err := s.listTurn(r.Context())
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(listRetryAfter))
		d.Error = "Many lists are being read just now; nothing was changed. Reload the page in a few seconds."
		s.render(w, "list", errorFor(err).Code, d)
		return
	}
	// NOTE: held until the page is written: the list is in memory until then.
	defer release()
	answerDeadline(w)
	d.ListLimit = defaultListLimit
	opts := []client.ListOption{client.Limit(defaultListLimit)}
	if d.Namespace != "" {
		opts = append(opts, client.InNamespace(d.Namespace))
	}
	list := &capstanv1.AddonList{}
	if err := c.List(r.Context(), list, append(opts, client.Continue(r.URL.Query().Get("continue")))...); err != nil {
		d.Error = strings.TrimSuffix(errorFor(err).Message, ".") + "."
		if d.Namespace == "" {
			d.Error += " Pick a namespace you may read."
		}
		s.render(w, "list", errorFor(err).Code, d)
		return
	}
	for _, a := range list.Items {
		if d.Phase == "" || string(a.Status.Phase) == d.Phase {
			d.Addons = append(d.Addons, a)
		}
	}
	if list.Continue != "" {
		q := url.Values{"continue": {list.Continue}}
		for key, v := range map[string]string{"namespace": d.Namespace, "phase": d.Phase} {
			if v != "" {
				q.Set(key, v)
			}
		}
		d.More = "/addons?" + q.Encode()
	}
	repos := &capstanv1.AddonRepositoryList{}
	if err := c.List(r.Context(), repos, opts...); err == nil {
		d.Repositories, d.MoreRepositories = repos.Items, repos.Continue != ""
	}
	s.render(w, "list", http.StatusOK, d)
}

func (s *Server) addonPage(w http.ResponseWriter, r *http.Request, sess session) {
	d := pageData{User: sess.user.Name, CSRF: sess.csrf, Flash: flashes[r.URL.Query().Get("done")]}
	s.showAddon(w, r, sess, d, http.StatusOK)
}

// showAddon renders an add-on's page with what the user may do.
func (s *Server) showAddon(w http.ResponseWriter, r *http.Request, sess session, d pageData, code int) {
	key, err := target(r)
	if err == nil {
		var c client.Client
		if c, _, err = s.userClient(sess.user); err == nil {
			d.Addon, err = addons.Get(r.Context(), c, key)
			if err == nil {
				d.Can, err = s.can(r.Context(), sess.user, key)
			}
			if err == nil {
				d.Events, _ = s.addonEvents(r.Context(), c, key)
			}
			var repo *capstanv1.AddonRepository
			if err == nil {
				repo, err = s.managedByView(r.Context(), d.Addon)
			}
			if repo != nil {
				d.GitManaged = repo.Name
			}
		}
	}
	if err != nil {
		e := errorFor(err)
		d.Title, d.Error = key.Name, e.Message
		s.render(w, "list", e.Code, d)
		return
	}
	d.Title, d.Live = key.Name, true
	if cfg := s.config(); cfg.Selects(d.Addon.Labels) {
		d.Placed = cfg.Profile(d.Addon)
	}
	d.Actions = d.Can["approve"] || d.Can["update"] || d.Can["delete"]
	if d.Flash == "" && d.Error == "" {
		if d.GitManaged != "" {
			d.Flash = "This add-on is managed by git (AddonRepository " + d.GitManaged + "): each change below is made by a commit to it."
		} else if gone := gitManaged(d.Addon); gone != "" {
			d.Flash = "This add-on's AddonRepository " + gone + " is gone: no repository manages it any more, and each change below is made in the cluster."
		}
	}
	s.render(w, "addon", code, d)
}

// action runs one form of an add-on's page, then shows the page again.
func (s *Server) action(w http.ResponseWriter, r *http.Request, sess session) {
	d := pageData{User: sess.user.Name, CSRF: sess.csrf}
	if code, msg := pageForm(w, r, sess, "changed"); code != 0 {
		d.Error = msg
		s.showAddon(w, r, sess, d, code)
		return
	}
	key, err := target(r)
	var c client.Client
	if err == nil {
		c, _, err = s.userClient(sess.user)
	}
	verb := r.PathValue("action")
	done := verb
	if err == nil {
		done, err = s.pageAction(r.Context(), r, sess.user, c, key, verb)
	}
	if err != nil {
		e := errorFor(err)
		d.Error = e.Message
		s.showAddon(w, r, sess, d, e.Code)
		return
	}
	s.Log.Info("Page write", "user", sess.user.Name, "verb", verb, "addon", key.String(), "plan", r.PostFormValue("hash"))
	if verb == "remove" {
		http.Redirect(w, r, "/addons?namespace="+url.QueryEscape(key.Namespace), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/addons/"+url.PathEscape(key.Namespace)+"/"+url.PathEscape(key.Name)+"?done="+done, http.StatusSeeOther)
}

func (s *Server) pageAction(ctx context.Context, r *http.Request, u User, c client.Client, key client.ObjectKey, verb string) (string, error) {
	a, err := addons.Get(ctx, c, key)
	if err != nil {
		return "", err
	}
	// NOTE: every action form names the Addon its page showed, so that a
	// page left open never acts on a newer Addon of the same name.
	uid := types.UID(r.PostFormValue("uid"))
	if uid == "" {
		return "", badRequest("uid", "the form names no Addon: reload the page, and try again; nothing was changed")
	}
	if err := (addons.Seen{UID: uid}).Check(a); err != nil {
		return "", err
	}
	switch verb {
	case "refresh":
		// NOTE: a git-managed Addon too: the request changes no definition.
		_, err := addons.Refresh(ctx, c, key, time.Now())
		return verb, err
	case "test":
		_, err := addons.RequestTest(ctx, c, key, time.Now())
		return verb, err
	}
	repo, err := s.managedBy(ctx, a)
	if err != nil {
		return "", err
	}
	if repo != nil {
		return s.pageCommit(ctx, r, u, c, repo, a, verb)
	}
	switch verb {
	case "install", "approve":
		hash := r.PostFormValue("hash")
		if hash == "" {
			return "", badRequest("hash", "the form names no plan")
		}
		op := addons.Approve
		if verb == "install" {
			op = addons.Install
		} else if gitManaged(a) != "" {
			// NOTE: no repository manages a (managedBy found none), so
			// its refusal points to Install, not to a commit.
			if err := addons.RefuseSuspendedOutsideGit(a, key); err != nil {
				return "", err
			}
		}
		_, err = op(ctx, c, key, hash)
		return verb, err
	case "suspend", "resume":
		return verb, addons.SetSuspend(ctx, c, key, verb == "suspend")
	case "remove":
		return verb, addons.Remove(ctx, c, key, addons.RemoveOptions{UID: uid,
			Uninstall: r.PostFormValue("uninstall") == "true", KeepValues: r.PostFormValue("keepValues") == "true"})
	}
	return "", apiError{Code: http.StatusNotFound, Reason: "NotFound", Message: "no such action: " + verb}
}

// pageCommit takes an action on an add-on that git manages: approving its
// plan is done in the cluster, as the API does it; suspending, resuming and
// removing are commits of its definition.
func (s *Server) pageCommit(ctx context.Context, r *http.Request, u User, c client.Client, repo *capstanv1.AddonRepository, a *capstanv1.Addon, verb string) (string, error) {
	key := client.ObjectKeyFromObject(a)
	var change func(ctx context.Context, wr *gitops.Writer, name string) (string, error)
	switch verb {
	case "approve":
		hash := r.PostFormValue("hash")
		if hash == "" {
			return "", badRequest("hash", "the form names no plan")
		}
		_, err := addons.Approve(ctx, c, key, hash)
		return verb, err
	case "suspend":
		change = func(ctx context.Context, wr *gitops.Writer, name string) (string, error) {
			return wr.Suspend(ctx, name)
		}
	case "resume":
		change = func(ctx context.Context, wr *gitops.Writer, name string) (string, error) { return wr.Resume(ctx, name) }
	case "remove":
		if r.PostFormValue("keepValues") == "true" {
			return "", badRequest("keepValues", "a git-managed add-on is in the cluster profile, which keeps no values objects")
		}
		_, err := s.removeByCommit(ctx, u, c, repo, a, r.PostFormValue("uninstall") == "true")
		return verb, err
	default:
		return "", apiError{Code: http.StatusConflict, Reason: "Conflict",
			Message: fmt.Sprintf("Addon %s is managed by git (AddonRepository %s): %s it by a commit", key, repo.Name, verb)}
	}
	if _, err := s.commitChange(ctx, u, repo, a, verb, "patch", change); err != nil {
		return "", err
	}
	return "commit", nil
}

// staticFiles are the files under web/ that the pages link, with their
// types: only these are served, never the templates, and no folder is
// listed.
var staticFiles = map[string]string{
	"capstan.css": "text/css; charset=utf-8",
	"live.js":     "text/javascript; charset=utf-8",
}

// pageSecurity is the Content Security Policy of every answer of the page:
// its own script and style only, no frame around it, forms sent only to
// itself.
const pageSecurity = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// pageHeaders sets the page's security headers on every answer of next:
// pages, static files, redirects and errors alike.
func pageHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", pageSecurity)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		// NOTE: the server speaks HTTPS only, so a browser may as well
		// never try plain HTTP on this host.
		h.Set("Strict-Transport-Security", "max-age=31536000")
		next.ServeHTTP(w, r)
	})
}

// staticFile serves one of staticFiles.
func staticFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ctype, ok := staticFiles[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	data, err := webFS.ReadFile("web/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ctype)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

// pageRoutes adds the page to mux: every path that no other route of mux
// takes goes to the page's own mux, behind its security headers.
func (s *Server) pageRoutes(root *http.ServeMux) {
	mux := http.NewServeMux()
	root.Handle("/", pageHeaders(mux))
	mux.HandleFunc("GET /static/{file}", staticFile)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/addons", http.StatusSeeOther) })
	mux.HandleFunc("GET /signin", s.signInPage)
	mux.HandleFunc("POST /signin", s.signInPage)
	mux.HandleFunc("POST /signout", s.signOutPage)
	mux.HandleFunc("GET /addons", s.listPage)
	mux.HandleFunc("GET /addons/{namespace}/{name}", s.pageRead(s.addonPage))
	mux.HandleFunc("GET /catalog", s.catalogPage)
	mux.HandleFunc("GET /catalog/{entry}", s.catalogPage)
	mux.HandleFunc("POST /catalog/{entry}", s.catalogPage)
	mux.HandleFunc("GET /new", s.newAddonPage)
	mux.HandleFunc("POST /new", s.newAddonPage)
	mux.HandleFunc("GET /addons/{namespace}/{name}/edit", s.pageRead(s.editPage))
	// NOTE: the forms too: a form that is refused (no CSRF token, an
	// unknown action, a missing field) answers with the whole add-on's
	// page, and the edit form reads the whole Addon before its token is
	// checked.
	mux.HandleFunc("POST /addons/{namespace}/{name}/edit", s.pageRead(s.editPage))
	mux.HandleFunc("POST /addons/{namespace}/{name}/{action}", s.pageRead(s.action))
}
