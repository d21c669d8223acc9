package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/values"
)

// pageFetchRetryAfter is the Retry-After, in seconds, of a page refused
// because the server fetches as many charts for pages as it may.
const pageFetchRetryAfter = 5

// pageFetch fetches the chart of spec for a page's form: only for a user
// the API server allows to verb the Addon key (a key without a name asks
// about any Addon of its namespace), and with a turn among the server's
// page fetches. A refusal is an apiError: 403 for the user, 429 when every
// turn is taken or the user has caused too many access reviews just now,
// 503 when the review failed; any other error is the
// fetch's.
//
// NOTE: the fetch is the controller's, through its guard and into the
// chart cache its reconciles share, and any token the API server accepts
// signs in: without the review, anyone could make the controller fetch any
// link, and read the errors as a port scanner's answers.
func (s *Server) pageFetch(ctx context.Context, u User, verb string, key client.ObjectKey, spec capstanv1.AddonSpec) (*source.Artifact, error) {
	return s.fetchInTurn(ctx, u, spec, func(ctx context.Context) error {
		return s.authorize(ctx, u, verb, key, "the chart was not fetched")
	})
}

// reviewedFetch is pageFetch for a change whose access review was made
// already (a commit's): the fetch takes a turn among the page fetches and
// their bound in time, with no review of its own.
func (s *Server) reviewedFetch(ctx context.Context, u User, spec capstanv1.AddonSpec) (*source.Artifact, error) {
	return s.fetchInTurn(ctx, u, spec, nil)
}

// fetchInTurn fetches the chart of spec in a turn among the page fetches,
// once review, when set, allows it.
func (s *Server) fetchInTurn(ctx context.Context, u User, spec capstanv1.AddonSpec, review func(context.Context) error) (*source.Artifact, error) {
	// NOTE: the turn first, then the access review, so that fetches past
	// the bound cost the API server nothing.
	release, ok, met := s.pageFetches.take(u.Name)
	switch {
	case ok:
	case met == fullShare:
		return nil, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", retryAfter: pageFetchRetryAfter,
			Message: fmt.Sprintf("%d chart(s) are being fetched for pages for %s already, the most this server fetches at once for one user (or the ServiceAccounts of one namespace); try again in %d seconds", s.pageFetches.perShare, shareOf(u.Name), pageFetchRetryAfter)}
	default:
		return nil, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", retryAfter: pageFetchRetryAfter,
			Message: fmt.Sprintf("%d charts are being fetched for pages, the most this server fetches at once; try again in %d seconds", s.pageFetches.total, pageFetchRetryAfter)}
	}
	defer release()
	if review != nil {
		if err := review(ctx); err != nil {
			return nil, err
		}
	}
	// NOTE: Interactive stops the fetch when this page stops waiting for
	// it, unless a reconcile joined it, so the turn let go on return was
	// the fetch's own.
	return s.Fetcher.Fetch(source.Interactive(ctx, s.fetchTimeout()), spec, nil)
}

// pageRefusal is err's answer when it is a refusal of pageFetch, and sets
// its Retry-After; ok is false for any other error.
func pageRefusal(w http.ResponseWriter, err error) (apiError, bool) {
	e, ok := err.(apiError)
	if !ok {
		return apiError{}, false
	}
	if e.Code == http.StatusTooManyRequests {
		retryAfter := e.retryAfter
		if retryAfter == 0 {
			retryAfter = pageFetchRetryAfter
		}
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	return e, true
}

// busyRefusal is the answer to a write whose check of values for secret
// inputs could not fetch the chart because of Capstan itself, not of the
// chart's source: no page-fetch turn was free, the access review was
// throttled or failed (429, with Retry-After, so that the writer tries
// again), or it refused the user (as it answered); outcome says what the
// write did not do. ok is false for an error of the chart's own fetch.
//
// NOTE: such a write is refused, never let through with a warning: a
// check skipped whenever the server is busy would let a client that sends
// two requests at once store a secret input unchecked.
func busyRefusal(err error, outcome string) (apiError, bool) {
	var ae apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, source.ErrGitMemoryBusy):
		ae = apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", Message: err.Error(), retryAfter: commitRetryAfter}
	default:
		return apiError{}, false
	}
	ae.Message += " (" + outcome + ")"
	if ae.Code == http.StatusForbidden || ae.Code == http.StatusUnauthorized {
		return ae, true
	}
	ae.Code, ae.Reason = http.StatusTooManyRequests, "TooManyRequests"
	if ae.retryAfter == 0 {
		ae.retryAfter = pageFetchRetryAfter
	}
	return ae, true
}

// chartCheck returns the ChartCheck of one write by u, who may verb the
// Addon key: the chart is fetched as a page's form fetches it (pageFetch),
// once for all the write's checks.
func (s *Server) chartCheck(u User, verb string, key client.ObjectKey) *addons.ChartCheck {
	return addons.NewChartCheck(func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
		return s.pageFetch(ctx, u, verb, key, spec)
	})
}

// withConfigMaps has check compose spec.values with the ConfigMaps that
// a's valuesFrom names (configMapLayers), read with c, the writer's own
// client, and warn told of each it could not read. It returns check.
func (s *Server) withConfigMaps(check *addons.ChartCheck, c client.Reader, a *capstanv1.Addon, warn func(string)) *addons.ChartCheck {
	return check.Layers(func(ctx context.Context) []values.Layer {
		layers, unread := s.configMapLayers(ctx, c, a)
		for _, u := range unread {
			warn(u)
		}
		return layers
	})
}

// configMapLayers reads the ConfigMaps that a's valuesFrom names
// (values.ReadConfigMaps) with c, which must be the writer's own client,
// so that a writer's check of spec.values composes them as the controller
// will: a ConfigMap's mode: ldap may make ldap.bindPassword writeOnly.
// The Secrets it names are never read, as no secret value is pulled into
// the server for a check; what they select the controller alone judges.
// A ConfigMap that cannot be read in the page fetches' time
// (--page-fetch-timeout) is left out, and unread says so, one message
// each for the first 10 and one that counts the rest
// (values.UnreadNotes): the check goes on without it, and nothing is
// refused for it. No entry past the CRD's bound on valuesFrom is read.
//
// NOTE: with the writer's own client, never the controller's: a check
// that read with the controller's rights would tell a writer, by what it
// refuses, what a ConfigMap they may not read holds.
func (s *Server) configMapLayers(ctx context.Context, c client.Reader, a *capstanv1.Addon) (layers []values.Layer, unread []string) {
	if c == nil || a.Spec.Chart == nil || len(a.Spec.ValuesFrom) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.fetchTimeout())
	defer cancel()
	layers, failed := values.ReadConfigMaps(ctx, c, a, s.Config.Profile(a))
	for _, note := range values.UnreadNotes(failed) {
		unread = append(unread, "spec.values was checked for secret inputs without "+note+"; the controller judges the values with it, and Blocks the Addon for a secret input that spec.values holds")
	}
	return layers, unread
}

// checkSecretValues refuses, with a SecretValuesError, spec's values that
// set or change secret inputs (values the chart's schema marks writeOnly)
// from old, the Addon's stored spec.values (nil for a new Addon):
// spec.values is read by anyone who may view the Addon. The chart is
// fetched with check (chartCheck), and only when the values changed; way
// is how the writer takes the secret inputs at the paths it refuses.
// Secret inputs that old holds already, and a chart whose source answers an error, are
// said by warn, and the write goes on, as the CLI's check does: the
// controller then Blocks the Addon for them. A fetch that Capstan itself
// could not make (busyRefusal) refuses the write.
func (s *Server) checkSecretValues(ctx context.Context, check *addons.ChartCheck, spec capstanv1.AddonSpec, old *apiextensionsv1.JSON,
	way secretWay, warn func(string)) error {
	if s.Fetcher == nil {
		return nil
	}
	setPaths, heldPaths, err := check.SecretValuesChanged(ctx, spec, old)
	if refusal, ok := busyRefusal(err, "spec.values were not checked for secret inputs, so nothing was written"); ok {
		return refusal
	}
	var inv *values.InvalidError
	if err != nil && !errors.As(err, &inv) {
		warn(fmt.Sprintf("the chart could not be read to check spec.values for secret inputs (%v); a value the chart's schema marks writeOnly belongs in a Secret, never in spec.values", err))
		return nil
	}
	set, _ := addons.SecretInputNames(setPaths)
	if inv != nil && len(set) == 0 {
		warn(fmt.Sprintf("the values break a rule the controller Blocks the Addon for: %v", inv))
	}
	if len(set) == 0 && len(heldPaths) == 0 {
		return nil
	}
	vals, _ := specValues(&capstanv1.Addon{Spec: spec})
	if len(set) > 0 {
		return &addons.SecretValuesError{Paths: set, Where: "spec.values, where anyone who may view the Addon reads it", Instead: secretAdvice(vals, setPaths, way, "")}
	}
	warn(heldSecretInputs(vals, heldPaths))
	return nil
}

// warnUnknownSecretInputs warns of the secret inputs whose paths the
// chart's schema neither marks writeOnly nor defines
// (addons.UnknownSecretInputs), a misspelt name most often, which the
// chart would never read. The chart is fetched with check, the one
// checkSecretValues fetched it with for the same write, so that the write
// costs one access review, one fetch and one compile; one that cannot be
// fetched is warned of too, and nothing is refused.
func (s *Server) warnUnknownSecretInputs(ctx context.Context, check *addons.ChartCheck, spec capstanv1.AddonSpec, inputs map[string]string, warn func(string)) {
	if s.Fetcher == nil || len(inputs) == 0 {
		return
	}
	msgs, err := check.UnknownSecretInputs(ctx, spec, inputs)
	if err != nil {
		warn(fmt.Sprintf("the chart could not be read to check the paths of the secret inputs against its schema (%v)", err))
		return
	}
	for _, m := range msgs {
		warn(m)
	}
}

// heldSecretInputs warns of the secret inputs at paths that spec.values
// (vals) holds already, unchanged: each goes to a Secret (secretAdvice),
// with null at its path in spec.values. The first few are named, each
// with its way (addons.BoundHeld), and the rest counted.
func heldSecretInputs(vals map[string]any, paths []values.SecretInputPath) string {
	named, more := addons.BoundHeld(paths)
	held, _ := addons.SecretInputNames(named)
	them := "it"
	if len(paths) > 1 {
		them = "them"
	}
	advice := secretAdvice(vals, named, heldSecrets, ", with null at its path in spec.values")
	if more > 0 {
		advice += fmt.Sprintf("; the %d not named here, each the same way as those of its kind", more)
	}
	return fmt.Sprintf("spec.values already holds %s%s, which the chart's schema marks writeOnly, a secret input readable there by anyone who may view the Addon, and the controller Blocks the Addon for %s; %s",
		strings.Join(held, ", "), addons.MoreHeld(more), them, advice)
}

// heldSecrets is how a secret input that spec.values holds already is
// moved out of it: several are named each in one "secretInputs", which
// keeps them all in one Secret.
var heldSecrets = secretWay{scalar: func(paths []string) string {
	if len(paths) == 1 {
		return `move it to a Secret (the API's "secretInputs", with null at its path in spec.values)`
	}
	return `move each to a Secret: send them all in the API's "secretInputs" (` + secretInputsExample(paths) +
		`), which keeps them in one Secret, with null at each one's path in spec.values`
}}

// secretInputsExample is the body's "secretInputs" that gives the secret
// inputs at paths, with their values left out.
func secretInputsExample(paths []string) string {
	example := make([]string, len(paths))
	for i, p := range paths {
		example[i] = strconv.Quote(p) + `: "..."`
	}
	return `{"secretInputs": {` + strings.Join(example, ", ") + `}}`
}

// secretWay is how one writer takes secret inputs instead of in
// spec.values: scalar says how to give those at the targetPaths it is
// given, the scalars, which a secret input carries (the page's secret
// field, the API's "secretInputs"); outcome, when set, says what a refusal
// left undone.
type secretWay struct {
	scalar  func(paths []string) string
	outcome string
}

// secretAdvice says how to give the secret inputs at paths of vals other
// than in spec.values, the one text of every writer's refusal and warning:
// each object or list (addons.NonScalarSecrets) and each path with an
// empty key (addons.EmptyKeySecrets), which no secret input can carry or
// name, in a Secret of one's own that valuesFrom merges whole, with suffix
// after each; then the scalars as way says, named when they are not the
// only ones; then way's outcome.
func secretAdvice(vals map[string]any, paths []values.SecretInputPath, way secretWay, suffix string) string {
	objects, emptyKeys, scalars := sortSecretInputs(vals, paths)
	var clauses []string
	if len(objects) > 0 {
		clauses = append(clauses, addons.NonScalarSecrets(objects)+suffix)
	}
	if len(emptyKeys) > 0 {
		clauses = append(clauses, addons.EmptyKeySecrets(emptyKeys)+suffix)
	}
	switch {
	case len(scalars) == 0:
	case len(clauses) == 0:
		clauses = append(clauses, way.scalar(scalars))
	default:
		clauses = append(clauses, "for "+strings.Join(scalars, ", ")+", "+way.scalar(scalars))
	}
	if way.outcome != "" {
		clauses = append(clauses, way.outcome)
	}
	return strings.Join(clauses, "; ")
}

// sortSecretInputs sorts the secret inputs at paths of vals by how each is
// given: whole, the targetPaths of objects and lists; emptyKeys, the JSON
// pointers of paths with an empty key; rest, the targetPaths of the
// scalars, which a secret input carries.
func sortSecretInputs(vals map[string]any, paths []values.SecretInputPath) (whole, emptyKeys, rest []string) {
	for _, p := range paths {
		if !p.Named {
			_, ptr := addons.SecretInputNames([]values.SecretInputPath{p})
			emptyKeys = append(emptyKeys, ptr...)
			continue
		}
		switch v, _ := values.Lookup(vals, p.Segments); v.(type) {
		case map[string]any, []any:
			whole = append(whole, p.Name)
		default:
			rest = append(rest, p.Name)
		}
	}
	return whole, emptyKeys, rest
}

// apiSecrets is how the API takes secret inputs: in the body's
// "secretInputs".
var apiSecrets = secretWay{outcome: "nothing was written", scalar: func(paths []string) string {
	return `send it as a secret input instead, in the body's "secretInputs" (` + secretInputsExample(paths) + `), and leave it out of spec.values`
}}

// gitValuesCheck is the CheckValues of a commit for the user u: the chart
// is fetched in a turn among the page fetches, the commit's own access
// review standing for the fetch's. A warning goes to the log. A chart
// that cannot be fetched refuses the commit (addons.GitValuesCheck); when
// Capstan itself was busy, with a 429 that says to try again.
func (s *Server) gitValuesCheck(u User) func(ctx context.Context, next, cur *gitops.Definition) error {
	if s.Fetcher == nil {
		return nil
	}
	return addons.GitValuesCheck(func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
		art, err := s.reviewedFetch(ctx, u, spec)
		if refusal, ok := busyRefusal(err, "the definition's values were not checked for secret inputs, so nothing was committed"); ok {
			return nil, refusal
		}
		return art, err
	}, func(msg string) { s.Log.Info("Secret inputs in the values of a commit", "user", u.Name, "reason", msg) })
}

// apiWarning adds msg to the answer's Warning header, as the Kubernetes
// API server warns: code 299, and the message quoted.
func apiWarning(w http.ResponseWriter) func(string) {
	return func(msg string) { w.Header().Add("Warning", "299 - "+strconv.QuoteToASCII(msg)) }
}
