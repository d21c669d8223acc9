package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
)

// valuesSecrets names the Secrets labelled for the Addon name in ns.
func valuesSecrets(t *testing.T, c client.Client, ns, name string) []string {
	t.Helper()
	var list corev1.SecretList
	if err := c.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{capstanv1.AddonLabel: name}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

// TestSecretInputsOfAnInterruptedWriteAreNotLeft: a command interrupted
// after the Secret of its secret inputs was made, and before the Addon
// write was sent, deletes the Secret again: no Addon names it, and it
// holds a password.
func TestSecretInputsOfAnInterruptedWriteAreNotLeft(t *testing.T) {
	cluster, admin := apiServer(t)
	ns := testNamespace(t, admin)
	base, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// interrupted is a client whose context is cancelled right after it
	// created a Secret, as a Ctrl-C at that moment would.
	interrupted := func() (context.Context, client.Client) {
		ctx, cancel := context.WithCancel(t.Context())
		return ctx, interceptor.NewClient(base, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				err := c.Create(ctx, obj, opts...)
				if _, ok := obj.(*corev1.Secret); ok {
					cancel()
				}
				return err
			},
		})
	}

	ctx, c := interrupted()
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://charts.invalid/web-1.0.0.tgz"}}}
	if _, err := addons.Add(ctx, c, a, map[string]string{"db.password": "hunter2"}); err == nil {
		t.Fatal("an add interrupted before the Addon was sent succeeded")
	}
	if left := valuesSecrets(t, admin, ns, "web"); len(left) > 0 {
		t.Errorf("an interrupted add left the Secrets %v", left)
	}
	if err := admin.Get(t.Context(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}); err == nil {
		t.Error("an interrupted add created the Addon")
	}

	newAddon(t, admin, ns, "db", nil)
	ctx, c = interrupted()
	_, err = addons.Update(ctx, c, client.ObjectKey{Namespace: ns, Name: "db"}, func(*capstanv1.Addon) error { return nil }, map[string]string{"db.password": "hunter2"})
	if err == nil {
		t.Fatal("an edit interrupted before the Addon was sent succeeded")
	}
	if left := valuesSecrets(t, admin, ns, "db"); len(left) > 0 {
		t.Errorf("an interrupted edit left the Secrets %v", left)
	}
}

// TestRotatedSecretInputsLeaveNoOldSecret: a secret input given again goes
// into a new Secret; the old one is deleted once no valuesFrom entry names
// it, so an old password does not stay in the namespace. A Secret that
// another secret input still reads is kept.
func TestRotatedSecretInputsLeaveNoOldSecret(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if out, err := capstan(t, cluster, "addon", "add", "web", "-n", ns, "--chart-url", "https://charts.invalid/web-1.0.0.tgz",
		"--secret-input", "db.password=@"+file("pw1", "one"), "--secret-input", "api.key=@"+file("key1", "k1")); err != nil {
		t.Fatalf("add: %v\n%s", err, out)
	}
	first := valuesSecrets(t, c, ns, "web")
	if len(first) != 1 {
		t.Fatalf("after add, the values Secrets are %v; want one", first)
	}
	if out, err := capstan(t, cluster, "addon", "edit", "web", "-n", ns, "--secret-input", "db.password=@"+file("pw2", "two")); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	if got := valuesSecrets(t, c, ns, "web"); len(got) != 2 {
		t.Fatalf("after a new db.password, the values Secrets are %v; want the first kept, since api.key reads it, and a new one", got)
	}
	if out, err := capstan(t, cluster, "addon", "edit", "web", "-n", ns, "--secret-input", "api.key=@"+file("key2", "k2")); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	got := valuesSecrets(t, c, ns, "web")
	if len(got) != 2 || strings.Contains(strings.Join(got, ","), first[0]) {
		t.Errorf("after a new api.key, the values Secrets are %v; want the first (%s), which nothing names, deleted", got, first[0])
	}
	named := map[string]bool{}
	for _, r := range getAddon(t, c, ns, "web").Spec.ValuesFrom {
		named[r.Name] = true
	}
	for _, s := range got {
		if !named[s] {
			t.Errorf("Secret %s is left, and the Addon does not name it", s)
		}
	}
}
