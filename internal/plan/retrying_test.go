package plan

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestDryRunErrorRetryingSaysWhy: the status of a dry run retried in its
// grace says what the API server could not do, for which object, and that
// it is retried.
func TestDryRunErrorRetryingSaysWhy(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a server timeout", apierrors.NewServerTimeout(gr, "patch", 1), "the API server did not answer the dry run of Deployment shop/web in time"},
		{"the request's deadline", context.DeadlineExceeded, "the API server did not answer the dry run of Deployment shop/web in time"},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), "the API server asked for fewer requests (429) at the dry run of Deployment shop/web"},
		{"a webhook it could not call", apierrors.NewInternalError(errors.New(`failed calling webhook "validate.kyverno.svc": connection refused`)),
			`the API server could not call the admission webhook "validate.kyverno.svc" for the dry run of Deployment shop/web`},
		{"a connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, "the API server could not be reached for the dry run of Deployment shop/web"},
		{"a 503", apierrors.NewServiceUnavailable("rolling"), "the API server could not take the dry run of Deployment shop/web for a moment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&DryRunError{Ref: ref, Message: tc.err.Error(), Err: tc.err}).Retrying()
			if !strings.HasPrefix(got, tc.want+"; retrying with backoff") || !strings.HasSuffix(got, tc.err.Error()) {
				t.Fatalf("Retrying() = %q; want it to begin %q, say it retries, and end with the API server's message", got, tc.want)
			}
		})
	}
}

// TestDryRunErrorRetryingSaysTheGraceInForce: the status of a retried dry
// run names the grace in force, as SetFor shortens it, and when it ends,
// not a fixed one; with no grace counting (a nil DryRunGrace) it claims
// none.
func TestDryRunErrorRetryingSaysTheGraceInForce(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1"}}
	err := apierrors.NewServiceUnavailable("rolling")
	first := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		grace *DryRunGrace
		set   time.Duration
		want  string
	}{
		{&DryRunGrace{}, 0, "on 3 looks in a row and for 2 minutes, since 2026-12-07T10:00:00Z, so not before 2026-12-07T10:02:00Z): rolling"},
		{&DryRunGrace{}, 5 * time.Second, "on 3 looks in a row and for 5 seconds, since 2026-12-07T10:00:00Z, so not before 2026-12-07T10:00:05Z): rolling"},
		{&DryRunGrace{}, 90 * time.Second, "for 90 seconds, since"},
		{nil, 0, "; retrying with backoff: rolling"},
	} {
		if tc.set > 0 {
			tc.grace.SetFor(tc.set)
		}
		began, _ := tc.grace.Lasted(addon, "k", first)
		got := (&DryRunError{Ref: ref, Message: err.Error(), Err: err, First: began, Grace: tc.grace.For()}).Retrying()
		if !strings.Contains(got, tc.want) || (tc.set > 0 && strings.Contains(got, "2 minutes")) {
			t.Errorf("grace %v set to %v: Retrying() = %q; want it to hold %q", tc.grace != nil, tc.set, got, tc.want)
		}
	}
}
