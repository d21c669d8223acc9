package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/values"
)

// TestOperations drives a restricted add-on through what a person does to
// it, with the operations layer that the CLI and the API share, against the
// running controller: approve the plan, write a secret input, suspend and
// resume, and remove it keeping its values.
func TestOperations(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	name := "ops"
	key := client.ObjectKey{Namespace: ns, Name: name}
	url, _ := charts.publish(t, chart{name: "ops", version: "1.0.0", files: map[string]string{
		"values.schema.json": `{"type":"object","properties":{"token":{"type":"string","writeOnly":true}}}`,
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-token
stringData:
  token: {{ .Values.token | default "unset" | quote }}
`,
	}})
	a := create(t, newAddon(ns, name, url, withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true })))
	a = waitPhase(t, a, capstanv1.PhaseOutOfSync)

	approval, err := addons.Approve(ctx, admin, key, "")
	if err != nil {
		t.Fatalf("approving: %v", err)
	}
	if approval.Hash != a.Status.Plan.Hash || approval.SyncRequest != 1 || !strings.Contains(approval.Summary, "1 to create") {
		t.Errorf("approval = %+v; want the plan in status, %s, as sync request 1", approval, a.Status.Plan.Hash)
	}
	a = waitPhase(t, a, capstanv1.PhaseSynced)

	const token = "s3cret-ops-token-7Q"
	if err := addons.WriteSecretInputs(ctx, admin, key, map[string]string{"token": token}); err != nil {
		t.Fatalf("writing a secret input: %v", err)
	}
	a = getAddon(t, a)
	if len(a.Spec.ValuesFrom) != 1 || a.Spec.ValuesFrom[0].TargetPath != "token" || !strings.HasPrefix(a.Spec.ValuesFrom[0].Name, values.ValuesPrefix(name)) {
		t.Fatalf("valuesFrom = %+v; want one entry for token, in a new values Secret", a.Spec.ValuesFrom)
	}
	valuesSecret := a.Spec.ValuesFrom[0].Name
	a = waitFor(t, a, 60*time.Second, "a plan for the secret input", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.Plan != nil && cur.Status.Plan.Generation == cur.Generation
	})
	assertNotShown(t, a, token)
	if _, err := addons.Approve(ctx, admin, key, a.Status.Plan.Hash); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, a, capstanv1.PhaseSynced)
	rendered := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-token"}, rendered); err != nil {
		t.Fatal(err)
	}
	if string(rendered.Data["token"]) != token {
		t.Error("the rendered Secret does not carry the secret input")
	}

	if err := addons.SetSuspend(ctx, admin, key, true); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, a, capstanv1.PhaseSuspended)
	if err := addons.SetSuspend(ctx, admin, key, false); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, a, capstanv1.PhaseSynced)

	if err := addons.Remove(ctx, admin, key, addons.RemoveOptions{KeepValues: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the Addon to be gone", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, key, &capstanv1.Addon{}))
	})
	kept := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: valuesSecret}, kept); err != nil {
		t.Fatalf("the values Secret was not kept: %v", err)
	}
	for _, o := range kept.OwnerReferences {
		if o.Kind == "Addon" {
			t.Errorf("the kept values Secret is still owned by the Addon: %+v", o)
		}
	}
	eventually(t, 60*time.Second, "the rendered Secret to be removed with the add-on", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-token"}, &corev1.Secret{}))
	})
	if err := addons.Remove(ctx, admin, key, addons.RemoveOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("removing a removed add-on: %v; want not found", err)
	}
}

// TestInstallBindsTheReviewedPlan installs suspended add-ons the way the
// restricted flow does (create suspended, review the plan, install): only
// the reviewed, current, unblocked plan is installed, in one write.
func TestInstallBindsTheReviewedPlan(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "bound", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  a: b\n",
	}})
	a := create(t, newAddon(ns, "bound", url, withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true })))
	key := client.ObjectKeyFromObject(a)
	a = waitPhase(t, a, capstanv1.PhaseSuspended)
	if _, err := addons.Install(ctx, admin, key, "sha256:not-the-plan"); !errors.Is(err, addons.ErrStalePlan) {
		t.Fatalf("installing with another hash: %v; want ErrStalePlan", err)
	}
	if got := getAddon(t, a); !got.Spec.Suspend || got.Spec.SyncRequest != 0 {
		t.Fatalf("a refused install changed the Addon: suspend %v, syncRequest %d", got.Spec.Suspend, got.Spec.SyncRequest)
	}
	approval, err := addons.Install(ctx, admin, key, a.Status.Plan.Hash)
	if err != nil {
		t.Fatalf("installing the reviewed plan: %v", err)
	}
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if got.Spec.Suspend || got.Spec.ApprovedPlan != approval.Hash || got.Status.LastSyncRequest != approval.SyncRequest {
		t.Errorf("after the install: suspend %v, approvedPlan %s (want %s), lastSyncRequest %d (want %d)",
			got.Spec.Suspend, got.Spec.ApprovedPlan, approval.Hash, got.Status.LastSyncRequest, approval.SyncRequest)
	}
	if live(t, "v1", "ConfigMap", ns, "bound-settings") == nil {
		t.Error("the reviewed plan's ConfigMap was not applied")
	}

	// A plan the guardrails block is never installed.
	bad, _ := charts.publish(t, chart{name: "blocked", version: "1.0.0", files: map[string]string{
		"templates/role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ .Release.Name }}-everything\nrules: []\n",
	}})
	b := create(t, newAddon(ns, "blocked", bad, withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true })))
	b = waitPhase(t, b, capstanv1.PhaseBlocked)
	if _, err := addons.Install(ctx, admin, client.ObjectKeyFromObject(b), b.Status.Plan.Hash); !errors.Is(err, addons.ErrPlanBlocked) {
		t.Errorf("installing a blocked plan: %v; want ErrPlanBlocked", err)
	}
	if got := getAddon(t, b); !got.Spec.Suspend {
		t.Error("a refused install cleared suspend")
	}
}

// TestApproveAfterAnOlderSyncRequest applies an older manifest again, as
// GitOps does, so that spec.syncRequest falls below the last request the
// controller handled. The wait names the number to pass, and an approval
// from the CLI or the API still applies: it raises the request above the
// last one handled, not merely one above the spec's.
func TestApproveAfterAnOlderSyncRequest(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "behind"}
	url, _ := charts.publish(t, chart{name: "behind", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  v: {{ .Values.v | default \"a\" | quote }}\n",
	}})
	a := create(t, newAddon(ns, key.Name, url, withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true })))
	for i, v := range []string{"", "b"} {
		if v != "" {
			a = update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("v: " + v) })
		}
		a = waitFor(t, a, 60*time.Second, "a plan to approve", func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.Plan != nil && cur.Status.Plan.Generation == cur.Generation
		})
		if _, err := addons.Approve(ctx, admin, key, a.Status.Plan.Hash); err != nil {
			t.Fatal(err)
		}
		a = waitFor(t, a, 60*time.Second, fmt.Sprintf("sync request %d handled", i+1), func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.LastSyncRequest == int64(i+1)
		})
	}

	// The older manifest: sync request 1 again, with a change.
	a = update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest = 1; cur.Spec.Values = jsonValues("v: c") })
	a = waitFor(t, a, 60*time.Second, "the change to wait for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.Plan != nil && cur.Status.Plan.Generation == cur.Generation
	})
	if msg := condition(a, capstanv1.ConditionReady).Message; !strings.Contains(msg, "raise spec.syncRequest above 2 (it is 1") {
		t.Errorf("the wait should name the request to pass: %q", msg)
	}
	approval, err := addons.Approve(ctx, admin, key, a.Status.Plan.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if approval.SyncRequest != 3 {
		t.Errorf("the approval wrote sync request %d; want 3, above the last handled", approval.SyncRequest)
	}
	waitFor(t, a, 60*time.Second, "the approved change applied", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.LastSyncRequest == 3
	})
}

// TestFailedInstallLetsTheFixApply installs a suspended add-on as the
// restricted flow does (review the plan, install it: an approval of its
// hash), and its pre-install hook fails. The values are fixed: the new plan
// applies, with no second approval, as a hook failure's message promises;
// the failed sync used up the approval. It waited as ApprovalStale before.
func TestFailedInstallLetsTheFixApply(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	a := dbapp(t, ns, `{hooks: {initdb: {fail: true, exitCode: 3}}}`, withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true }))
	a = waitPhase(t, a, capstanv1.PhaseSuspended)
	approval, err := addons.Install(ctx, admin, client.ObjectKeyFromObject(a), a.Status.Plan.Hash)
	if err != nil {
		t.Fatalf("installing the reviewed plan: %v", err)
	}
	failed := failedWith(t, a, "pre-install hook Job "+ns+"/db-initdb", "exited with code 3")
	if failed.Status.LastSyncRequest == approval.SyncRequest {
		t.Errorf("the failed install recorded its request %d as handled already", approval.SyncRequest)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = nil })
	gen := getAddon(t, a).Generation
	got := waitFor(t, a, 90*time.Second, "the fixed plan to apply", func(cur *capstanv1.Addon) bool {
		if cur.Generation == gen && cur.Status.ObservedGeneration == gen && cur.Status.Phase == capstanv1.PhaseOutOfSync {
			t.Fatalf("the fix waits on the failed install's approval: %s", describeStatus(cur))
		}
		return cur.Generation >= gen && cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if got.Status.LastSyncRequest != approval.SyncRequest || got.Status.LastApprovedPlan != approval.Hash || got.Status.SyncInProgress != nil {
		t.Errorf("status: lastSyncRequest %d (want %d), lastApprovedPlan %s (want %s), syncInProgress %+v (want none)",
			got.Status.LastSyncRequest, approval.SyncRequest, got.Status.LastApprovedPlan, approval.Hash, got.Status.SyncInProgress)
	}
	if j := job(t, ns, "db-initdb"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("after the fix the pre-install Job is %s; want it run and succeeded", jobString(j))
	}
}
