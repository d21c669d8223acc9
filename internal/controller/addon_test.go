package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// webChart is a small chart: a ConfigMap from values, a Deployment and a Service.
func webChart(version string, extra map[string]string) chart {
	files := map[string]string{
		"values.yaml": "greeting: hello\nreplicas: 1\n",
		"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  greeting: {{ .Values.greeting | quote }}
`,
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports:
            - name: http
              containerPort: 8080
`,
		"templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {app: {{ .Release.Name }}}
  ports:
    - port: 80
      targetPort: http
`,
	}
	for k, v := range extra {
		files[k] = v
	}
	return chart{name: "web", version: version, files: files}
}

func create(t *testing.T, a *capstanv1.Addon) *capstanv1.Addon {
	t.Helper()
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestInstallReachesSyncedAndReady(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "install-"+ns, url, withTarget(ns)))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if c := condition(got, capstanv1.ConditionReady); c == nil || c.Status != "True" || c.ObservedGeneration != got.Generation {
		t.Fatalf("Ready = %+v", c)
	}
	dep := live(t, "apps/v1", "Deployment", ns, a.Name)
	if dep == nil {
		t.Fatal("the Deployment was not created")
	}
	if avail, _, _ := unstructured.NestedInt64(dep.Object, "status", "availableReplicas"); avail != 1 {
		t.Fatalf("availableReplicas = %d", avail)
	}
	if dep.GetLabels()[capstanv1.AddonLabel] != a.Name || len(dep.GetOwnerReferences()) != 0 {
		t.Fatalf("cluster objects carry Capstan's labels and no owner references: %v %v", dep.GetLabels(), dep.GetOwnerReferences())
	}
	if len(got.Status.Inventory) != 3 || got.Status.AppliedHash == "" || got.Status.Profile != capstanv1.ProfileCluster {
		t.Fatalf("inventory %v, appliedHash %q, profile %s", got.Status.Inventory, got.Status.AppliedHash, got.Status.Profile)
	}
	// NOTE: the managed fields say which field manager wrote; the user is
	// in the audit log (see the impersonation test).
	found := false
	for _, mf := range dep.GetManagedFields() {
		found = found || mf.Manager == capstanv1.FieldManager
	}
	if !found {
		t.Fatalf("the Deployment was not applied by the %q field manager", capstanv1.FieldManager)
	}
}

func TestValuesChangeShowsDiff(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "diff-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true })))
	got := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	if got.Status.Plan.Summary.Create != 3 {
		t.Fatalf("first plan %+v", got.Status.Plan.Summary)
	}
	got = update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest++
	})
	waitPhase(t, got, capstanv1.PhaseSynced)

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("greeting: bonjour") })
	got = waitPhase(t, a, capstanv1.PhaseOutOfSync)
	p := got.Status.Plan
	if p.Summary.Update != 1 || p.Summary.Unchanged != 2 || p.Summary.Create != 0 {
		t.Fatalf("plan summary %+v", p.Summary)
	}
	var diff string
	for _, o := range p.Objects {
		if o.Action == capstanv1.ActionUpdate {
			diff = o.Diff
		}
	}
	if !strings.Contains(diff, `-  greeting: hello`) || !strings.Contains(diff, `+  greeting: bonjour`) {
		t.Fatalf("diff:\n%s", diff)
	}
	if cm := live(t, "v1", "ConfigMap", ns, a.Name+"-config"); cm.Object["data"].(map[string]any)["greeting"] != "hello" {
		t.Fatalf("an unapproved change was applied")
	}
}

func TestManualSyncApproval(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "manual-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true })))
	got := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	if live(t, "v1", "ConfigMap", ns, a.Name+"-config") != nil {
		t.Fatal("a manual-sync add-on applied before approval")
	}
	// A stale approval: the hash of another plan applies nothing.
	stale := "sha256:" + strings.Repeat("0", 64)
	got = update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = stale
		cur.Spec.SyncRequest++
	})
	got = waitFor(t, got, time.Minute, "the stale approval to be refused", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return cur.Status.ObservedGeneration == cur.Generation && c != nil && c.Reason == "ApprovalStale"
	})
	if live(t, "v1", "ConfigMap", ns, a.Name+"-config") != nil || got.Status.Phase != capstanv1.PhaseOutOfSync {
		t.Fatal("a stale approval applied the plan")
	}
	if !strings.Contains(condition(got, capstanv1.ConditionReady).Message, "the plan changed since it was approved") {
		t.Fatalf("status should say the plan changed: %s", condition(got, capstanv1.ConditionReady).Message)
	}
	got = update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest++
	})
	got = waitPhase(t, got, capstanv1.PhaseSynced)
	if got.Status.LastSyncRequest != got.Spec.SyncRequest {
		t.Fatalf("lastSyncRequest %d, syncRequest %d", got.Status.LastSyncRequest, got.Spec.SyncRequest)
	}
	if live(t, "v1", "ConfigMap", ns, a.Name+"-config") == nil {
		t.Fatal("the approved plan was not applied")
	}
}

// TestABareSyncRequestAfterAnApproval installs an add-on without manualSync
// as `capstan addon install` does (an approval of the reviewed plan), then
// changes its values and raises spec.syncRequest in one write, with the
// install's approval still in spec.approvedPlan. The approval was used up by
// the install: the request must apply the change, not hold it as stale.
func TestABareSyncRequestAfterAnApproval(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "bare-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true })))
	got := waitPhase(t, a, capstanv1.PhaseSuspended)
	installed := got.Status.Plan.Hash
	got = update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.Suspend = false
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest = max(cur.Spec.SyncRequest, cur.Status.LastSyncRequest) + 1
	})
	got = waitPhase(t, got, capstanv1.PhaseSynced)
	if got.Status.LastApprovedPlan != installed {
		t.Fatalf("status.lastApprovedPlan %q; want the install's approval %s", got.Status.LastApprovedPlan, installed)
	}

	got = update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues("greeting: bonjour")
		cur.Spec.SyncRequest++
	})
	got = waitFor(t, got, time.Minute, "the bare sync request to be handled or refused", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return cur.Status.ObservedGeneration == cur.Generation &&
			(cur.Status.LastSyncRequest == cur.Spec.SyncRequest || c != nil && c.Reason == "ApprovalStale")
	})
	if got.Status.LastSyncRequest != got.Spec.SyncRequest {
		t.Fatalf("the install's used approval held the bare sync request: %s", describeStatus(got))
	}
	cm := live(t, "v1", "ConfigMap", ns, a.Name+"-config")
	if cm == nil || cm.Object["data"].(map[string]any)["greeting"] != "bonjour" {
		t.Fatalf("the change was not applied: %v", cm)
	}
}

func TestSuspendAndPause(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "suspend-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true })))
	got := waitPhase(t, a, capstanv1.PhaseSuspended)
	if got.Status.Plan == nil || got.Status.Plan.Summary.Create != 3 || len(got.Status.Plan.Workloads) != 1 ||
		got.Status.Plan.Workloads[0].Images[0] != "nginx:1.27" || got.Status.Plan.Workloads[0].Ports[0].Port != 8080 {
		t.Fatalf("a suspended add-on still writes its plan: %+v", got.Status.Plan)
	}
	if live(t, "v1", "ConfigMap", ns, a.Name+"-config") != nil {
		t.Fatal("a suspended add-on applied")
	}
	got = update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.Suspend = false
		cur.Annotations = map[string]string{capstanv1.PausedAnnotation: "true"}
	})
	got = waitPhase(t, got, capstanv1.PhasePaused)
	time.Sleep(2 * time.Second)
	if live(t, "v1", "ConfigMap", ns, a.Name+"-config") != nil {
		t.Fatal("a paused add-on applied")
	}
	update(t, got, func(cur *capstanv1.Addon) { delete(cur.Annotations, capstanv1.PausedAnnotation) })
	waitPhase(t, a, capstanv1.PhaseSynced)
}

func TestInvalidObjectAppliesNothing(t *testing.T) {
	ns := newNamespace(t)
	var b strings.Builder
	for i := 0; i < 49; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\ndata:\n  i: %q\n", i, fmt.Sprint(i))
	}
	// A Service with an impossible port: valid YAML, refused by the API server.
	b.WriteString("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: bad\nspec:\n  ports:\n    - port: 99999\n")
	url, _ := charts.publish(t, chart{name: "fifty", version: "1.0.0", files: map[string]string{"templates/all.yaml": b.String()}})
	a := create(t, newAddon(controllerNS, "invalid-"+ns, url, withTarget(ns)))
	got := waitPhase(t, a, capstanv1.PhaseFailed)
	var failed []string
	for _, o := range got.Status.Plan.Objects {
		if o.Error != "" {
			failed = append(failed, o.Kind+"/"+o.Name+": "+o.Error)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "Service/bad") || !strings.Contains(failed[0], "99999") {
		t.Fatalf("the plan should name the one bad object and the API server's message: %v", failed)
	}
	if c := condition(got, capstanv1.ConditionStalled); c == nil || c.Status != "True" {
		t.Fatalf("Stalled = %+v", c)
	}
	for i := 0; i < 49; i++ {
		if live(t, "v1", "ConfigMap", ns, fmt.Sprintf("cm-%02d", i)) != nil {
			t.Fatalf("cm-%02d was applied although another object is invalid", i)
		}
	}
}
