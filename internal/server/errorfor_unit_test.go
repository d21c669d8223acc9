package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/source"
)

// TestErrorForSignature: a plan refused because the chart's signature
// failed is the person's to fix (422, with the message), not a server
// error.
func TestErrorForSignature(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"a signature that failed", fmt.Errorf("planning ns/a: %w", &source.SignatureError{Missing: true, Err: errors.New("the chart has no provenance file")}), http.StatusUnprocessableEntity},
		{"every commit turn taken", fmt.Errorf("committing: %w", gitops.ErrBusy), http.StatusTooManyRequests},
		{"the folder's last definition", fmt.Errorf("removing addons/a.yaml: %w", gitops.ErrLastDefinition), http.StatusConflict},
		{"anything else", errors.New("boom"), http.StatusInternalServerError},
	} {
		got := errorFor(tc.err)
		if got.Code != tc.code || got.Message != tc.err.Error() {
			t.Errorf("%s: errorFor = %d %q; want %d with the error's message", tc.name, got.Code, got.Message, tc.code)
		}
		if (got.Code == http.StatusTooManyRequests) != (got.retryAfter > 0) {
			t.Errorf("%s: errorFor = %d with Retry-After %d; want one exactly with 429", tc.name, got.Code, got.retryAfter)
		}
	}
}

// TestErrorForATooLargeBody: a body over its bound is 413, and the message
// names that body's bound, a sign-in's 64 KiB as well as MaxBody.
func TestErrorForATooLargeBody(t *testing.T) {
	for _, limit := range []int64{64 << 10, MaxBody} {
		got := errorFor(fmt.Errorf("reading the body: %w", &http.MaxBytesError{Limit: limit}))
		if want := fmt.Sprintf("the request body is over %d bytes", limit); got.Code != http.StatusRequestEntityTooLarge || got.Message != want {
			t.Errorf("a body over %d bytes: errorFor = %d %q; want 413 %q", limit, got.Code, got.Message, want)
		}
	}
}
