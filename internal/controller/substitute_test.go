package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// TestSubstitution: a git folder written for Flux's postBuild
// substitution installs with its variables from spec.substitute, a
// ConfigMap and a Secret, spec.substitute winning. An unquoted replica
// count reaches the API server as a number, a quoted port as a string.
// The plan shows the substituted objects, with the Secret's value hidden
// in a ConfigMap's diff. A changed ConfigMap of variables is applied at
// once, well inside the resync interval (a shard's controller here, whose
// resync is 10 minutes away, so that what applies it within the wait is
// the ConfigMap's watch, however slow the machine). A variable used and defined
// nowhere stops the render: the add-on is Failed, the message names the
// object and the variable, and what runs is left as it was.
func TestSubstitution(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	name := "subst-" + ns[len(ns)-5:]
	const token = "s3cr3t-t0ken-4711"
	objects := func(extra string) string {
		return `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  cluster: ${cluster}
  region: ${region:=eu-west-1}
  port: "${port}"
  literal: $${cluster}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: conn
data:
  url: https://app:${token}@db.${cluster}.internal
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: ${replicas}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          env:
            - name: PORT
              value: "${port}"
` + extra
	}
	repo := newFolderRepo(t)
	first := repo.commit(map[string]string{"app/objects.yaml": objects("")})

	vars := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-vars"},
		Data:       map[string]string{"cluster": "prod", "replicas": "5", "port": "8080", "not.a.name": "skipped"},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-secret"},
		Data:       map[string][]byte{"token": []byte(token)},
	}
	for _, o := range []client.Object{vars, secret} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	const resync = 10 * time.Minute
	shard := startShard(t, name, func(c *controller.Config) { c.ResyncInterval = resync })
	a := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: repo.url(), Revision: first, Path: "app"},
			TargetNamespace: ns, DeletionPolicy: capstanv1.DeletionDelete, ManualSync: true,
			Substitute: map[string]string{"replicas": "2"},
			SubstituteFrom: []capstanv1.SubstituteReference{
				{Kind: "ConfigMap", Name: vars.Name},
				{Kind: "Secret", Name: secret.Name},
				{Kind: "ConfigMap", Name: name + "-absent", Optional: true},
			},
		},
	}
	shard(a)
	a = create(t, a)

	planned := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	diffs := map[string]string{}
	for _, o := range planned.Status.Plan.Objects {
		diffs[o.Name] = o.Diff
	}
	for obj, want := range map[string]string{"settings": "cluster: prod", "web": "replicas: 2"} {
		if !strings.Contains(diffs[obj], want) {
			t.Errorf("the plan's diff of %s lacks %q:\n%s", obj, want, diffs[obj])
		}
	}
	// NOTE: a value that holds a secret is hidden whole.
	if strings.Contains(diffs["conn"], token) || !strings.Contains(diffs["conn"], "url: (hidden)") {
		t.Errorf("the Secret's value is not hidden in the plan:\n%s", diffs["conn"])
	}

	update(t, planned, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest++
	})
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	settings := live(t, "v1", "ConfigMap", ns, "settings")
	wantData := map[string]any{"cluster": "prod", "region": "eu-west-1", "port": "8080", "literal": "${cluster}"}
	for k, v := range wantData {
		if got, _, _ := unstructured.NestedString(settings.Object, "data", k); got != v {
			t.Errorf("settings.data.%s = %q, want %q", k, got, v)
		}
	}
	if url, _, _ := unstructured.NestedString(live(t, "v1", "ConfigMap", ns, "conn").Object, "data", "url"); url != "https://app:"+token+"@db.prod.internal" {
		t.Errorf("conn.data.url = %q: the Secret's variable was not applied", url)
	}
	web := &appsv1.Deployment{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, web); err != nil {
		t.Fatal(err)
	}
	if *web.Spec.Replicas != 2 || web.Spec.Template.Spec.Containers[0].Env[0].Value != "8080" {
		t.Errorf("web: replicas %d (want spec.substitute's 2), PORT %q", *web.Spec.Replicas, web.Spec.Template.Spec.Containers[0].Env[0].Value)
	}

	// A changed ConfigMap is a new render, applied at once: manual sync
	// off, then the variable changed.
	update(t, synced, func(cur *capstanv1.Addon) { cur.Spec.ManualSync = false })
	waitFor(t, a, 30*time.Second, "manual sync off", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	vars.Data["cluster"] = "staging"
	if err := admin.Update(ctx, vars); err != nil {
		t.Fatal(err)
	}
	eventually(t, soon, "the changed variable applied before the resync", func() bool {
		got, _, _ := unstructured.NestedString(live(t, "v1", "ConfigMap", ns, "settings").Object, "data", "cluster")
		return got == "staging"
	})
	// NOTE: the status that records the apply comes after it: the phase
	// read at once may still be the last sync's Synced.
	restaged := waitFor(t, a, 30*time.Second, "the change recorded", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && len(cur.Status.History) >= 2
	})
	if h := restaged.Status.History; len(h) < 2 || h[0].AppliedHash == h[1].AppliedHash {
		t.Errorf("the changed variable is not a revision of its own: %+v", h)
	}

	// A variable defined nowhere: nothing applied, the message says what.
	second := repo.commit(map[string]string{"app/objects.yaml": strings.Replace(objects(""), "${cluster}\n", "${cluster}\n  owner: ${team}\n", 1)})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Git.Revision = second })
	failed := waitPhase(t, a, capstanv1.PhaseFailed)
	msg := condition(failed, "Ready").Message
	for _, want := range []string{"ConfigMap settings: ${team} is not defined", "spec.substitute", "$${"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready's message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, token) {
		t.Errorf("the message holds the Secret's value: %s", msg)
	}
	if _, found, _ := unstructured.NestedString(live(t, "v1", "ConfigMap", ns, "settings").Object, "data", "owner"); found {
		t.Error("a render that failed was applied")
	}

	// An object of variables that is missing blocks the add-on, with the
	// entry named; nothing is rendered, so nothing is applied or pruned.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Git.Revision = first
		cur.Spec.Prune = true
		cur.Spec.SubstituteFrom = append(cur.Spec.SubstituteFrom, capstanv1.SubstituteReference{Kind: "ConfigMap", Name: name + "-gone"})
	})
	blocked := waitPhase(t, a, capstanv1.PhaseBlocked)
	if errs := blocked.Status.Plan.ValuesErrors; len(errs) != 1 || errs[0].Path != "spec.substituteFrom[3]" ||
		!strings.Contains(errs[0].Message, "ConfigMap "+name+"-gone does not exist; create it, or mark the entry optional") {
		t.Errorf("values errors %+v", errs)
	}
	for _, obj := range []string{"settings", "conn"} {
		if live(t, "v1", "ConfigMap", ns, obj) == nil {
			t.Errorf("ConfigMap %s was deleted while the add-on was blocked", obj)
		}
	}
}
