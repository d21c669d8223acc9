package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/render"
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
		check(t, tc.name, tc.err, tc.code)
	}
}

// TestErrorForWhatThePersonMustFix: a plan that fails on a source or a
// chart the spec names (a version the repository lacks, a digest that does
// not match, a refused archive or address, a template that fails) is 422,
// which a client does not retry; a source's own failure is 502 or 503; a
// hold since the profile changed, and a definition that exists already or
// does not exist in git, are conflicts (409). None is a server fault.
func TestErrorForWhatThePersonMustFix(t *testing.T) {
	planning := func(err error) error { return fmt.Errorf("planning t/blog: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"a chart version the repository lacks", planning(&source.FetchError{URL: "https://charts.example/blog-9.9.9.tgz", Status: http.StatusNotFound}), http.StatusUnprocessableEntity},
		{"credentials the source refuses", planning(&source.FetchError{URL: "https://charts.example/index.yaml", Status: http.StatusUnauthorized}), http.StatusUnprocessableEntity},
		{"a source that fails on its side", planning(&source.FetchError{URL: "https://charts.example/index.yaml", Status: http.StatusInternalServerError}), http.StatusBadGateway},
		{"a source that is busy", planning(&source.FetchError{URL: "https://charts.example/index.yaml", Status: http.StatusTooManyRequests}), http.StatusServiceUnavailable},
		{"a source slower than a plan waits", planning(fmt.Errorf("stopped the fetch: %w", source.ErrInteractiveTimeout)), http.StatusServiceUnavailable},
		{"a digest that does not match", planning(&source.DigestMismatchError{Source: "https://charts.example/blog-1.0.0.tgz", Expected: "sha256:a", Actual: "sha256:b"}), http.StatusUnprocessableEntity},
		{"an archive refused", planning(&source.ArchiveError{Problem: "is over the size limit"}), http.StatusUnprocessableEntity},
		{"a chart version that is no version", planning(&source.SpecError{Problem: `spec.chart.version "lastest" is neither a version nor a semver range`}), http.StatusUnprocessableEntity},
		{"a template that fails", planning(&render.TemplateError{Stage: "execute", Template: "blog/templates/a.yaml"}), http.StatusUnprocessableEntity},
		{"an address the fetch guard refuses", planning(&netguard.RefusedError{Host: "charts.example", Reason: netguard.ReasonPrivate}), http.StatusUnprocessableEntity},
		{"a sync held since the profile changed", planning(fmt.Errorf("the add-on is Blocked (ProfileChanged) and %w, so there is no plan", controller.ErrProfileHeld)), http.StatusConflict},
		{"a definition that exists already", fmt.Errorf("committing: addons/blog.yaml %w: use edit", gitops.ErrExists), http.StatusConflict},
		{"a definition that does not exist", fmt.Errorf("committing: addons/blog.yaml %w: use install", gitops.ErrNotExist), http.StatusConflict},
	} {
		check(t, tc.name, tc.err, tc.code)
	}
}

// check says whether errorFor answers err with code and err's message, and
// with a Retry-After exactly when it is 429.
func check(t *testing.T, name string, err error, code int) {
	t.Helper()
	got := errorFor(err)
	if got.Code != code || got.Message != err.Error() {
		t.Errorf("%s: errorFor = %d %q; want %d with the error's message", name, got.Code, got.Message, code)
	}
	if (got.Code == http.StatusTooManyRequests) != (got.retryAfter > 0) {
		t.Errorf("%s: errorFor = %d with Retry-After %d; want one exactly with 429", name, got.Code, got.retryAfter)
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
