package controller

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/source"
)

// TestClassify decides which errors stall an add-on for a person and
// which are retried with backoff. A hook that failed stalls, since a
// retry would run the event's hooks again in a loop; so does a hook whose
// object was deleted before it was read finished, and one that succeeded
// but that its hook-succeeded policy could not delete. A source that answered
// a client error is gone for good (an uninstall goes on without its
// delete hooks); one that failed for a moment is retried (the uninstall
// waits for it).
func TestClassify(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("the API server is overloaded")
	for _, tc := range []struct {
		name string
		err  error
		want errClass
	}{
		{name: "a plain error", err: errors.New("connection reset"), want: classTransient},
		{name: "marked terminal by its step", err: terminal{errors.New("the Secret is missing")}, want: classTerminal},
		{name: "a chart gone (404)", err: fmt.Errorf("fetch: %w", &source.FetchError{URL: "https://charts.example/a.tgz", Status: 404}), want: classTerminal},
		{name: "a repository that fails for a moment (503)", err: &source.FetchError{URL: "https://charts.example/index.yaml", Status: 503}, want: classTransient},
		{name: "a repository that asks for time (429)", err: &source.FetchError{URL: "https://charts.example/index.yaml", Status: 429}, want: classTransient},
		{name: "a git fetch the memory budget could not take while other fetches held it", err: &source.FetchError{URL: "https://git.example/mono.git",
			Err: fmt.Errorf("fetching refs/heads/main: %w (…)", source.ErrGitMemoryBusy)}, want: classTransient},
		{name: "a chart version that is no version or range", err: fmt.Errorf("fetch: %w", &source.SpecError{Problem: `spec.chart.version "lastest" is neither a version nor a semver range`}), want: classTerminal},
		{name: "a Job hook that failed", err: &hooks.Error{Event: "pre-upgrade", Reason: "BackoffLimitExceeded"}, want: classTerminal},
		{name: "a Job hook deleted before it was read", err: &hooks.Error{Event: "pre-upgrade", Reason: hooks.ReasonDeleted}, want: classTerminal},
		{name: "a hook whose hook-succeeded delete failed", err: &hooks.Error{Event: "post-install", Reason: hooks.ReasonDeleteFailed, Err: unavailable}, want: classTerminal},
		{name: "a hook the API server could not take for a moment", err: &hooks.Error{Event: "pre-upgrade", Reason: hooks.ReasonCreateFailed, Err: unavailable}, want: classTransient},
		{name: "a terminal failure whose SyncFail hooks a status write stopped", err: fmt.Errorf("%w; the SyncFail hooks did not run yet: %w",
			terminal{errors.New("the dry run failed")}, &hooks.ProgressError{Event: "SyncFail", Err: unavailable}), want: classTransient},
		{name: "a hook the API server refused", err: &hooks.Error{Event: "pre-upgrade", Reason: hooks.ReasonCreateFailed, Err: apierrors.NewForbidden(schema.GroupResource{Resource: "jobs"}, "x", errors.New("no"))}, want: classTerminal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
