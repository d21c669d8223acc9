package apply

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestAWebhookDenialIsNoMoment: the API server passes on the code an
// admission webhook denied with, so a policy engine's denial can come as
// a 500 or a 503; it is a refusal all the same, and gets no grace. A
// webhook the API server failed to call, a 503 and a 429 are moments.
func TestAWebhookDenialIsNoMoment(t *testing.T) {
	denial := func(code int32, reason metav1.StatusReason, msg string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
	}
	cases := []struct {
		name   string
		err    error
		denied string
		moment bool
	}{
		{"a denial with a 500", denial(http.StatusInternalServerError, "", `admission webhook "policy.example.com" denied the request: evaluation failed`), "policy.example.com", false},
		{"a denial with a 503", denial(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, `admission webhook "policy.example.com" denied the request without explanation`), "policy.example.com", false},
		{"a denial with a 403", denial(http.StatusForbidden, metav1.StatusReasonForbidden, `admission webhook "policy.example.com" denied the request: no`), "policy.example.com", false},
		{"a denial wrapped", fmt.Errorf("applying ConfigMap a/b: %w", denial(http.StatusInternalServerError, "", `admission webhook "policy.example.com" denied the request: evaluation failed`)), "policy.example.com", false},
		{"a denial in an install's message", &installError{msg: "the API server refused ConfigMap a/b", err: denial(http.StatusInternalServerError, "", `admission webhook "policy.example.com" denied the request: x`)}, "policy.example.com", false},
		{"a webhook not called", apierrors.NewInternalError(errors.New(`Internal error occurred: failed calling webhook "policy.example.com": service "nobody" not found`)), "", true},
		{"a webhook not called, in an install's message", &installError{msg: "the API server could not take ConfigMap a/b", err: apierrors.NewInternalError(errors.New(`failed calling webhook "policy.example.com": connection refused`))}, "", true},
		{"a 503", apierrors.NewServiceUnavailable("etcd leader changed"), "", true},
		{"a 429", apierrors.NewTooManyRequests("slow down", 1), "", true},
		{"a 422", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "b", nil), "", false},
		{"no API error", errors.New(`admission webhook "x" denied the request`), "", false},
	}
	for _, c := range cases {
		if got := WebhookDenied(c.err); got != c.denied {
			t.Errorf("%s: WebhookDenied = %q, want %q", c.name, got, c.denied)
		}
		if got := ServerBusy(c.err); got != c.moment {
			t.Errorf("%s: ServerBusy = %v, want %v", c.name, got, c.moment)
		}
		if got := Transient(c.err); got != c.moment {
			t.Errorf("%s: Transient = %v, want %v", c.name, got, c.moment)
		}
	}
}
