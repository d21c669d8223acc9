package controller_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/plan"
)

// applyOnlyDownWebhook is downWebhook, called on the ConfigMaps of ns
// only by a request that is no dry run (its matchCondition): the dry run
// passes, and the apply after it fails to call the webhook, as when a
// webhook's pod goes down between the two. (No request leaves the API
// server: the Service is not there.)
func applyOnlyDownWebhook(t *testing.T, ns string) (remove func()) {
	t.Helper()
	return registerDownWebhook(t, "apply-down-"+ns, ns, []any{map[string]any{"name": "no-dry-run", "expression": "!request.dryRun"}})
}

// conversionDown sets the CRD's conversion to a webhook whose Service
// does not exist: the API server fails, with a 500, every read of its
// objects by a version other than the storage one, until the returned
// function sets the conversion back to None. (No request leaves the API
// server: the Service is not there.)
func conversionDown(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, ns string) (remove func()) {
	t.Helper()
	ctx := context.Background()
	set := func(conv *apiextensionsv1.CustomResourceConversion) {
		eventually(t, 30*time.Second, "the CRD's conversion set", func() bool {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(crd), cur); err != nil {
				return false
			}
			cur.Spec.Conversion = conv
			return admin.Update(ctx, cur) == nil
		})
	}
	path := "/convert"
	set(&apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig:             &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: "nobody", Path: &path}},
	}})
	remove = func() { set(&apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}) }
	return remove
}

// graceCase is an add-on Synced with a ConfigMap, a Secret and the more
// files of its chart, in ns, whose
// incidents page the returned function's list.
func graceCase(t *testing.T, ns, name string, more map[string]string) (a *capstanv1.Addon, pages func() []string) {
	t.Helper()
	hook := pagerFor(t, ns)
	files := map[string]string{
		"templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  v: {{ .Values.v | quote }}\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  v: {{ .Values.v | quote }}\n",
	}
	maps.Copy(files, more)
	url, _ := charts.publish(t, chart{name: name, version: "1.0.0", files: files})
	a = create(t, newAddon(controllerNS, name+"-"+ns[len(ns)-5:], url, withTarget(ns), withValues(`{v: one}`),
		func(a *capstanv1.Addon) { a.Labels = map[string]string{"team": ns} }))
	synced(t, a)
	incident := "capstan:Addon:" + a.Namespace + ":" + a.Name
	pages = func() []string {
		var out []string
		all, keys := hook.actions(t, "/pager")
		for i, k := range keys {
			if k == incident {
				out = append(out, all[i])
			}
		}
		return out
	}
	return a, pages
}

// inGrace watches the add-on for 20 seconds, within the default grace:
// never Failed nor Stalled, Progressing with reason and a Ready message
// that holds every part of want, no Warning event and no page since began.
// It returns the last Progressing status seen.
func inGrace(t *testing.T, a *capstanv1.Addon, pages func() []string, began time.Time, reason string, want ...string) *capstanv1.Addon {
	t.Helper()
	var seen *capstanv1.Addon
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cur := getAddon(t, a)
		if cur.Status.Phase == capstanv1.PhaseFailed {
			t.Fatalf("the add-on is Failed while it is retried in its grace:\n%s", describeStatus(cur))
		}
		if cur.Status.Phase != capstanv1.PhaseProgressing || cur.Status.ObservedGeneration != cur.Generation {
			continue
		}
		c, msg := condition(cur, capstanv1.ConditionReady), readyMessage(cur)
		if c == nil || c.Reason != reason || !strings.Contains(msg, "retrying") {
			t.Fatalf("the retry's status does not say what is retried and why (want reason %s):\n%s", reason, describeStatus(cur))
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Fatalf("the retry's message does not say %q:\n%s", w, describeStatus(cur))
			}
		}
		if s := condition(cur, capstanv1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
			t.Fatalf("a retry in its grace is Stalled:\n%s", describeStatus(cur))
		}
		seen = cur
	}
	if seen == nil {
		t.Fatalf("the add-on never said it retries (want reason %s):\n%s", reason, describeStatus(getAddon(t, a)))
	}
	if w := warningEvents(t, a, began); len(w) > 0 {
		t.Fatalf("a retry in its grace emitted Warning events: %v", w)
	}
	time.Sleep(2 * time.Second) // a page the notifier queued is posted at once
	if p := pages(); len(p) > 0 {
		t.Fatalf("a retry in its grace paged: %v", p)
	}
	return seen
}

// failedAfterGrace shortens the grace, and waits for the add-on to fail
// with reason, a Warning event and a page.
func failedAfterGrace(t *testing.T, a *capstanv1.Addon, pages func() []string, began time.Time, reason string) *capstanv1.Addon {
	t.Helper()
	reconciler.SetDryRunGraceFor(3 * time.Second)
	t.Cleanup(func() { reconciler.SetDryRunGraceFor(0) })
	if plan.GraceTries > 5 {
		t.Fatalf("GraceTries is %d: the backoff takes longer to reach it than this test waits", plan.GraceTries)
	}
	failed := waitFor(t, a, 120*time.Second, "the failure once the grace ended", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseFailed && c != nil && c.Reason == reason
	})
	eventually(t, 30*time.Second, "the Warning event of the failure", func() bool { return len(warningEvents(t, a, began)) > 0 })
	eventually(t, 30*time.Second, "the page of the failure", func() bool { return len(pages()) > 0 })
	if p := pages(); p[0] != "trigger" {
		t.Fatalf("PagerDuty got %v; want a trigger", p)
	}
	return failed
}

// TestAnApplyRetriedInItsGraceIsNoFailure: a Synced add-on's next sync
// passes its dry runs, and then its apply fails to call a webhook (one
// the API server calls on no dry run, as one whose pod went down since).
// Within the grace the add-on is Progressing, ApplyRetrying, saying what
// is retried and why: never Failed, no Warning event, no incident; what
// the apply wrote before it stays recorded. Once the webhook answers, it
// is Synced. An apply that goes on failing past the grace is Failed,
// ApplyFailed, with a Warning event and an incident.
func TestAnApplyRetriedInItsGraceIsNoFailure(t *testing.T) {
	ns := newNamespace(t)
	a, pages := graceCase(t, ns, "applyretry", nil)
	remove := applyOnlyDownWebhook(t, ns)
	began := time.Now()
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{v: two}`) })
	seen := inGrace(t, a, pages, began, controller.ReasonApplyRetrying,
		`could not call the admission webhook "validate.down.example.com" for the apply`, "ConfigMap "+ns+"/settings")
	// The Secret, applied before the ConfigMap, is applied and recorded.
	if live(t, "v1", "Secret", ns, "creds").Object["data"].(map[string]any)["v"] != "dHdv" {
		t.Fatal("the Secret applied before the refused ConfigMap does not hold the new value")
	}
	inventory := map[string]bool{}
	for _, id := range seen.Status.Inventory {
		inventory[id.Kind+"/"+id.Name] = true
	}
	if !inventory["Secret/creds"] || !inventory["ConfigMap/settings"] {
		t.Fatalf("the inventory of an apply retried part-way lost an object: %v", seen.Status.Inventory)
	}
	remove()
	synced(t, a)
	if live(t, "v1", "ConfigMap", ns, "settings").Object["data"].(map[string]any)["v"] != "two" {
		t.Fatal("the sync after the retries did not apply the new value")
	}
	if w := warningEvents(t, a, began); len(w) > 0 {
		t.Fatalf("an apply retried in its grace emitted Warning events: %v", w)
	}

	// Past the grace: the failure it is.
	applyOnlyDownWebhook(t, ns)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{v: three}`) })
	failed := failedAfterGrace(t, a, pages, began, "ApplyFailed")
	if msg := readyMessage(failed); !strings.Contains(msg, "validate.down.example.com") || !strings.Contains(msg, "failed the apply so since") {
		t.Fatalf("the failure does not name the webhook and since when: %s", msg)
	}
}

// TestAnInstallsApplyRetriedInItsGraceIsNoFailure: a new add-on with
// spec.createNamespace is installed while a webhook the API server calls
// on no dry run is down: its objects, in a Namespace the install creates,
// are applied with no dry run first (apply.Sequence's verify), and the
// ConfigMap's apply fails to call the webhook. Within the grace the
// add-on is Progressing, ApplyRetrying, its message saying the API
// server could not take the ConfigMap (not that it refused it): never
// Failed, no Warning event, no incident. Once the webhook is removed, it
// is Synced.
func TestAnInstallsApplyRetriedInItsGraceIsNoFailure(t *testing.T) {
	home := newNamespace(t)
	target := home + "-new"
	hook := pagerFor(t, home)
	// NOTE: the webhook's Service is named in target, which holds none;
	// no request leaves the API server.
	remove := applyOnlyDownWebhook(t, target)
	url, _ := charts.publish(t, chart{name: "installretry", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  v: {{ .Values.v | quote }}\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  v: {{ .Values.v | quote }}\n",
	}})
	began := time.Now()
	a := create(t, newAddon(controllerNS, "installretry-"+home[len(home)-5:], url, withTarget(target), withValues(`{v: one}`),
		withSpec(func(s *capstanv1.AddonSpec) { s.CreateNamespace = true }),
		func(a *capstanv1.Addon) { a.Labels = map[string]string{"team": home} }))
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
	// NOTE: not inGrace: an install says it is Applying before it applies.
	var seen *capstanv1.Addon
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cur := getAddon(t, a)
		if cur.Status.Phase == capstanv1.PhaseFailed {
			t.Fatalf("the add-on is Failed while its install's apply is retried in its grace:\n%s", describeStatus(cur))
		}
		if c := condition(cur, capstanv1.ConditionReady); c != nil && c.Reason == controller.ReasonApplyRetrying {
			seen = cur
		}
	}
	if seen == nil {
		t.Fatalf("the add-on never said it retries its install's apply:\n%s", describeStatus(getAddon(t, a)))
	}
	msg := readyMessage(seen)
	for _, w := range []string{`could not call the admission webhook "validate.down.example.com" for the apply`, "ConfigMap " + target + "/settings", "retrying"} {
		if !strings.Contains(msg, w) {
			t.Fatalf("the retry's message does not say %q:\n%s", w, describeStatus(seen))
		}
	}
	if strings.Contains(msg, "refused") {
		t.Fatalf("an apply the API server could not take for a moment is worded as a refusal: %s", msg)
	}
	if w := warningEvents(t, a, began); len(w) > 0 {
		t.Fatalf("an install's apply retried in its grace emitted Warning events: %v", w)
	}
	time.Sleep(2 * time.Second) // a page the notifier queued is posted at once
	if p := pages(); len(p) > 0 {
		t.Fatalf("an install's apply retried in its grace paged: %v", p)
	}
	remove()
	synced(t, a)
	if live(t, "v1", "ConfigMap", target, "settings").Object["data"].(map[string]any)["v"] != "one" {
		t.Fatal("the install after the retries did not apply the ConfigMap")
	}
	if w := warningEvents(t, a, began); len(w) > 0 {
		t.Fatalf("an install's apply retried in its grace emitted Warning events: %v", w)
	}
}

// TestAPreviewReadRetriedInItsGraceIsNoFailure: a Synced add-on's next
// preview cannot read one of its objects (the API server fails to call
// the conversion webhook of its CRD, with a 500). Within the grace the
// add-on is Progressing, DryRunRetrying, saying which read is retried and
// why: never Failed, no Warning event, no incident. Once the reads pass,
// it is Synced. A read that goes on failing past the grace is Failed,
// PreviewFailed, with a Warning event and an incident.
func TestAPreviewReadRetriedInItsGraceIsNoFailure(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	group := "readretry" + ns[len(ns)-5:] + ".example.com"
	crd := foosCRD(group, "v1beta1", "v1")
	if err := admin.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
	eventually(t, 30*time.Second, "the CRD served", func() bool {
		u := &unstructured.UnstructuredList{}
		u.SetAPIVersion(group + "/v1")
		u.SetKind("FooList")
		return admin.List(ctx, u, client.InNamespace(ns)) == nil
	})
	a, pages := graceCase(t, ns, "readretry", map[string]string{
		"templates/foo.yaml": "apiVersion: " + group + "/v1\nkind: Foo\nmetadata:\n  name: thing\nspec:\n  v: {{ .Values.v | quote }}\n",
	})
	remove := conversionDown(t, crd, ns)
	began := time.Now()
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{v: two}`) })
	inGrace(t, a, pages, began, controller.ReasonDryRunRetrying, "the read of Foo "+ns+"/thing")
	remove()
	synced(t, a)
	if live(t, "v1", "ConfigMap", ns, "settings").Object["data"].(map[string]any)["v"] != "two" {
		t.Fatal("the sync after the retries did not apply the new value")
	}
	if w := warningEvents(t, a, began); len(w) > 0 {
		t.Fatalf("a read retried in its grace emitted Warning events: %v", w)
	}

	// Past the grace: the failure it is.
	defer conversionDown(t, crd, ns)()
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{v: three}`) })
	failed := failedAfterGrace(t, a, pages, began, "PreviewFailed")
	if msg := readyMessage(failed); !strings.Contains(msg, "failed this read since") {
		t.Fatalf("the failure does not say since when the read failed: %s", msg)
	}
}
