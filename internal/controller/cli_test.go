package controller_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/cli"
)

// capstan runs the capstan command line in process against the suite's
// cluster, and returns what it printed.
func capstan(t *testing.T, args ...string) string {
	t.Helper()
	out, err := capstanFails(t, args...)
	if err != nil {
		t.Fatalf("capstan %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// capstanFails runs the capstan command line as capstan does, and returns
// what it printed and its error.
func capstanFails(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := cli.NewRootCommand()
	root.SetArgs(append(args, "--kubeconfig", cluster.Kubeconfig))
	root.SetOut(&out)
	root.SetErr(&out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestCLILifecycle drives a restricted add-on through the CLI as a person
// would: add, review, install, edit, sync, remove; and checks what runs
// after each step.
func TestCLILifecycle(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "cli", version: "1.0.0", files: map[string]string{
		"values.schema.json":    `{"type":"object","properties":{"greeting":{"type":"string"},"password":{"type":"string","writeOnly":true}}}`,
		"templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-greeting\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-password\nstringData:\n  password: {{ .Values.password | quote }}\n",
	}})
	const password = "s3cret-cli-password-4P"
	pwFile := filepath.Join(t.TempDir(), "password.txt")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "cli"}
	greeting := func() string { return configMapKey(t, ns, "cli-greeting", "greeting") }

	out := capstan(t, "addon", "add", "cli", "-n", ns, "--chart-url", url, "--set", "greeting=hello", "--secret-input", "password=@"+pwFile, "--manual-sync")
	if !strings.Contains(out, "suspended") {
		t.Errorf("add said %q", out)
	}
	a := waitPhase(t, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cli"}}, capstanv1.PhaseSuspended)
	if strings.Contains(out, password) {
		t.Error("add printed the secret input")
	}
	out = capstan(t, "addon", "get", "cli", "-n", ns, "--diff")
	if !strings.Contains(out, a.Status.Plan.Hash) || strings.Contains(out, password) {
		t.Errorf("get shows no plan hash, or shows the secret input:\n%s", out)
	}

	out = capstan(t, "addon", "install", "cli", "-n", ns, "--plan", a.Status.Plan.Hash)
	if !strings.Contains(out, "Installing plan "+a.Status.Plan.Hash) || !strings.Contains(out, "Synced") {
		t.Errorf("install --wait said:\n%s", out)
	}
	if g := greeting(); g != "hello" {
		t.Errorf("after the install the greeting is %q", g)
	}
	secret := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cli-password"}, secret); err != nil || string(secret.Data["password"]) != password {
		t.Errorf("the rendered Secret: %v; want the secret input from the file", err)
	}

	capstan(t, "addon", "edit", "cli", "-n", ns, "--set", "greeting=bonjour")
	edited := waitFor(t, a, 60*time.Second, "the edit's plan to wait for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	if g := greeting(); g != "hello" {
		t.Errorf("a manual-sync edit was applied before its sync: %q", g)
	}
	next := "capstan addon sync cli -n " + ns + " --plan " + edited.Status.Plan.Hash
	if out = capstan(t, "addon", "get", "cli", "-n", ns, "--diff"); !strings.Contains(out, next) {
		t.Errorf("get --diff of the edit's plan does not print %q:\n%s", next, out)
	}
	out = capstan(t, "addon", "sync", "cli", "-n", ns, "--plan", edited.Status.Plan.Hash)
	if !strings.Contains(out, "Synced") {
		t.Errorf("sync --wait said:\n%s", out)
	}
	if g := greeting(); g != "bonjour" {
		t.Errorf("after the sync the greeting is %q", g)
	}

	out = capstan(t, "addon", "remove", "cli", "-n", ns, "--uninstall")
	if !strings.Contains(out, "removed") {
		t.Errorf("remove --wait said:\n%s", out)
	}
	if err := admin.Get(ctx, key, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Addon after remove: %v", err)
	}
	if live(t, "v1", "ConfigMap", ns, "cli-greeting") != nil {
		t.Error("the add-on's ConfigMap survived remove --uninstall")
	}
}

// TestCLIRemoveEndsWhenTheUninstallFails: `capstan addon remove` of a
// restricted add-on whose pre-delete hook fails ends at once with the
// controller's message, as install and sync do on a Failed add-on,
// instead of waiting out the whole --timeout for a removal that only a
// person can move on.
func TestCLIRemoveEndsWhenTheUninstallFails(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "failingdeletehook", version: "1.0.0", files: map[string]string{
		"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n",
		"templates/backup.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: backup\n  annotations:\n    helm.sh/hook: pre-delete\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    metadata:\n      labels: {capstan.dev/test-fail: \"true\"}\n" +
			"    spec:\n      restartPolicy: Never\n      containers:\n        - name: backup\n          image: registry.example/backup:1.0\n",
	}})
	a := create(t, newAddon(ns, "db", url))
	if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("profile %s, want restricted", got.Status.Profile)
	}

	start := time.Now()
	out, err := capstanFails(t, "addon", "remove", "db", "-n", ns, "--timeout", "150s")
	if err == nil || !strings.Contains(err.Error(), "pre-delete hook failed") || !strings.Contains(err.Error(), "The removal stands") {
		t.Fatalf("remove of an add-on whose pre-delete hook fails, after %s: %v; want the controller's message\n%s",
			time.Since(start).Round(time.Second), err, out)
	}
	if cur := getAddon(t, a); cur.DeletionTimestamp == nil || live(t, "v1", "ConfigMap", ns, "settings") == nil {
		t.Fatalf("after the failed uninstall the Addon is not being deleted, or its ConfigMap is gone: %s", describeStatus(cur))
	}

	// What the message says to do lets the Addon go, the software kept.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.DeletionPolicy = capstanv1.DeletionOrphan })
	eventually(t, 60*time.Second, "the Addon to go once it orphans", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
}
