package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
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
	// NOTE: the turn first, then the access review, so that fetches past
	// the bound cost the API server nothing.
	release, ok, met := s.pageFetches.take(u.Name)
	switch {
	case ok:
	case met == fullShare:
		return nil, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests",
			Message: fmt.Sprintf("%d chart(s) are being fetched for pages for %s already, the most this server fetches at once for one user (or the ServiceAccounts of one namespace); try again in %d seconds", s.pageFetches.perShare, shareOf(u.Name), pageFetchRetryAfter)}
	default:
		return nil, apiError{Code: http.StatusTooManyRequests, Reason: "TooManyRequests",
			Message: fmt.Sprintf("%d charts are being fetched for pages, the most this server fetches at once; try again in %d seconds", s.pageFetches.total, pageFetchRetryAfter)}
	}
	defer release()
	if err := s.authorize(ctx, u, verb, key, "the chart was not fetched"); err != nil {
		return nil, err
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
