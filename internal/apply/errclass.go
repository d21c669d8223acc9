package apply

import (
	"context"
	"errors"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Transient reports whether a request failed only because the API server,
// or the way to it, could not take it for a moment: overloaded (429),
// timing out, failing (5xx), out of reach, or the request's own deadline
// passed. The same request may succeed on a retry, and nothing is wrong
// with what was sent. A hook's run, a preview's dry run and the
// controller's retries read it alike.
//
// NOTE: an admission webhook the API server failed to call is a 500 as
// well, and transient here; a caller that must tell it apart asks
// FailedWebhook, which names it.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	return ServerBusy(err) || errors.As(err, &netErr) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// ServerBusy reports whether the API server answered err for a moment:
// a timeout, too many requests, or a 500 or 503. It is Transient without
// the network's errors, for a caller that judges those itself.
func ServerBusy(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}

// FailedWebhook returns the name of the admission webhook that err says
// the API server failed to call (`failed calling webhook "NAME"`), or ""
// when err is another: the webhook's service is not running or does not
// answer, which a restart of its pod causes for a moment and a webhook
// removed without its configuration for good. The name is parsed once
// here; a caller passes it on rather than parse the message again.
func FailedWebhook(err error) string {
	if err == nil || !apierrors.IsInternalError(err) {
		return ""
	}
	return WebhookCalled(err.Error())
}

// WebhookCalled returns the name of the admission webhook an API server's
// message says it failed to call, or "" when the message is another: a
// webhook that answered and refused is a refusal like any.
func WebhookCalled(msg string) string {
	const prefix = `failed calling webhook "`
	i := strings.Index(msg, prefix)
	if i < 0 {
		return ""
	}
	rest := msg[i+len(prefix):]
	end := strings.IndexByte(rest, '"')
	if end <= 0 {
		return ""
	}
	return rest[:end]
}

// Webhooks returns the names of the admission webhooks that the
// ValidatingWebhookConfigurations and MutatingWebhookConfigurations among
// objs register.
func Webhooks(objs []*unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	for _, obj := range objs {
		gk := obj.GroupVersionKind().GroupKind()
		if gk.Group != "admissionregistration.k8s.io" || gk.Kind != "ValidatingWebhookConfiguration" && gk.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		for _, h := range hooks {
			if m, ok := h.(map[string]any); ok {
				if name, _ := m["name"].(string); name != "" {
					out[name] = true
				}
			}
		}
	}
	return out
}
