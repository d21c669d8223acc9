package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/server/body"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/strictjson"
	"capstan.dev/capstan/internal/values"
)

// apiError is the body of every error the API answers.
type apiError struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Field names the request field at fault, when one is.
	Field string `json:"field,omitempty"`
	// retryAfter, when not zero, is the answer's Retry-After in seconds.
	retryAfter int
}

func (e apiError) Error() string { return e.Message }

func badRequest(field, format string, args ...any) apiError {
	return apiError{Code: http.StatusBadRequest, Reason: "BadRequest", Message: fmt.Sprintf(format, args...), Field: field}
}

// errorFor maps an operation's error to the API's answer: the API server's
// own status for its refusals (403 for RBAC, 404, 409 for a conflict), 409
// for a stale or missing plan and for the approval of a suspended Addon or
// of one whose sync is held since its profile changed,
// 422 for a blocked plan, invalid values, and a source or chart the person
// must fix (a version the repository lacks, a digest that does not match,
// a refused archive or address, a template that fails), 502 or 503 for a
// source that failed on its side, 409 for a definition file that exists
// already or is missing in git, 413 for a body over the limit, 429 when
// the commits to git, or the git data in memory, are busy.
func errorFor(err error) apiError {
	var ae apiError
	var bad *body.Error
	var tooLarge *http.MaxBytesError
	var status apierrors.APIStatus
	var invalid *values.InvalidError
	var fetch *source.FetchError
	var secret *addons.SecretValuesError
	var unchecked *addons.UncheckedValuesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &bad):
		return badRequest(bad.Field, "%s", bad.Message)
	case errors.As(err, &tooLarge):
		return apiError{Code: http.StatusRequestEntityTooLarge, Reason: "RequestEntityTooLarge", Message: fmt.Sprintf("the request body is over %d bytes", tooLarge.Limit)}
	case errors.Is(err, addons.ErrStalePlan), errors.Is(err, addons.ErrNoPlan), errors.Is(err, addons.ErrChanged), errors.Is(err, addons.ErrSuspended),
		errors.Is(err, addons.ErrProfileChanged), errors.Is(err, controller.ErrProfileHeld), errors.Is(err, addons.ErrOtherShard), errors.Is(err, addons.ErrNotSelected),
		errors.Is(err, gitops.ErrExists), errors.Is(err, gitops.ErrNotExist):
		return apiError{Code: http.StatusConflict, Reason: "Conflict", Message: err.Error()}
	case errors.As(err, new(*gitops.InvalidError)):
		return apiError{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: err.Error(), Field: "definition"}
	case errors.As(err, &secret):
		field := secret.Field
		if field == "" {
			field = "spec.values"
		}
		return apiError{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: err.Error(), Field: field}
	case errors.As(err, &unchecked):
		// NOTE: the fetch's own error says whose fault it is (the source's
		// 502, a refused address's 422); one that says nothing is still the
		// person's to get past (credentials, valuesFrom), not the server's.
		out := errorFor(unchecked.Err)
		if out.Code == http.StatusInternalServerError {
			out.Code, out.Reason = http.StatusUnprocessableEntity, "Invalid"
		}
		out.Message, out.Field = err.Error(), "definition"
		return out
	case errors.As(err, new(*gitops.ConflictError)), errors.As(err, new(*gitops.ValuesConflictError)):
		return apiError{Code: http.StatusConflict, Reason: "Conflict", Message: err.Error()}
	case errors.Is(err, gitops.ErrNoChange), errors.Is(err, gitops.ErrLastDefinition), errors.Is(err, gitops.ErrKeptByAnotherFile), errors.Is(err, addons.ErrPaused), errors.Is(err, addons.ErrBeingRemoved):
		return apiError{Code: http.StatusConflict, Reason: "Conflict", Message: err.Error()}
	case errors.Is(err, gitops.ErrBusy), errors.Is(err, source.ErrGitMemoryBusy):
		return apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", Message: err.Error(), retryAfter: commitRetryAfter}
	case errors.Is(err, source.ErrInteractiveTimeout):
		return apiError{Code: http.StatusServiceUnavailable, Reason: "ServiceUnavailable", Message: err.Error()}
	case errors.Is(err, addons.ErrNoValuesToKeep):
		return apiError{Code: http.StatusBadRequest, Reason: "BadRequest", Message: err.Error(), Field: "keepValues"}
	case errors.Is(err, addons.ErrBadPatch):
		field := "spec"
		if unknown := (*strictjson.UnknownField)(nil); errors.As(err, &unknown) {
			field = unknown.Path
		}
		return apiError{Code: http.StatusBadRequest, Reason: "BadRequest", Message: err.Error(), Field: field}
	case errors.Is(err, addons.ErrPlanBlocked), errors.Is(err, source.ErrGitTooLarge), errors.As(err, new(*render.LimitError)), errors.As(err, new(*source.SignatureError)),
		errors.As(err, new(*source.DigestMismatchError)), errors.As(err, new(*source.ArchiveError)), errors.As(err, new(*render.TemplateError)),
		errors.As(err, new(*netguard.RefusedError)), errors.As(err, new(*source.SpecError)):
		return apiError{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: err.Error()}
	case errors.As(err, &fetch) && fetch.Status != 0:
		return fetchErrorFor(fetch, err)
	case errors.As(err, &invalid):
		out := apiError{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: err.Error()}
		if len(invalid.Errors) > 0 {
			out.Field = invalid.Errors[0].Path
		}
		return out
	case errors.As(err, &status):
		st := status.Status()
		out := apiError{Code: int(st.Code), Reason: string(st.Reason), Message: st.Message}
		if out.Code == 0 {
			out.Code = http.StatusInternalServerError
		}
		if st.Details != nil && len(st.Details.Causes) > 0 {
			out.Field = st.Details.Causes[0].Field
		}
		return out
	}
	return apiError{Code: http.StatusInternalServerError, Reason: "InternalError", Message: err.Error()}
}

// fetchErrorFor maps a source's HTTP answer: a 4xx (a chart version or
// path the repository does not have, credentials it refuses) is the
// person's to fix in the spec, so 422; 408 and 429 are the source being
// busy, and a 5xx its own fault, which a retry may get past, so 503 and
// 502.
func fetchErrorFor(fetch *source.FetchError, err error) apiError {
	switch {
	case fetch.Status == http.StatusRequestTimeout, fetch.Status == http.StatusTooManyRequests, fetch.Status == http.StatusServiceUnavailable:
		return apiError{Code: http.StatusServiceUnavailable, Reason: "ServiceUnavailable", Message: err.Error()}
	case fetch.Status >= 400 && fetch.Status < 500:
		return apiError{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: err.Error()}
	case fetch.Status >= 500:
		return apiError{Code: http.StatusBadGateway, Reason: "BadGateway", Message: err.Error()}
	}
	return apiError{Code: http.StatusInternalServerError, Reason: "InternalError", Message: err.Error()}
}

func writeError(w http.ResponseWriter, e apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.Code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// target reads and checks the namespace and name of a request's path,
// before anything reaches the API server.
func target(r *http.Request) (client.ObjectKey, error) {
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if errs := validation.IsDNS1123Label(key.Namespace); key.Namespace != "" && len(errs) > 0 {
		return key, badRequest("namespace", "namespace %q: %s", key.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(key.Name); key.Name != "" && len(errs) > 0 {
		return key, badRequest("name", "name %q: %s", key.Name, strings.Join(errs, "; "))
	}
	return key, nil
}

// maxListLimit bounds one page of a list. NOTE: with each Addon up to
// 128 KiB of diffs besides its inventory and history, a page is held about
// three times over while it is answered (the API server's response, the
// decoded list, the encoder's buffer): defaultMaxLists pages of 250 stay
// well inside the controller's 1 GiB.
const maxListLimit = 250

// listWriteTimeout bounds the writing of a list's answer, during which the
// list holds its turn: a client that asks for a page and does not read it
// would otherwise hold one of defaultMaxLists turns for the server's whole
// WriteTimeout, and four such clients would turn every list away.
const listWriteTimeout = 20 * time.Second

// answerDeadline shortens the write deadline of the answer w is writing
// to listWriteTimeout from now.
func answerDeadline(w http.ResponseWriter) {
	// An error means the writer cannot take deadlines (a test's recorder):
	// the server's WriteTimeout still holds.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(listWriteTimeout))
}

// defaultListLimit is the page of a list that names no limit, and of the
// Add-ons page.
const defaultListLimit = 100

// listRetryAfter is the Retry-After, in seconds, of a list refused because
// the server reads as many lists as it may.
const listRetryAfter = 2

// listWait is how long a list waits for a turn before it is refused.
// NOTE: a list takes well under a second, so a few people who open the
// Add-ons page at once wait their turn rather than being turned away.
const listWait = time.Second

// listTurn takes one of the server's turns to read a list of Addons,
// waiting at most listWait, and returns the function that gives it back.
// Every turn taken is a 429 with a Retry-After. NOTE: the lists are not
// shared out by user (their turns are unshared), so every list takes its
// turn as the same one.
func (s *Server) listTurn(ctx context.Context) (func(), error) {
	if release, ok, _ := s.lists.wait(ctx, "", listWait); ok {
		return release, nil
	}
	return nil, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", retryAfter: listRetryAfter,
		Message: fmt.Sprintf("%d lists of Addons are being read, the most this server reads at once; try again in %d seconds", s.lists.total, listRetryAfter)}
}

// readRetryAfter is the Retry-After, in seconds, of a read of one Addon
// refused because the server reads as many as it may.
const readRetryAfter = 2

// readTurn takes one of the server's turns to read and answer one Addon
// (its API get, its events, its page or its edit view) for user, waiting
// at most listWait. NOTE: an Addon is read whole into the controller's
// memory and written out from there, with up to 128 KiB of diffs besides
// its inventory and history: without a bound, clients that ask for one
// Addon on many connections and read nothing would each pin it for the
// server's WriteTimeout, past the controller's memory limit, as lists
// would without theirs. The bound is shared out by user (see turns), so
// that one tenant who holds its turns holds only its own share.
func (s *Server) readTurn(ctx context.Context, user string) (func(), full, error) {
	release, ok, met := s.reads.wait(ctx, user, listWait)
	if ok {
		return release, met, nil
	}
	if met == fullShare {
		return nil, met, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", retryAfter: readRetryAfter,
			Message: fmt.Sprintf("%d add-on(s) are being read for %s, the most this server reads at once for one user (or the ServiceAccounts of one namespace); try again in %d seconds", s.reads.perShare, shareOf(user), readRetryAfter)}
	}
	return nil, met, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", retryAfter: readRetryAfter,
		Message: fmt.Sprintf("%d add-ons are being read, the most this server reads at once; try again in %d seconds", s.reads.total, readRetryAfter)}
}

// apiRead runs an API read of one Addon in one of the server's read turns,
// held until its answer is written, which has listWriteTimeout to be read
// from its first byte; past the bound it answers 429 with a Retry-After.
func (s *Server) apiRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		release, _, err := s.readTurn(r.Context(), userOf(r).Name)
		if err != nil {
			writeError(w, errorFor(err))
			return
		}
		defer release()
		h(&deadlineWriter{ResponseWriter: w}, r)
	}
}

// pageRead is apiRead for the page's routes that show one add-on whole
// (its page, its edit view, and the forms that answer with either): past
// the bound it shows the page with a 429, a Retry-After and what to do.
// NOTE: the session first, so that the turn counts against the user's
// share; a request with no session is redirected at once, and holds no
// turn.
func (s *Server) pageRead(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.pageSession(w, r)
		if !ok {
			return
		}
		release, met, err := s.readTurn(r.Context(), sess.user.Name)
		if err != nil {
			msg := "Many add-ons are being read just now; nothing was changed. Reload the page in a few seconds."
			if met == fullShare {
				msg = "You are reading as many add-ons at once as one person may (other tabs, or a client of your account, are reading them); nothing was changed. Reload the page in a few seconds."
			}
			w.Header().Set("Retry-After", strconv.Itoa(readRetryAfter))
			s.render(w, "list", http.StatusTooManyRequests, pageData{Title: "Busy", User: sess.user.Name, CSRF: sess.csrf, Error: msg})
			return
		}
		defer release()
		h(&deadlineWriter{ResponseWriter: w}, r, sess)
	}
}

// deadlineWriter gives its answer listWriteTimeout to be written from its
// first byte (answerDeadline), not from when the handler started: a view
// that fetches a chart first may take longer than that before it writes.
type deadlineWriter struct {
	http.ResponseWriter
	started bool
}

func (w *deadlineWriter) start() {
	if !w.started {
		w.started = true
		answerDeadline(w.ResponseWriter)
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// listPage reads a list's paging, as the Kubernetes API takes it: limit
// (at most maxListLimit Addons in the answer, whose metadata.continue then
// names the next page; defaultListLimit when not given) and continue. A
// thousand add-ons, each with its plan and diffs, are megabytes in one
// answer. A key the list does not take is refused, as every endpoint
// refuses one.
func listPage(r *http.Request) ([]client.ListOption, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("", "the query string cannot be read: %v", err)
	}
	opts := []client.ListOption{client.Limit(defaultListLimit)}
	for _, key := range slices.Sorted(maps.Keys(q)) {
		if len(q[key]) > 1 {
			return nil, badRequest(key, "%s is given %d times; give it once", key, len(q[key]))
		}
		v := q[key][0]
		switch key {
		case "limit":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > maxListLimit {
				return nil, badRequest(key, "limit=%q is not a whole number from 1 to %d", v, maxListLimit)
			}
			opts = append(opts, client.Limit(n))
		case "continue":
			opts = append(opts, client.Continue(v))
		default:
			return nil, badRequest(key, "unknown query parameter %q: %s %s takes only limit and continue", key, r.Method, r.URL.Path)
		}
	}
	return opts, nil
}

// queryFlags reads the true-or-false query parameters an endpoint takes
// into flags. It refuses a key the endpoint does not take, naming the ones
// it does: a misspelt flag (keep_values for keepValues) must not be
// dropped, since the removal would then do what the caller meant to
// prevent. A key given twice, or with no value, is refused too.
func queryFlags(r *http.Request, flags map[string]*bool) error {
	return queryParams(r, flags, nil)
}

// queryParams reads the query parameters an endpoint takes: flags, true
// or false, and texts, any value but empty. It refuses what queryFlags
// refuses.
func queryParams(r *http.Request, flags map[string]*bool, texts map[string]*string) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("", "the query string cannot be read: %v", err)
	}
	allowed := slices.Sorted(maps.Keys(flags))
	for k := range texts {
		allowed = append(allowed, k)
	}
	slices.Sort(allowed)
	for _, key := range slices.Sorted(maps.Keys(q)) {
		flag, isFlag := flags[key]
		text, isText := texts[key]
		if !isFlag && !isText && len(allowed) == 0 {
			return badRequest(key, "unknown query parameter %q: %s %s takes no query parameters", key, r.Method, r.URL.Path)
		}
		if !isFlag && !isText {
			return badRequest(key, "unknown query parameter %q: %s %s takes only %s", key, r.Method, r.URL.Path, andList(allowed))
		}
		if len(q[key]) > 1 {
			return badRequest(key, "%s is given %d times; give it once", key, len(q[key]))
		}
		if isText {
			if q[key][0] == "" {
				return badRequest(key, "%s is given with no value; give one, or leave %s out", key, key)
			}
			*text = q[key][0]
			continue
		}
		b, err := strconv.ParseBool(q[key][0])
		if err != nil {
			return badRequest(key, "%s=%q is not true or false", key, q[key][0])
		}
		*flag = b
	}
	return nil
}

// andList joins words as a sentence lists them: "a", "a and b", "a, b
// and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// noQuery refuses a request with any query parameter, for the endpoints
// that take none: a flag they do not know, such as dryRun=All, must be
// refused rather than dropped, or the write it was meant to prevent is
// made for real.
func noQuery(r *http.Request) error { return queryFlags(r, nil) }

// request reads what every handler starts with: the Addon's key from the
// path, the JSON body decoded into into (when not nil), and a client that
// acts as the user. It refuses any query parameter: the handlers that take
// one (the lists, DELETE) read the path without it. On a problem it
// answers, and ok is false.
func (s *Server) request(w http.ResponseWriter, r *http.Request, into any) (key client.ObjectKey, c client.Client, cfg *rest.Config, ok bool) {
	key, err := target(r)
	if err == nil {
		err = noQuery(r)
	}
	if err == nil && into != nil {
		err = body.Decode(r.Body, into)
	}
	if err == nil {
		c, cfg, err = s.userClient(userOf(r))
	}
	if err != nil {
		writeError(w, errorFor(err))
		return key, nil, nil, false
	}
	return key, c, cfg, true
}

// audit logs one write: who, what, which Addon and which plan. It never
// logs a value.
func (s *Server) audit(r *http.Request, verb string, key client.ObjectKey, hash string) {
	s.Log.Info("API write", "user", userOf(r).Name, "verb", verb, "addon", key.String(), "plan", hash)
}

// auditRequest logs a write that asks the controller for something (a
// refresh, a test run): who, what, which Addon, and the request's token.
func (s *Server) auditRequest(r *http.Request, verb string, key client.ObjectKey, request string) {
	s.Log.Info("API write", "user", userOf(r).Name, "verb", verb, "addon", key.String(), "request", request)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	key, err := target(r)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	opts, err := listPage(r)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	release, err := s.listTurn(r.Context())
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	defer release()
	answerDeadline(w)
	c, _, err := s.userClient(userOf(r))
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	list := &capstanv1.AddonList{}
	if key.Namespace != "" {
		opts = append(opts, client.InNamespace(key.Namespace))
	}
	if err := c.List(r.Context(), list, opts...); err != nil {
		writeError(w, errorFor(err))
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	key, c, _, ok := s.request(w, r, nil)
	if !ok {
		return
	}
	a, err := addons.Get(r.Context(), c, key)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) add(w http.ResponseWriter, r *http.Request) {
	var req body.Add
	key, c, _, ok := s.request(w, r, &req)
	if !ok {
		return
	}
	key.Name = req.Name
	if err := req.Check(); err != nil {
		writeError(w, errorFor(err))
		return
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: req.Name}, Spec: req.Spec}
	if err := addons.ForShard(a, s.Config); err != nil {
		writeError(w, errorFor(err))
		return
	}
	// NOTE: before anything is written: a secret input in spec.values
	// would be stored, readable by anyone who may view the Addon, before
	// the controller Blocks it.
	check := s.withConfigMaps(s.chartCheck(userOf(r), "create", key), c, a, apiWarning(w))
	if err := s.checkSecretValues(r.Context(), check, req.Spec, nil, apiSecrets, apiWarning(w)); err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.warnUnknownSecretInputs(r.Context(), check, req.Spec, req.SecretInputs, apiWarning(w))
	created, err := addons.Add(r.Context(), c, a, req.SecretInputs)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.audit(r, "add", key, "")
	writeJSON(w, http.StatusCreated, created)
}

// plan answers the plan of the Addon's spec, or of the change in the body,
// computed now and saved nowhere.
func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	var req body.Change
	key, c, cfg, ok := s.request(w, r, &req)
	if !ok {
		return
	}
	if req.Definition != "" {
		writeError(w, badRequest("definition", `a plan takes a spec patch only, not a definition: send {"spec": <JSON merge patch>}`))
		return
	}
	if len(req.SecretInputs) > 0 {
		writeError(w, badRequest("secretInputs", "a plan saves nothing: it takes a spec patch only"))
		return
	}
	// NOTE: the turn first, then the access review, so that plans past
	// the bound cost the API server nothing.
	u := userOf(r)
	release, ok, met := s.plans.take(u.Name)
	switch {
	case ok:
	case met == fullShare:
		writeError(w, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", retryAfter: planRetryAfter,
			Message: fmt.Sprintf("%d plan(s) of %s are being computed, the most this server computes at once for one user (or the ServiceAccounts of one namespace); try again in %d seconds", s.plans.perShare, shareOf(u.Name), planRetryAfter)})
		return
	default:
		writeError(w, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", retryAfter: planRetryAfter,
			Message: fmt.Sprintf("%d plans are being computed, the most this server computes at once; try again in %d seconds", s.plans.total, planRetryAfter)})
		return
	}
	defer release()
	// NOTE: a plan of a change makes the controller fetch whatever source
	// the patch names, through its guard and into the chart cache its
	// reconciles share, and render it: without this review, anyone who may
	// read one Addon could make the controller fetch any link and read the
	// errors as a port scanner's answers, as pageFetch guards against for
	// the pages. The Addon's own spec is one its editors chose, so a plain
	// plan needs only the read.
	if changesSpec(req.Spec) {
		if err := s.authorize(r.Context(), u, "patch", key, "no change of it was planned (send no spec to plan the Addon as it is)"); err != nil {
			writeError(w, errorFor(err))
			return
		}
	}
	// NOTE: the controller's own configuration, so the chart renders in its
	// sandbox, bounded in time and memory, and the namespace gets the
	// profile the controller gives it; and the controller's own reader for
	// the platform ConfigMap, whose facts every add-on gets and which no
	// tenant may read in the controller's namespace.
	planner := addons.Planner{Client: c, RestConfig: cfg, Fetcher: s.Fetcher, Config: s.Config, PlatformReader: s.Controller}
	if changesSpec(req.Spec) {
		// NOTE: a judge of the planner's, so that the Addon is read once,
		// and another shard's is refused (409) before the API server is
		// asked to judge a change of it.
		planner.Judge = func(ctx context.Context, current, changed *capstanv1.Addon) error {
			return dryRunChange(ctx, c, current, changed)
		}
	}
	// NOTE: Interactive stops the plan's fetch when the caller hangs up,
	// unless a reconcile joined it, so the turn let go on return was the
	// fetch's own; and bounds it by the fetch timeout of pages and plans.
	_, p, err := planner.PlanChange(source.Interactive(r.Context(), s.fetchTimeout()), key, req.Spec)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	// NOTE: the turn is held until the answer is written, and a plan's
	// uncut diffs can be megabytes: a client that asks and does not read
	// would otherwise hold one of the server's few plan turns for its whole
	// WriteTimeout, and turn every other plan away meanwhile.
	answerDeadline(w)
	writeJSON(w, http.StatusOK, p)
}

// dryRunChange has the API server judge changed, the Addon a plan's spec
// patch would make of current, with the user's client and writing nothing,
// so that a change the CRD's rules refuse (two sources, an unknown
// deletionPolicy, a version on a chart.url) is answered with their 422 and
// its field before anything is fetched. NOTE: a plan that went on would
// plan something else (the fetcher takes spec.chart before spec.git), and
// answer 200 for a change the same patch as an edit is refused.
func dryRunChange(ctx context.Context, c client.Client, current, changed *capstanv1.Addon) error {
	// A copy: the dry run answers the Addon as the API server would store
	// it, and the plan is of changed as the patch makes it.
	return c.Patch(ctx, changed.DeepCopy(), client.MergeFrom(current), client.DryRunAll)
}

// changesSpec tells whether a plan's spec patch changes anything: no
// patch, null and {} plan the Addon as it is.
func changesSpec(patch json.RawMessage) bool {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(patch, &fields); err != nil {
		// Not an object: PlanChange refuses it, and this must not let it
		// pass unreviewed.
		return len(bytes.TrimSpace(patch)) > 0 && string(bytes.TrimSpace(patch)) != "null"
	}
	return len(fields) > 0
}

// planRetryAfter is the Retry-After, in seconds, of a plan refused because
// the server computes as many as it may.
const planRetryAfter = 5

// commitRetryAfter is the Retry-After, in seconds, of a change of a
// git-managed add-on refused because every commit turn stayed taken for
// the writer's whole wait (gitops.ErrBusy): about that wait.
const commitRetryAfter = 10

// edit changes an Addon's spec and secret inputs.
func (s *Server) edit(w http.ResponseWriter, r *http.Request) {
	var req body.Edit
	key, c, _, ok := s.request(w, r, &req)
	if !ok {
		return
	}
	if err := req.Check(); err != nil {
		writeError(w, errorFor(err))
		return
	}
	current, err := addons.Get(r.Context(), c, key)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	// NOTE: the version the client read is checked before anything else,
	// a commit too: a change made to an Addon that changed since, or to an
	// older Addon of the same name, would undo what another person did.
	seen := addons.Seen{UID: types.UID(req.UID), Generation: req.Generation}
	if err := seen.Check(current); err != nil {
		writeError(w, errorFor(err))
		return
	}
	repo, err := s.managedBy(r.Context(), current)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	if repo != nil {
		if req.Definition == "" || len(req.Spec) > 0 || len(req.SecretInputs) > 0 {
			writeError(w, apiError{Code: http.StatusConflict, Reason: "Conflict", Field: "definition",
				Message: fmt.Sprintf("Addon %s is managed by git (AddonRepository %s): send its whole new definition as \"definition\", which is committed", key, repo.Name)})
			return
		}
		s.commit(w, r, repo, current, "edit", "patch", func(ctx context.Context, wr *gitops.Writer, name string) (string, error) {
			return wr.Edit(ctx, name, []byte(req.Definition), req.Base)
		})
		return
	}
	if req.Definition != "" {
		writeError(w, badRequest("definition", "Addon %s is not managed by git: edit its spec instead", key))
		return
	}
	// NOTE: only the values this edit sets or changes are refused: a
	// secret input that spec.values holds already would otherwise make
	// the Addon impossible to edit until it is moved.
	next, err := addons.PatchedSpec(current, req.Spec)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	check := s.withConfigMaps(s.chartCheck(userOf(r), "patch", key), c, next, apiWarning(w))
	if err := s.checkSecretValues(r.Context(), check, next.Spec, current.Spec.Values, apiSecrets, apiWarning(w)); err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.warnUnknownSecretInputs(r.Context(), check, next.Spec, req.SecretInputs, apiWarning(w))
	// NOTE: the check judged the values against current, read before a
	// chart fetch that may take --page-fetch-timeout: an edit of the values
	// is made to that spec or to none (409), so that a secret input
	// current held, and another writer moved out since, is not written
	// back as one held already.
	if !bytes.Equal(rawOf(next.Spec.Values), rawOf(current.Spec.Values)) {
		if seen.UID == "" {
			seen.UID = current.UID
		}
		if seen.Generation == 0 {
			seen.Generation = current.Generation
		}
	}
	a, err := addons.EditSeen(s.warnInLog(r.Context(), userOf(r).Name), c, key, seen, req.Spec, req.SecretInputs)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.audit(r, "edit", key, "")
	writeJSON(w, http.StatusOK, a)
}

// capabilities answers which actions the user may take on the Addons of a
// namespace, or on one Addon, as the API server's SelfSubjectAccessReviews
// say, so that a page shows only the buttons that would work.
func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	key, err := target(r)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	can, err := s.can(r.Context(), userOf(r), key)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	writeJSON(w, http.StatusOK, can)
}

// can asks the API server, with the user's token, which actions the user
// may take on a namespace's Addons, or on one when key names it.
func (s *Server) can(ctx context.Context, u User, key client.ObjectKey) (map[string]bool, error) {
	cs, err := kubernetes.NewForConfig(s.userConfig(u))
	if err != nil {
		return nil, err
	}
	checks := map[string]authorizationv1.ResourceAttributes{
		"list":            {Namespace: key.Namespace, Verb: "list", Group: capstanv1.GroupVersion.Group, Resource: "addons"},
		"create":          {Namespace: key.Namespace, Verb: "create", Group: capstanv1.GroupVersion.Group, Resource: "addons"},
		"setSecretInputs": {Namespace: key.Namespace, Verb: "create", Resource: "secrets"},
	}
	if key.Name != "" {
		for _, verb := range []string{"get", "delete"} {
			checks[verb] = authorizationv1.ResourceAttributes{Namespace: key.Namespace, Name: key.Name, Verb: verb, Group: capstanv1.GroupVersion.Group, Resource: "addons"}
		}
		// NOTE: approving, installing, suspending and editing are merge
		// patches, which RBAC grants as the verb patch, not update: a role
		// with update alone would be shown buttons that answer 403.
		checks["update"] = authorizationv1.ResourceAttributes{Namespace: key.Namespace, Name: key.Name, Verb: "patch", Group: capstanv1.GroupVersion.Group, Resource: "addons"}
		checks["approve"] = checks["update"]
	}
	out := map[string]bool{}
	for name, attrs := range checks {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		out[name] = review.Status.Allowed
	}
	return out, nil
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	s.approval(w, r, "approve", addons.Approve)
}

func (s *Server) install(w http.ResponseWriter, r *http.Request) {
	s.approval(w, r, "install", addons.Install)
}

func (s *Server) approval(w http.ResponseWriter, r *http.Request, verb string,
	op func(ctx context.Context, c client.Client, key client.ObjectKey, hash string) (addons.Approval, error)) {
	var req body.Approval
	key, c, _, ok := s.request(w, r, &req)
	if !ok {
		return
	}
	if err := req.Check(); err != nil {
		writeError(w, errorFor(err))
		return
	}
	if verb == "install" {
		if err := s.refuseGitManaged(r.Context(), c, key, "resume it by a commit, then approve its plan"); err != nil {
			writeError(w, errorFor(err))
			return
		}
	} else if err := s.refuseSuspendedOutsideGit(r.Context(), c, key); err != nil {
		writeError(w, errorFor(err))
		return
	}
	a, err := op(r.Context(), c, key, req.Hash)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.audit(r, verb, key, a.Hash)
	writeJSON(w, http.StatusOK, a)
}

// refresh asks the controller to reconcile an Addon now and read its
// source again past every cache. It answers 202 with the request's value,
// which the Addon's status.lastHandledRefresh holds once it is handled. A
// git-managed Addon is refreshed in the cluster too: the request is no
// change to its definition.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	key, c, _, ok := s.request(w, r, nil)
	if !ok {
		return
	}
	req, err := addons.Refresh(r.Context(), c, key, time.Now())
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.auditRequest(r, "refresh", key, req)
	writeJSON(w, http.StatusAccepted, map[string]string{"refresh": req})
}

// test asks the controller to run the chart's test hooks once, as helm
// test does. It answers 202 with the request's value, which the Addon's
// status.lastTest.request holds once the tests ran, with their result. A
// git-managed Addon is tested in the cluster too: the request is no
// change to its definition.
func (s *Server) test(w http.ResponseWriter, r *http.Request) {
	key, c, _, ok := s.request(w, r, nil)
	if !ok {
		return
	}
	req, err := addons.RequestTest(r.Context(), c, key, time.Now())
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.auditRequest(r, "test", key, req)
	writeJSON(w, http.StatusAccepted, map[string]string{"test": req})
}

func (s *Server) suspend(suspend bool) http.HandlerFunc {
	verb := "resume"
	if suspend {
		verb = "suspend"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		key, c, _, ok := s.request(w, r, nil)
		if !ok {
			return
		}
		a, err := addons.Get(r.Context(), c, key)
		if err != nil {
			writeError(w, errorFor(err))
			return
		}
		repo, err := s.managedBy(r.Context(), a)
		if err != nil {
			writeError(w, errorFor(err))
			return
		}
		if repo != nil {
			s.commit(w, r, repo, a, verb, "patch", func(ctx context.Context, wr *gitops.Writer, name string) (string, error) {
				if suspend {
					return wr.Suspend(ctx, name)
				}
				return wr.Resume(ctx, name)
			})
			return
		}
		if err := addons.SetSuspend(r.Context(), c, key, suspend); err != nil {
			writeError(w, errorFor(err))
			return
		}
		s.audit(r, verb, key, "")
		w.WriteHeader(http.StatusNoContent)
	}
}

// refuseSuspendedOutsideGit refuses the approval of a suspended Addon
// that carries the managed-by-git label of an AddonRepository that is
// gone, pointing to install, which takes it in the cluster; nil for any
// other Addon, whose approval addons.Approve refuses or makes.
//
// NOTE: addons.Approve reads only the label, and cannot read the
// repository with the user's token; without this its refusal pointed to a
// commit, to a repository nobody syncs any more.
func (s *Server) refuseSuspendedOutsideGit(ctx context.Context, c client.Client, key client.ObjectKey) error {
	a, err := addons.Get(ctx, c, key)
	if err != nil || !a.Spec.Suspend || gitManaged(a) == "" {
		return err
	}
	// NOTE: a repository that cannot be read (or a server that commits
	// to none) is left to addons.Approve, whose refusal names it.
	if repo, err := s.managedBy(ctx, a); err != nil || repo != nil {
		return nil
	}
	return addons.RefuseSuspendedOutsideGit(a, key)
}

// refuseGitManaged answers 409 for a change that an Addon managed by git
// cannot take in the cluster.
func (s *Server) refuseGitManaged(ctx context.Context, c client.Client, key client.ObjectKey, what string) error {
	a, err := addons.Get(ctx, c, key)
	if err != nil {
		return err
	}
	repo, err := s.managedBy(ctx, a)
	if err != nil {
		return err
	}
	if repo != nil {
		return apiError{Code: http.StatusConflict, Reason: "Conflict",
			Message: fmt.Sprintf("Addon %s is managed by git (AddonRepository %s): %s", key, repo.Name, what)}
	}
	return nil
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	key, err := target(r)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	var o addons.RemoveOptions
	var uid string
	if err := queryParams(r, map[string]*bool{"uninstall": &o.Uninstall, "keepValues": &o.KeepValues}, map[string]*string{"uid": &uid}); err != nil {
		writeError(w, errorFor(err))
		return
	}
	o.UID = types.UID(uid)
	c, _, err := s.userClient(userOf(r))
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	a, err := addons.Get(r.Context(), c, key)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	// NOTE: before a commit too: a removal asked for an Addon that was
	// deleted and created again must not remove the new one.
	if err := (addons.Seen{UID: o.UID}).Check(a); err != nil {
		writeError(w, errorFor(err))
		return
	}
	repo, err := s.managedBy(r.Context(), a)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	if repo != nil {
		if o.KeepValues {
			writeError(w, badRequest("keepValues", "a git-managed add-on is in the cluster profile, which keeps no values objects"))
			return
		}
		answer, err := s.removeByCommit(r.Context(), userOf(r), c, repo, a, o.Uninstall)
		if err != nil {
			writeError(w, errorFor(err))
			return
		}
		writeJSON(w, http.StatusAccepted, answer)
		return
	}
	if err := addons.Remove(r.Context(), c, key, o); err != nil {
		writeError(w, errorFor(err))
		return
	}
	s.audit(r, "remove", key, "")
	w.WriteHeader(http.StatusNoContent)
}

// maxEvents is how many of an Addon's events the API answers, newest first.
const maxEvents = 50

// events answers an Addon's recent events, newest first, read with the
// user's token (Kubernetes' view role may list events).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	key, c, _, ok := s.request(w, r, nil)
	if !ok {
		return
	}
	events, err := s.addonEvents(r.Context(), c, key)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": events})
}

// addonEvents lists an Addon's recent events, newest first. The API
// server picks them by the object they regard: every event of a busy
// namespace, read on each view of an add-on's page, would cost it and
// the server a list of thousands.
func (s *Server) addonEvents(ctx context.Context, c client.Client, key client.ObjectKey) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFieldsSelector{
		Selector: fields.AndSelectors(fields.OneTermEqualSelector("regarding.kind", "Addon"), fields.OneTermEqualSelector("regarding.name", key.Name)),
	}); err != nil {
		return nil, err
	}
	out := []eventsv1.Event{}
	for _, e := range list.Items {
		// NOTE: another group's kind may be named Addon too.
		if e.Regarding.Kind == "Addon" && e.Regarding.Name == key.Name && strings.HasPrefix(e.Regarding.APIVersion, capstanv1.GroupVersion.Group+"/") {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b eventsv1.Event) int { return eventTime(b).Compare(eventTime(a)) })
	if len(out) > maxEvents {
		out = out[:maxEvents]
	}
	return out, nil
}

func eventTime(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// rawOf is the bytes of values, nil for none.
func rawOf(values *apiextensionsv1.JSON) []byte {
	if values == nil {
		return nil
	}
	return values.Raw
}
