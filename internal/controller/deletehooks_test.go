package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// guardedHooksChart is a tenant's chart with one ConfigMap and a
// pre-delete and a post-delete ConfigMap hook. hookNamespace moves the
// hooks, and configNamespace the ConfigMap, out of the Addon's namespace.
var guardedHooksChart = map[string]string{
	"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n" +
		"  {{- with .Values.configNamespace }}\n  namespace: {{ . }}\n  {{- end }}\ndata: {a: b}\n",
	"templates/hooks.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: before-delete\n" +
		"  namespace: {{ .Values.hookNamespace | default .Release.Namespace }}\n  annotations:\n    helm.sh/hook: pre-delete\ndata: {hook: pre}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after-delete\n" +
		"  namespace: {{ .Values.hookNamespace | default .Release.Namespace }}\n  annotations:\n    helm.sh/hook: post-delete\ndata: {hook: post}\n",
}

// TestRestrictedDeleteHooksPassTheGuardrails deletes restricted add-ons
// whose delete hooks a tenant may not run, as the controller's account
// would run them: a Blocked add-on never applied, whose pre-delete hook
// names another namespace; one never applied whose hooks are its own, but
// another object breaks a guardrail (Helm runs the delete hooks only of a
// release it installed); and an applied add-on whose values then move its
// hooks to another namespace. Each is deleted, nothing is created in the
// other namespace nor by a hook in its own, and the last one's event says
// why its hooks did not run.
func TestRestrictedDeleteHooksPassTheGuardrails(t *testing.T) {
	url, _ := charts.publish(t, chart{name: "guardedhooks", version: "1.0.0", files: guardedHooksChart})
	hookObjects := func(t *testing.T, ns string) []string {
		t.Helper()
		var found []string
		for _, name := range []string{"before-delete", "after-delete"} {
			if live(t, "v1", "ConfigMap", ns, name) != nil {
				found = append(found, ns+"/"+name)
			}
		}
		return found
	}

	t.Run("never-applied-hook-elsewhere", func(t *testing.T) {
		ns, other := newNamespace(t), newNamespace(t)
		a := create(t, newAddon(ns, "tenant", url, withValues("hookNamespace: "+other)))
		waitFor(t, a, 90*time.Second, "Blocked by namespace-not-allowed", violationRule("namespace-not-allowed"))
		deleteAddon(t, a)
		if found := hookObjects(t, other); len(found) > 0 {
			t.Errorf("the uninstall of a Blocked tenant add-on ran its hooks in another namespace: %v", found)
		}
	})

	t.Run("never-applied-own-hooks", func(t *testing.T) {
		ns, other := newNamespace(t), newNamespace(t)
		a := create(t, newAddon(ns, "tenant", url, withValues("configNamespace: "+other)))
		waitFor(t, a, 90*time.Second, "Blocked by namespace-not-allowed", violationRule("namespace-not-allowed"))
		deleteAddon(t, a)
		if found := hookObjects(t, ns); len(found) > 0 {
			t.Errorf("the uninstall of an add-on never applied ran its delete hooks: %v", found)
		}
	})

	t.Run("applied-then-hooks-elsewhere", func(t *testing.T) {
		ns, other := newNamespace(t), newNamespace(t)
		a := create(t, newAddon(ns, "tenant", url))
		if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Profile != capstanv1.ProfileRestricted {
			t.Fatalf("profile %s, want restricted", got.Status.Profile)
		}
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("hookNamespace: " + other) })
		waitFor(t, a, 90*time.Second, "Blocked by namespace-not-allowed", violationRule("namespace-not-allowed"))
		deleteAddon(t, a)
		if found := append(hookObjects(t, other), hookObjects(t, ns)...); len(found) > 0 {
			t.Errorf("the uninstall ran delete hooks that break the guardrails: %v", found)
		}
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the uninstall stopped: the add-on's ConfigMap is still there")
		}
		eventually(t, 30*time.Second, "a DeleteHooksRefused event that names the rule", func() bool {
			msg := addonEvent(t, a, "DeleteHooksRefused")
			return strings.Contains(msg, "ConfigMap "+other+"/before-delete") && strings.Contains(msg, "namespace-not-allowed")
		})
	})
}

// addonEvent is the note of the newest event of a with reason, or "".
func addonEvent(t *testing.T, a *capstanv1.Addon, reason string) string {
	t.Helper()
	var events eventsv1.EventList
	if err := admin.List(context.Background(), &events, client.InNamespace(a.Namespace)); err != nil {
		t.Fatal(err)
	}
	note := ""
	for _, e := range events.Items {
		if e.Regarding.Name == a.Name && e.Reason == reason {
			note = e.Note
		}
	}
	return note
}

// TestReinstallKeepsKeptHookObjects installs a chart whose pre-install
// hooks are a claim and a ConfigMap marked helm.sh/resource-policy: keep,
// removes the Addon with Orphan and makes it again under the same name:
// its pre-install hooks run again, and their default before-hook-creation
// policy applies over both objects instead of deleting them, so the claim
// (and its volume) and the kept ConfigMap are the ones the first install
// made.
func TestReinstallKeepsKeptHookObjects(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "keptclaim", version: "1.0.0", files: map[string]string{
		"templates/claim.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/resource-policy: keep\n" +
			"spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
		"templates/seed.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/resource-policy: keep\ndata: {a: b}\n",
		"templates/app.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata: {a: b}\n",
	}})
	name := "kept-" + ns[len(ns)-5:]
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	claim, seed := live(t, "v1", "PersistentVolumeClaim", ns, "data"), live(t, "v1", "ConfigMap", ns, "seed")
	if claim == nil || seed == nil {
		t.Fatal("the pre-install hooks did not run")
	}
	deleteAddon(t, a)

	again := create(t, newAddon(controllerNS, name, url, withTarget(ns)))
	waitPhase(t, again, capstanv1.PhaseSynced)
	if got := live(t, "v1", "PersistentVolumeClaim", ns, "data"); got == nil || got.GetUID() != claim.GetUID() {
		t.Errorf("the reinstall's pre-install hook replaced the claim (%v); a claim hook must be applied over, never deleted", got != nil)
	}
	if got := live(t, "v1", "ConfigMap", ns, "seed"); got == nil || got.GetUID() != seed.GetUID() {
		t.Errorf("the reinstall's pre-install hook replaced the ConfigMap marked to be kept (%v)", got != nil)
	}
}

// TestForegroundDeleteOfARestrictedAddonWarns deletes a restricted Addon
// with foreground propagation, as kubectl delete --cascade=foreground or
// a GitOps prune does: the garbage collector deletes the objects that name
// it as owner at once, before Capstan's finalizer can run pre-delete hooks
// or keep anything, so Capstan says so in a Warning event.
func TestForegroundDeleteOfARestrictedAddonWarns(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, cmChart("1.0.0", "alpha"))
	a := create(t, newAddon(ns, "fg", url))
	if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("profile %s; want restricted", got.Status.Profile)
	}
	if err := admin.Delete(context.Background(), a, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the Addon to go", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	eventually(t, 30*time.Second, "the ForegroundDeletion event", func() bool {
		return strings.Contains(addonEvent(t, a, "ForegroundDeletion"), "deleted with foreground propagation")
	})
}

// takenHooksChart renders a ConfigMap and, with takes set, an object of
// that kind and name (a Secret, a claim or an account) and a pre-delete
// Job that uses it: envFrom the Secret, a volume of the claim, or the
// account.
var takenHooksChart = map[string]string{
	"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n",
	"templates/taken.yaml": `{{- with .Values.takes }}
{{- if eq .kind "Secret" }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}
stringData: {password: chart}
{{- else if eq .kind "PersistentVolumeClaim" }}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ .name }}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
{{- else }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
{{- end }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: reader
  annotations:
    helm.sh/hook: pre-delete
spec:
  template:
    spec:
      restartPolicy: Never
      {{- if eq .kind "ServiceAccount" }}
      serviceAccountName: {{ .name }}
      {{- end }}
      containers:
        - name: read
          image: registry.example/reader:1.0
          {{- if eq .kind "Secret" }}
          envFrom: [{secretRef: {name: {{ .name }}}}]
          {{- end }}
      {{- if eq .kind "PersistentVolumeClaim" }}
      volumes: [{name: data, persistentVolumeClaim: {claimName: {{ .name }}}}]
      {{- end }}
{{- end }}
`,
}

// TestDeleteHooksUseNoObjectTheAddonDoesNotOwn installs a clean tenant
// chart into a namespace that holds the platform's Secret (claim,
// account), then changes the values so that the chart renders an object of
// that name too, and a pre-delete Job that uses it: the sync is Blocked
// (not-owned), and the Addon is deleted. The Job is never created, since
// what it names is not the chart's, and a DeleteHooksRefused event says
// why; the platform's object is left as it is. Before, the hook's
// reference passed as one to an object the chart renders, and the Job ran
// with the platform's Secret.
func TestDeleteHooksUseNoObjectTheAddonDoesNotOwn(t *testing.T) {
	ctx := context.Background()
	url, _ := charts.publish(t, chart{name: "takenhooks", version: "1.0.0", files: takenHooksChart})
	for _, tc := range []struct {
		kind string
		obj  client.Object
		path string
	}{
		{"Secret", &corev1.Secret{StringData: map[string]string{"password": "platform"}}, "envFrom[0].secretRef.name"},
		{"PersistentVolumeClaim", &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
			"persistentVolumeClaim.claimName"},
		{"ServiceAccount", &corev1.ServiceAccount{}, "serviceAccountName"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := newNamespace(t)
			rec := recordEvents(t, ns)
			// The platform's object, which carries no label of the add-on.
			tc.obj.SetNamespace(ns)
			tc.obj.SetName("platform-db")
			if err := admin.Create(ctx, tc.obj); err != nil {
				t.Fatal(err)
			}
			a := create(t, newAddon(ns, "tenant", url, withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete })))
			if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Profile != capstanv1.ProfileRestricted {
				t.Fatalf("profile %s, want restricted", got.Status.Profile)
			}
			update(t, a, func(cur *capstanv1.Addon) {
				cur.Spec.Values = jsonValues("takes: {kind: " + tc.kind + ", name: platform-db}")
			})
			waitFor(t, a, 90*time.Second, "Blocked by not-owned", violationRule("not-owned"))
			deleteAddon(t, a)
			if n := rec.count("Job/reader", watch.Added); n != 0 {
				t.Errorf("the pre-delete Job that uses the platform's %s was created %d times; want never", tc.kind, n)
			}
			if live(t, "v1", tc.kind, ns, "platform-db") == nil {
				t.Errorf("the platform's %s was deleted", tc.kind)
			}
			eventually(t, 30*time.Second, "a DeleteHooksRefused event that names the hook and the rule", func() bool {
				msg := addonEvent(t, a, "DeleteHooksRefused")
				return strings.Contains(msg, "Job "+ns+"/reader: reference-not-rendered") && strings.Contains(msg, tc.path)
			})
		})
	}
}

// backupHookChart is a chart with a ConfigMap and a pre-delete Job hook
// that backs it up; its values name what the ConfigMap says.
var backupHookChart = map[string]string{
	"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {greeting: {{ .Values.greeting | quote }}}\n",
	"templates/backup.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: backup
  annotations:
    helm.sh/hook: pre-delete
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: backup
          image: registry.example/backup:1.0
`,
}

// TestDeleteHooksSkippedWhenTheirNamespaceIsGone deletes the namespaces of
// add-ons whose charts have a pre-delete Job, in the two ways it happens.
//
// A tenant's namespace deleted with its restricted Addon in it (kubectl
// delete ns): the API server refuses the hook's Job there, and the
// namespace controller deletes the add-on's objects anyway, so the
// uninstall goes on without the hook, and the Addon and then the
// namespace go. Before, the refused Job stopped the uninstall for good,
// and Capstan's finalizer held the namespace Terminating for ever.
//
// A cluster add-on with createNamespace whose target namespace was
// deleted by hand: the uninstall runs no hook and does not make the
// namespace again, which it would then leave behind, and a
// DeleteHooksRefused event says why. Before, the hook made it again.
func TestDeleteHooksSkippedWhenTheirNamespaceIsGone(t *testing.T) {
	ctx := context.Background()
	url, _ := charts.publish(t, chart{name: "backuphook", version: "1.0.0", files: backupHookChart})
	namespaceGone := func(ns string) bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}

	t.Run("tenant-namespace-deleted", func(t *testing.T) {
		ns := newNamespace(t)
		rec := recordEvents(t, ns)
		a := create(t, newAddon(ns, "tenant", url, withValues("greeting: hello")))
		if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Profile != capstanv1.ProfileRestricted {
			t.Fatalf("profile %s, want restricted", got.Status.Profile)
		}
		if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, "the Addon to go with its namespace", func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
		})
		if n := rec.count("Job/backup", watch.Added); n != 0 {
			t.Errorf("the pre-delete Job was created %d times in a namespace being deleted", n)
		}
		if !strings.Contains(logSink.String(), "the namespace "+ns+" is being deleted") {
			t.Error("the controller's log does not say why the delete hooks were not run")
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			return namespaceGone(ns), nil
		}); err != nil {
			var live corev1.Namespace
			if err := admin.Get(ctx, client.ObjectKey{Name: ns}, &live); err != nil {
				t.Fatal(err)
			}
			for _, c := range live.Status.Conditions {
				if strings.Contains(c.Message, capstanv1.Finalizer) {
					t.Errorf("the namespace is held by Capstan's finalizer: %s: %s", c.Type, c.Message)
				}
			}
			t.Logf("the namespace is still Terminating, held by something else: %+v", live.Status.Conditions)
		}
	})

	t.Run("target-namespace-deleted-by-hand", func(t *testing.T) {
		ns := "gone-target-" + fmt.Sprint(time.Now().UnixNano()%100000)
		a := create(t, newAddon(controllerNS, ns, url, withTarget(ns), withValues("greeting: hello"), withSpec(func(s *capstanv1.AddonSpec) {
			s.CreateNamespace = true
			s.DeletionPolicy = capstanv1.DeletionDelete
		})))
		waitPhase(t, a, capstanv1.PhaseSynced)
		// Suspended, so that no sync makes the namespace again before the
		// Addon is deleted.
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
		waitPhase(t, a, capstanv1.PhaseSuspended)
		if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, "the target namespace to go", func() bool { return namespaceGone(ns) })
		deleteAddon(t, a)
		if !namespaceGone(ns) {
			t.Errorf("the uninstall made the namespace %s again for its pre-delete hook, and left it behind", ns)
		}
		eventually(t, 30*time.Second, "a DeleteHooksRefused event that names the namespace", func() bool {
			return strings.Contains(addonEvent(t, a, "DeleteHooksRefused"), "the namespace "+ns+" does not exist")
		})
	})
}

// hangingDeleteHookChart is a tenant's chart with one ConfigMap and a Job
// hook of the event .Values.event whose pod never runs: no node matches it.
var hangingDeleteHookChart = map[string]string{
	"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n",
	"templates/hook.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: cleanup
  annotations:
    helm.sh/hook: {{ .Values.event }}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        capstan.dev/no-such-node: "true"
      containers:
        - name: cleanup
          image: registry.example/backup:1.0
`,
}

// TestDeleteHookNamespaceDeletedWhileItRuns deletes a tenant's restricted
// Addon whose pre-delete (or post-delete) Job never ends, and then, while
// the uninstall waits for that Job, the tenant's namespace. The namespace
// controller deletes the Job, which the wait finds gone: the uninstall
// goes on without the delete hooks, and the Addon and then the namespace
// go at once. Before, the Job gone was the hook's failure, so the
// uninstall stopped, and the finalizer held the namespace Terminating
// until the resync.
//
// NOTE: the race is made certain by its order: a shard of its own waits
// for a hook within the reconcile (--hook-wait=-1), so the namespace is
// deleted while the Job is waited for, after deleteHooks read it; and its
// resync is far off, so no later look hides a stopped uninstall.
func TestDeleteHookNamespaceDeletedWhileItRuns(t *testing.T) {
	ctx := context.Background()
	url, _ := charts.publish(t, chart{name: "hangingdeletehook", version: "1.0.0", files: hangingDeleteHookChart})
	for _, event := range []string{"pre-delete", "post-delete"} {
		t.Run(event, func(t *testing.T) {
			ns := newNamespace(t)
			shard := startShard(t, "nsgone-"+ns[len(ns)-5:], func(c *controller.Config) {
				c.HookWait = -1
				c.ResyncInterval = time.Hour
			})
			a := create(t, newAddon(ns, "tenant", url, shard, longHooks, withValues("event: "+event)))
			if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Profile != capstanv1.ProfileRestricted {
				t.Fatalf("profile %s, want restricted", got.Status.Profile)
			}
			if err := admin.Delete(ctx, a); err != nil {
				t.Fatal(err)
			}
			eventually(t, 60*time.Second, "the "+event+" Job to run", func() bool {
				j := job(t, ns, "cleanup")
				return j != nil && j.DeletionTimestamp == nil
			})
			if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
				return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{})), nil
			})
			if err != nil {
				got := &capstanv1.Addon{}
				if err := admin.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
					t.Fatal(err)
				}
				stalled := ""
				if c := condition(got, capstanv1.ConditionStalled); c != nil {
					stalled = c.Message
				}
				t.Fatalf("the Addon stayed after its namespace was deleted while its %s hook ran: %s: %s", event, describeStatus(got), stalled)
			}
			if !strings.Contains(logSink.String(), "the namespace "+ns+" is being deleted") {
				t.Error("the controller's log does not say why the delete hooks were not run")
			}
		})
	}
}

// TestUnnamedChartHookIsRefused: a chart's hook with only
// metadata.generateName cannot run, as Capstan runs a hook by its name. A
// cluster add-on whose chart has one is Blocked at its plan, naming the
// template and what to fix, rather than fail when the hook runs; and one
// applied before its render gained such a pre-delete hook is uninstalled
// without its delete hooks, with a DeleteHooksRefused event, rather than
// stop at the hook for ever.
func TestUnnamedChartHookIsRefused(t *testing.T) {
	url, _ := charts.publish(t, chart{name: "unnamedhook", version: "1.0.0", files: map[string]string{
		"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n",
		"templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n" +
			"  {{- if .Values.generate }}\n  generateName: cleanup-\n  {{- else }}\n  name: cleanup\n  {{- end }}\n" +
			"  annotations:\n    helm.sh/hook: pre-delete\ndata: {hook: pre}\n",
	}})
	unnamed := func(cur *capstanv1.Addon) bool {
		if cur.Status.Phase != capstanv1.PhaseBlocked || cur.Status.Plan == nil {
			return false
		}
		for _, v := range cur.Status.Plan.Violations {
			if v.Rule == "name-invalid" && strings.Contains(v.Message, "unnamedhook/templates/hook.yaml") && strings.Contains(v.Message, `generateName "cleanup-"`) &&
				strings.Contains(v.Message, "render a fixed metadata.name") {
				return true
			}
		}
		return false
	}
	cluster := func(ns string, values string) *capstanv1.Addon {
		return create(t, newAddon(controllerNS, "unnamed-"+ns[strings.LastIndex(ns, "-")+1:], url, withTarget(ns), withValues(values),
			withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete })))
	}

	t.Run("blocked-at-plan", func(t *testing.T) {
		ns := newNamespace(t)
		a := cluster(ns, "generate: true")
		if got := waitFor(t, a, 90*time.Second, "Blocked by name-invalid naming the template", unnamed); got.Status.Profile != capstanv1.ProfileCluster {
			t.Fatalf("profile %s, want cluster", got.Status.Profile)
		}
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("a Blocked add-on applied its ConfigMap")
		}
		deleteAddon(t, a)
	})

	t.Run("restricted-said-once", func(t *testing.T) {
		ns := newNamespace(t)
		a := create(t, newAddon(ns, "tenant", url, withValues("generate: true")))
		got := waitFor(t, a, 90*time.Second, "Blocked by name-invalid naming the template", unnamed)
		n := 0
		for _, v := range got.Status.Plan.Violations {
			if v.Rule == "name-invalid" {
				n++
			}
		}
		if got.Status.Profile != capstanv1.ProfileRestricted || n != 1 {
			t.Errorf("profile %s, %d name-invalid violations %+v; want restricted, one", got.Status.Profile, n, got.Status.Plan.Violations)
		}
		deleteAddon(t, a)
	})

	t.Run("uninstall-goes-on", func(t *testing.T) {
		ns := newNamespace(t)
		a := cluster(ns, "generate: false")
		waitPhase(t, a, capstanv1.PhaseSynced)
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("generate: true") })
		waitFor(t, a, 90*time.Second, "Blocked by name-invalid naming the template", unnamed)
		deleteAddon(t, a)
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the uninstall stopped: the add-on's ConfigMap is still there")
		}
		if live(t, "v1", "ConfigMap", ns, "cleanup") != nil {
			t.Error("the uninstall ran the pre-delete hook")
		}
		eventually(t, 30*time.Second, "a DeleteHooksRefused event that names the rule", func() bool {
			return strings.Contains(addonEvent(t, a, "DeleteHooksRefused"), "name-invalid")
		})
	})
}
