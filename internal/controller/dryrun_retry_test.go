package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/plan"
)

// downWebhook registers a validating webhook, failing closed, on the
// ConfigMaps of ns, that names a Service that does not exist: the API
// server fails to call it, with a 500, on every create or update of one,
// dry runs included, until the returned function removes it. (No request
// leaves the API server: the Service is not there.)
func downWebhook(t *testing.T, ns string) (remove func()) {
	t.Helper()
	return registerDownWebhook(t, "down-"+ns, ns, nil)
}

// registerDownWebhook registers the webhook downWebhook describes, named
// name, with the webhook's match conditions, if any.
func registerDownWebhook(t *testing.T, name, ns string, conditions []any) (remove func()) {
	t.Helper()
	webhook := map[string]any{
		"name":                    "validate.down.example.com",
		"admissionReviewVersions": []any{"v1"},
		"sideEffects":             "None",
		"failurePolicy":           "Fail",
		"timeoutSeconds":          int64(1),
		"namespaceSelector":       map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
		"rules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"},
			"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"}}},
		"clientConfig": map[string]any{"service": map[string]any{"namespace": ns, "name": "nobody", "path": "/validate"}},
	}
	if conditions != nil {
		webhook["matchConditions"] = conditions
	}
	whc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1",
		"kind":       "ValidatingWebhookConfiguration",
		"metadata":   map[string]any{"name": name},
		"webhooks":   []any{webhook},
	}}
	if err := admin.Create(context.Background(), whc); err != nil {
		t.Fatal(err)
	}
	remove = func() { _ = client.IgnoreNotFound(admin.Delete(context.Background(), whc.DeepCopy())) }
	t.Cleanup(remove)
	return remove
}

// warningEvents are the notes of the Warning events about a since since.
func warningEvents(t *testing.T, a *capstanv1.Addon, since time.Time) []string {
	t.Helper()
	var events eventsv1.EventList
	if err := admin.List(context.Background(), &events, client.InNamespace(a.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if e.Regarding.Name == a.Name && e.Type == corev1.EventTypeWarning && !e.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// TestADryRunRetriedInItsGraceIsNoFailure: a Synced add-on's next sync
// meets a dry run the API server could not take (a webhook it fails to
// call). Within the grace the add-on is Progressing, DryRunRetrying, with a
// message that says what is retried and why: never Failed, no Warning
// event, no incident. Once the API server answers, it is Synced. A dry run
// that goes on failing past the grace is the object's refusal, as before:
// Failed, DryRunFailed, a Warning event and an incident.
func TestADryRunRetriedInItsGraceIsNoFailure(t *testing.T) {
	ns := newNamespace(t)
	hook := pagerFor(t, ns)

	url, _ := charts.publish(t, chart{name: "retried", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  v: {{ .Values.v | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "retry-"+ns[len(ns)-5:], url, withTarget(ns), withValues(`{v: one}`),
		func(a *capstanv1.Addon) { a.Labels = map[string]string{"team": ns} }))
	synced(t, a)
	incident := "capstan:Addon:" + a.Namespace + ":" + a.Name
	pages := func() []string {
		var out []string
		all, keys := hook.actions(t, "/pager")
		for i, k := range keys {
			if k == incident {
				out = append(out, all[i])
			}
		}
		return out
	}

	// Within the grace: retried, Progressing.
	remove := downWebhook(t, ns)
	began := time.Now()
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{v: two}`) })
	sawRetry := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cur := getAddon(t, a)
		if cur.Status.Phase == capstanv1.PhaseFailed {
			t.Fatalf("the add-on is Failed while its dry run is retried in its grace:\n%s", describeStatus(cur))
		}
		if cur.Status.Phase == capstanv1.PhaseProgressing && cur.Status.ObservedGeneration == cur.Generation {
			c := condition(cur, capstanv1.ConditionReady)
			msg := readyMessage(cur)
			if c == nil || c.Reason != controller.ReasonDryRunRetrying || !strings.Contains(msg, "could not call the admission webhook \"validate.down.example.com\" for the dry run of ConfigMap "+ns+"/settings") ||
				!strings.Contains(msg, "retrying") {
				t.Fatalf("the retried dry run's status does not say what is retried and why:\n%s", describeStatus(cur))
			}
			if s := condition(cur, capstanv1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
				t.Fatalf("a retried dry run is Stalled:\n%s", describeStatus(cur))
			}
			sawRetry = true
		}
	}
	if !sawRetry {
		t.Fatalf("the add-on never said its dry run is retried:\n%s", describeStatus(getAddon(t, a)))
	}
	if w := warningEvents(t, a, began); len(w) > 0 {
		t.Fatalf("a dry run retried in its grace emitted Warning events: %v", w)
	}
	if p := pages(); len(p) > 0 {
		t.Fatalf("a dry run retried in its grace paged: %v", p)
	}
	remove()
	synced(t, a)
	if live(t, "v1", "ConfigMap", ns, "settings").Object["data"].(map[string]any)["v"] != "two" {
		t.Fatal("the sync after the retries did not apply the new value")
	}
	if w := warningEvents(t, a, began); len(w) > 0 {
		t.Fatalf("a dry run retried in its grace emitted Warning events: %v", w)
	}
	time.Sleep(2 * time.Second) // a page the notifier queued is posted at once
	if p := pages(); len(p) > 0 {
		t.Fatalf("a dry run retried in its grace paged: %v", p)
	}

	// Past the grace: the object's refusal, as before.
	reconciler.SetDryRunGraceFor(3 * time.Second)
	t.Cleanup(func() { reconciler.SetDryRunGraceFor(0) })
	if plan.GraceTries > 5 {
		t.Fatalf("GraceTries is %d: the backoff takes longer to reach it than this test waits", plan.GraceTries)
	}
	downWebhook(t, ns)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{v: three}`) })
	failed := waitFor(t, a, 90*time.Second, "the refusal once the grace ended", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseFailed && c != nil && c.Reason == plan.ReasonDryRunFailed
	})
	if msg := readyMessage(failed); !strings.Contains(msg, "validate.down.example.com") {
		t.Fatalf("the refusal does not name the webhook: %s", msg)
	}
	eventually(t, 30*time.Second, "the Warning event of the refusal", func() bool { return len(warningEvents(t, a, began)) > 0 })
	eventually(t, 30*time.Second, "the page of the refusal", func() bool { return len(pages()) > 0 })
	if p := pages(); p[0] != "trigger" {
		t.Fatalf("PagerDuty got %v; want a trigger", p)
	}
}
