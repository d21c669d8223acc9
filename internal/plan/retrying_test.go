package plan

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
