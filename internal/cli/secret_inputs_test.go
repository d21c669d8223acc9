package cli

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
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
	// A key of several lines is stored byte for byte, its last newline
	// too; a file of one line loses its line ending.
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
	if out, err := capstan(t, cluster, "addon", "add", "git", "-n", ns, "--chart-url", "https://charts.invalid/git-1.0.0.tgz",
		"--secret-input", "ssh.privateKey=@"+file("id_ed25519", key), "--secret-input", "ssh.password=@"+file("pw3", "pw\r\n")); err != nil {
		t.Fatalf("add: %v\n%s", err, out)
	}
	secrets := valuesSecrets(t, c, ns, "git")
	if len(secrets) != 1 {
		t.Fatalf("after add, the values Secrets are %v; want one", secrets)
	}
	var secret corev1.Secret
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: secrets[0]}, &secret); err != nil {
		t.Fatal(err)
	}
	if got := string(secret.Data["ssh.privateKey"]); got != key {
		t.Errorf("the stored key is %q; want the file byte for byte, %q", got, key)
	}
	if got := string(secret.Data["ssh.password"]); got != "pw" {
		t.Errorf("the stored password is %q; want pw, without the line ending", got)
	}
}

// writeOnlyChart is a chart whose schema marks auth.password, and the
// password of each item of users, writeOnly: secret inputs.
var writeOnlyChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: blog\nversion: 1.0.0\n",
	"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer"},` +
		`"auth":{"type":"object","properties":{"password":{"type":"string","writeOnly":true}}},` +
		`"users":{"type":"array","items":{"type":"object","properties":{"password":{"type":"string","writeOnly":true}}}},` +
		`"ports":{"type":"object","additionalProperties":{"type":"string","writeOnly":true}},` +
		`"apiKeys":{"type":"array","items":{"type":"string","writeOnly":true}},` +
		`"creds":{"type":"object","writeOnly":true,"properties":{"accessKey":{"type":"string"}}},` +
		`"pins":{"type":"object","additionalProperties":{"type":"string","writeOnly":true}}}}`,
	"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blog\n",
}

// TestValuesFlagsRefuseSecretInputs: a value the chart's schema marks
// writeOnly, given with --set or -f, would be stored in spec.values, where
// anyone who may view the Addon reads it, before the controller Blocks
// it: add and edit refuse it before anything is written, naming
// --secret-input, which takes it.
func TestValuesFlagsRefuseSecretInputs(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	chartURL, fetch := servedChart(t, "blog", writeOnlyChart)
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte("auth:\n  password: hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	add := append([]string{"addon", "add", "blog", "-n", ns, "--chart-url", chartURL}, fetch...)

	// A path given both by --set or -f and by --secret-input is refused by
	// add, as by edit, even where the chart does not mark it writeOnly:
	// the --set value would stay readable in spec.values.
	tokenValues := filepath.Join(dir, "token.yaml")
	if err := os.WriteFile(tokenValues, []byte("auth:\n  token: hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	twice := append([]string{"addon", "add", "twice", "-n", ns, "--chart-url", chartURL, "--secret-input", "auth.token=@" + pw}, fetch...)
	for _, given := range [][]string{{"--set", "auth.token=hunter2"}, {"-f", tokenValues}} {
		out, err := capstan(t, cluster, append(twice, given...)...)
		if err == nil || !strings.Contains(err.Error(), "auth.token is given both by -f or --set and by --secret-input") || strings.Contains(err.Error()+out, "hunter2") {
			t.Errorf("add %v --secret-input auth.token: %v; want it refused as given twice\n%s", given, err, out)
		}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "twice"}, &capstanv1.Addon{}); err == nil {
			t.Fatalf("add %v --secret-input auth.token created the Addon", given)
		}
		if left := valuesSecrets(t, c, ns, "twice"); len(left) > 0 {
			t.Errorf("add %v --secret-input auth.token left the Secrets %v", given, left)
		}
	}

	// NOTE: a map's key made of digits (a port) is named as a key,
	// ports.8080, which --secret-input takes back to the same place.
	for _, given := range [][]string{{"--set", "auth.password=hunter2"}, {"-f", values}, {"--set", "users[0].password=hunter2"}, {"--set", "ports.8080=hunter2"}} {
		want := "password=@FILE"
		if given[1] == "ports.8080=hunter2" {
			want = "--secret-input ports.8080=@FILE"
		}
		out, err := capstan(t, cluster, append(add, given...)...)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error()+out, "hunter2") {
			t.Errorf("add %v: %v; want it refused, naming %s\n%s", given, err, want, out)
		}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "blog"}, &capstanv1.Addon{}); err == nil {
			t.Fatalf("add %v created the Addon", given)
		}
		if left := valuesSecrets(t, c, ns, "blog"); len(left) > 0 {
			t.Errorf("add %v left the Secrets %v", given, left)
		}
	}

	// An object or a list, and a path with an empty key, cannot be given
	// with --secret-input (one string, at a targetPath): they are told to
	// go in a Secret that valuesFrom merges whole.
	emptyKey := filepath.Join(dir, "pins.yaml")
	if err := os.WriteFile(emptyKey, []byte("pins:\n  \"\": hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		given []string
		want  string
	}{
		{[]string{"--set", "creds.accessKey=hunter2"}, "creds is an object or a list, which a secret field or a secret input cannot hold"},
		{[]string{"-f", emptyKey}, "/pins/ is a path with an empty key, which no targetPath, and so no secret input, can name"},
	} {
		out, err := capstan(t, cluster, append(add, tc.given...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "name that Secret in the add-on's valuesFrom with no targetPath") ||
			strings.Contains(err.Error(), "--secret-input") || strings.Count(err.Error(), "empty key") > 1 || strings.Contains(err.Error()+out, "hunter2") {
			t.Errorf("add %v: %v; want it refused, saying %q and a Secret in valuesFrom, once, with no --secret-input\n%s", tc.given, err, tc.want, out)
		}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "blog"}, &capstanv1.Addon{}); err == nil {
			t.Fatalf("add %v created the Addon", tc.given)
		}
	}

	if out, err := capstan(t, cluster, append(add, "--set", "replicas=2", "--secret-input", "auth.password=@"+pw)...); err != nil {
		t.Fatalf("add with --secret-input: %v\n%s", err, out)
	}
	before := getAddon(t, c, ns, "blog")
	out, err := capstan(t, cluster, append([]string{"addon", "edit", "blog", "-n", ns, "--set", "auth.password=hunter3"}, fetch...)...)
	if err == nil || !strings.Contains(err.Error(), "--secret-input auth.password=@FILE") {
		t.Errorf("edit --set auth.password: %v; want it refused, naming --secret-input\n%s", err, out)
	}
	if after := getAddon(t, c, ns, "blog"); after.Generation != before.Generation || len(valuesSecrets(t, c, ns, "blog")) != 1 {
		t.Errorf("a refused edit changed the Addon (generation %d to %d) or its Secrets (%v)", before.Generation, after.Generation, valuesSecrets(t, c, ns, "blog"))
	}
}

// TestReplacedSecretInputsAnotherAddonReadsAreKept: the Secret of secret
// inputs an edit replaces is kept while another Addon of the namespace
// names it, in valuesFrom or substituteFrom (the cluster profile lets any
// Addon read any Secret of its namespace), while the Addon is git-managed
// (git's definition may name it), and when a person made it (it has no
// mark of a writer of secret inputs). What is kept, or could not be
// deleted, is said.
func TestReplacedSecretInputsAnotherAddonReadsAreKept(t *testing.T) {
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
	exists := func(name string) bool {
		t.Helper()
		err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	dbSecret := func() string {
		t.Helper()
		for _, r := range getAddon(t, c, ns, "db").Spec.ValuesFrom {
			if r.TargetPath == "db.password" {
				return r.Name
			}
		}
		t.Fatal("db has no valuesFrom entry for db.password")
		return ""
	}
	if out, err := capstan(t, cluster, "addon", "add", "db", "-n", ns, "--chart-url", "https://charts.invalid/db-1.0.0.tgz",
		"--secret-input", "db.password=@"+file("pw1", "one")); err != nil {
		t.Fatalf("add: %v\n%s", err, out)
	}
	first := dbSecret()
	newAddon(t, c, ns, "app", func(a *capstanv1.Addon) {
		a.Spec.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: first, ValuesKey: "db.password", TargetPath: "db.password"}}
	})
	if out, err := capstan(t, cluster, "addon", "edit", "db", "-n", ns, "--secret-input", "db.password=@"+file("pw2", "two")); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	if !exists(first) {
		t.Errorf("the Secret %s that Addon app reads in its valuesFrom was deleted by an edit of db", first)
	}

	second := dbSecret()
	newAddon(t, c, ns, "site", func(a *capstanv1.Addon) {
		a.Spec.Chart = nil
		a.Spec.Git = &capstanv1.GitSource{URL: "https://git.invalid/site.git"}
		a.Spec.SubstituteFrom = []capstanv1.SubstituteReference{{Kind: "Secret", Name: second}}
	})
	if out, err := capstan(t, cluster, "addon", "edit", "db", "-n", ns, "--secret-input", "db.password=@"+file("pw3", "three")); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	if !exists(second) {
		t.Errorf("the Secret %s that Addon site reads in its substituteFrom was deleted by an edit of db", second)
	}

	// Nothing else names the third: it goes, as before.
	third := dbSecret()
	if out, err := capstan(t, cluster, "addon", "edit", "db", "-n", ns, "--secret-input", "db.password=@"+file("pw4", "four")); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	if exists(third) {
		t.Errorf("the Secret %s, which no Addon names, was kept", third)
	}

	// A git-managed Addon keeps it, and says so.
	var warnings []string
	ctx := addons.WithWarn(t.Context(), func(msg string) { warnings = append(warnings, msg) })
	gitKey := client.ObjectKey{Namespace: ns, Name: "gm"}
	if _, err := addons.Add(t.Context(), c, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gm", Labels: map[string]string{gitops.ManagedByGitLabel: "repo"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://charts.invalid/gm-1.0.0.tgz"}}}, map[string]string{"db.password": "one"}); err != nil {
		t.Fatal(err)
	}
	gitFirst := getAddon(t, c, ns, "gm").Spec.ValuesFrom[0].Name
	if _, err := addons.Update(ctx, c, gitKey, func(*capstanv1.Addon) error { return nil }, map[string]string{"db.password": "two"}); err != nil {
		t.Fatal(err)
	}
	if !exists(gitFirst) {
		t.Errorf("the Secret %s of a git-managed Addon, which git's definition may name, was deleted", gitFirst)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], gitFirst) || !strings.Contains(warnings[0], "git") {
		t.Errorf("the warnings of a git-managed Addon's edit are %q; want one that names %s and git", warnings, gitFirst)
	}

	// A Secret of the shape of one, made by a person, is kept.
	immutable := true
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-values-db",
		Labels: map[string]string{capstanv1.AddonLabel: "web", capstanv1.AddonNamespaceLabel: ns}},
		Immutable: &immutable, StringData: map[string]string{"db.password": "mine"}}
	if err := c.Create(t.Context(), own); err != nil {
		t.Fatal(err)
	}
	newAddon(t, c, ns, "web", func(a *capstanv1.Addon) {
		a.Spec.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: own.Name, ValuesKey: "db.password", TargetPath: "db.password"}}
	})
	if _, err := addons.Update(t.Context(), c, client.ObjectKey{Namespace: ns, Name: "web"}, func(*capstanv1.Addon) error { return nil }, map[string]string{"db.password": "new"}); err != nil {
		t.Fatal(err)
	}
	if !exists(own.Name) {
		t.Errorf("the Secret %s that a person made was deleted", own.Name)
	}

	// A delete that is refused is said, and the edit stands.
	warnings = nil
	refusing := interceptor.NewClient(newWithWatch(t, cluster), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return apierrors.NewForbidden(corev1.Resource("secrets"), obj.GetName(), errors.New("no delete"))
		},
	})
	fourth := dbSecret()
	if _, err := addons.Update(ctx, refusing, client.ObjectKey{Namespace: ns, Name: "db"}, func(*capstanv1.Addon) error { return nil }, map[string]string{"db.password": "five"}); err != nil {
		t.Fatal(err)
	}
	if dbSecret() == fourth {
		t.Error("the edit whose cleanup was refused was not written")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], fourth) || !strings.Contains(strings.ToLower(warnings[0]), "forbidden") {
		t.Errorf("the warnings of a refused cleanup are %q; want one that names %s and the refusal", warnings, fourth)
	}
}

func newWithWatch(t *testing.T, cluster *testcluster.Cluster) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEditValuesSurviveAStatusWriteDuringTheChartFetch: edit -f/--set
// fetches the chart to check the values before it reads the Addon whose
// resourceVersion its write tests, so a status write of the controller
// while the chart is fetched does not refuse the edit.
func TestEditValuesSurviveAStatusWriteDuringTheChartFetch(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	archive, err := testcontroller.ChartArchive("blog", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: blog\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer"}}}`,
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blog\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int32
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		// The controller writes the status while the chart is fetched.
		a := &capstanv1.Addon{}
		if err := c.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: "blog"}, a); err == nil {
			before := a.DeepCopy()
			a.Status.ObservedGeneration++
			if err := c.Status().Patch(r.Context(), a, client.MergeFrom(before)); err != nil {
				t.Errorf("status write: %v", err)
			}
		}
		_, _ = w.Write(archive)
	}))
	t.Cleanup(server.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) { a.Spec.Chart.URL = server.URL + "/blog-1.0.0.tgz" })
	out, err := capstan(t, cluster, "addon", "edit", "blog", "-n", ns, "--set", "replicas=3", "--fetch-allow", "127.0.0.1/32", "--ca-file", caFile)
	if err != nil {
		t.Fatalf("edit --set, with a status write during the chart's fetch: %v\n%s", err, out)
	}
	if got := getAddon(t, c, ns, "blog").Spec.Values; got == nil || string(got.Raw) != `{"replicas":3}` {
		t.Errorf("spec.values is %v; want replicas 3", got)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("the chart was fetched %d times; want once", n)
	}
}

// TestEditWithAWriteOnlyValueHeldAlready: a writeOnly value that
// spec.values holds already (written by kubectl, or made writeOnly by a
// new chart version) does not refuse an edit of other values: it is said,
// with the flag that moves it, and --secret-input of its path takes it
// out of spec.values. A writeOnly value the flags set is still refused.
func TestEditWithAWriteOnlyValueHeldAlready(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	chartURL, fetch := servedChart(t, "blog", writeOnlyChart)
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("hunter3"), 0o600); err != nil {
		t.Fatal(err)
	}
	newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) {
		a.Spec.Chart.URL = chartURL
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1,"auth":{"password":"hunter2"}}`)}
	})
	edit := append([]string{"addon", "edit", "blog", "-n", ns}, fetch...)

	out, err := capstan(t, cluster, append(edit, "--set", "replicas=3")...)
	if err != nil {
		t.Fatalf("edit --set replicas=3 of an Addon whose spec.values holds a writeOnly value: %v; want it written\n%s", err, out)
	}
	if !strings.Contains(out, "auth.password") || !strings.Contains(out, "--secret-input auth.password=@FILE") || strings.Contains(out, "hunter2") {
		t.Errorf("the edit's output is %q; want a warning that names auth.password and --secret-input auth.password=@FILE, and no value", out)
	}
	if got := string(getAddon(t, c, ns, "blog").Spec.Values.Raw); got != `{"auth":{"password":"hunter2"},"replicas":3}` {
		t.Errorf("spec.values is %s; want replicas 3", got)
	}

	if out, err := capstan(t, cluster, append(edit, "--set", "auth.password=hunter4")...); err == nil || !strings.Contains(err.Error(), "--secret-input auth.password=@FILE") {
		t.Errorf("edit --set auth.password: %v; want it refused, naming --secret-input\n%s", err, out)
	}

	if out, err := capstan(t, cluster, append(edit, "--set", "replicas=4", "--secret-input", "auth.password=@"+pw)...); err != nil {
		t.Fatalf("edit --set replicas=4 --secret-input auth.password: %v\n%s", err, out)
	}
	a := getAddon(t, c, ns, "blog")
	if got := string(a.Spec.Values.Raw); got != `{"auth":{},"replicas":4}` {
		t.Errorf("spec.values is %s; want auth.password taken out, as a secret input holds it now", got)
	}
	if len(a.Spec.ValuesFrom) != 1 || a.Spec.ValuesFrom[0].TargetPath != "auth.password" {
		t.Errorf("spec.valuesFrom is %v; want the secret input of auth.password", a.Spec.ValuesFrom)
	}
}

// TestEditWithAWriteOnlyObjectHeldAlready: a writeOnly object, and a
// writeOnly value at a path with an empty key, that spec.values holds
// already are said with how to give them (a Secret that valuesFrom
// merges whole), not with --secret-input, and with that they must still
// be taken out of spec.values: naming a Secret does not remove them.
func TestEditWithAWriteOnlyObjectHeldAlready(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	chartURL, fetch := servedChart(t, "blog", writeOnlyChart)
	newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) {
		a.Spec.Chart.URL = chartURL
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1,"creds":{"accessKey":"hunter2"},"pins":{"":"hunter2"}}`)}
	})
	out, err := capstan(t, cluster, append([]string{"addon", "edit", "blog", "-n", ns, "--set", "replicas=3"}, fetch...)...)
	if err != nil {
		t.Fatalf("edit --set replicas=3: %v; want it written\n%s", err, out)
	}
	for _, want := range []string{
		"creds is an object or a list", "/pins/ is a path with an empty key",
		"name that Secret in the add-on's valuesFrom with no targetPath", "take it out of spec.values yourself",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the edit's output is %q; want it to say %q", out, want)
		}
	}
	if strings.Contains(out, "--secret-input") || strings.Contains(out, "which takes it out of spec.values") || strings.Contains(out, "hunter2") {
		t.Errorf("the edit's output is %q; want no --secret-input, no claim that a Secret takes the values out of spec.values, and no value", out)
	}
}

// TestValuesFlagsRefuseSecretInputsPastTheSecretBound: a chart whose
// defaults hold more secret values than Capstan hides (a writeOnly list of
// 5000) is Blocked by the controller, but a writeOnly value given with
// --set is still refused before anything is written, and what the
// controller will Block for is said as it is.
func TestValuesFlagsRefuseSecretInputsPastTheSecretBound(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	var junk strings.Builder
	junk.WriteString("junk:\n")
	for i := range 5000 {
		fmt.Fprintf(&junk, "  - junk-value-%05d\n", i)
	}
	files := maps.Clone(writeOnlyChart)
	files["values.schema.json"] = strings.Replace(files["values.schema.json"], `"properties":{"replicas"`, `"properties":{"junk":{"writeOnly":true},"replicas"`, 1)
	files["values.yaml"] = junk.String()
	chartURL, fetch := servedChart(t, "blog", files)
	add := append([]string{"addon", "add", "blog", "-n", ns, "--chart-url", chartURL}, fetch...)
	out, err := capstan(t, cluster, append(add, "--set", "auth.password=hunter2")...)
	if err == nil || !strings.Contains(err.Error(), "--secret-input auth.password=@FILE") || strings.Contains(err.Error()+out, "hunter2") {
		t.Errorf("add --set auth.password past the bound: %v; want it refused, naming --secret-input\n%s", err, out)
	}
	if strings.Contains(out, "could not be read") || !strings.Contains(out, "the controller will Block the Addon for its values") || !strings.Contains(out, "/junk holds 5000 of them") {
		t.Errorf("add past the bound should say why the controller will Block it:\n%s", out)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "blog"}, &capstanv1.Addon{}); err == nil {
		t.Error("add --set auth.password past the bound created the Addon")
	}
}

// TestEditSecretInputTakesAListElementOut: --secret-input of an element of
// a writeOnly list that spec.values holds takes that element out of
// spec.values, as the warning that names the flag says: the element is
// set to null, so the others keep their indexes, and a list left with
// nulls only goes whole. No key stays readable in spec.values.
func TestEditSecretInputTakesAListElementOut(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	chartURL, fetch := servedChart(t, "blog", writeOnlyChart)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) {
		a.Spec.Chart.URL = chartURL
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1,"apiKeys":["key-one","key-two"]}`)}
	})
	edit := append([]string{"addon", "edit", "blog", "-n", ns}, fetch...)

	out, err := capstan(t, cluster, append(edit, "--set", "replicas=2")...)
	if err != nil || !strings.Contains(out, "--secret-input apiKeys[0]=@FILE") {
		t.Fatalf("edit --set replicas=2: %v; want a warning naming --secret-input apiKeys[0]=@FILE\n%s", err, out)
	}
	if out, err := capstan(t, cluster, append(edit, "--secret-input", "apiKeys[0]="+"@"+file("k1", "new-one"))...); err != nil {
		t.Fatalf("edit --secret-input apiKeys[0]: %v\n%s", err, out)
	}
	if got := string(getAddon(t, c, ns, "blog").Spec.Values.Raw); got != `{"apiKeys":[null,"key-two"],"replicas":2}` {
		t.Errorf("spec.values is %s; want apiKeys[0] taken out, the other key at its index", got)
	}
	if out, err := capstan(t, cluster, append(edit, "--secret-input", "apiKeys[1]="+"@"+file("k2", "new-two"))...); err != nil {
		t.Fatalf("edit --secret-input apiKeys[1]: %v\n%s", err, out)
	}
	a := getAddon(t, c, ns, "blog")
	if got := string(a.Spec.Values.Raw); got != `{"replicas":2}` {
		t.Errorf("spec.values is %s; want the list of keys taken out whole", got)
	}
	var paths []string
	for _, r := range a.Spec.ValuesFrom {
		paths = append(paths, r.TargetPath)
	}
	if slices.Sort(paths); !slices.Equal(paths, []string{"apiKeys[0]", "apiKeys[1]"}) {
		t.Errorf("spec.valuesFrom names %q; want the secret inputs apiKeys[0] and apiKeys[1]", paths)
	}

	// Both at once take the list out whole too.
	newAddon(t, c, ns, "site", func(a *capstanv1.Addon) {
		a.Spec.Chart.URL = chartURL
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"apiKeys":["key-one","key-two"]}`)}
	})
	if out, err := capstan(t, cluster, "addon", "edit", "site", "-n", ns, "--secret-input", "apiKeys[0]=@"+file("k3", "a"), "--secret-input", "apiKeys[1]=@"+file("k4", "b")); err != nil {
		t.Fatalf("edit site: %v\n%s", err, out)
	}
	if v := getAddon(t, c, ns, "site").Spec.Values; v != nil {
		t.Errorf("spec.values of site is %s; want none", v.Raw)
	}
}

// TestUnknownSecretInputsAreWarnedOf: a --secret-input at a path the
// chart's schema neither marks writeOnly nor defines, a misspelt name,
// would be stored and never read, the chart rendering its default
// instead: add and edit go on, and say so on stderr, naming the nearest
// path the schema marks writeOnly. The right path is not warned of.
func TestUnknownSecretInputsAreWarnedOf(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	chartURL, fetch := servedChart(t, "blog", writeOnlyChart)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := capstan(t, cluster, append([]string{"addon", "add", "blog", "-n", ns, "--chart-url", chartURL, "--secret-input", "auth.pasword=@" + pw}, fetch...)...)
	if err != nil {
		t.Fatalf("add with a misspelt --secret-input: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Warning: addon "+ns+"/blog: secret input auth.pasword: the chart's schema neither marks this path writeOnly nor defines it") ||
		!strings.Contains(out, "did you mean auth.password?") || strings.Contains(out, "hunter2") {
		t.Errorf("add with --secret-input auth.pasword should warn of it, naming auth.password, and not the value:\n%s", out)
	}
	out, err = capstan(t, cluster, append([]string{"addon", "edit", "blog", "-n", ns, "--secret-input", "auth.password=@" + pw}, fetch...)...)
	if err != nil {
		t.Fatalf("edit with --secret-input auth.password: %v\n%s", err, out)
	}
	if strings.Contains(out, "Warning") {
		t.Errorf("edit with --secret-input auth.password, which the schema marks writeOnly, warned:\n%s", out)
	}
}

// TestSecretInputChecksDownloadTheChartOnce: add and edit with values and
// --secret-input check the values for secret inputs and warn of unknown
// secret inputs with one fetcher, whose cache serves the second: the
// chart is downloaded once a command, not once a check, and its schema
// compiled once, the warning taking the one the check compiled.
func TestSecretInputChecksDownloadTheChartOnce(t *testing.T) {
	var checks []*addons.ChartCheck
	defer func(orig func(addons.ChartFetch) *addons.ChartCheck) { newChartCheck = orig }(newChartCheck)
	newChartCheck = func(fetch addons.ChartFetch) *addons.ChartCheck {
		c := addons.NewChartCheck(fetch)
		checks = append(checks, c)
		return c
	}
	compiles := func() int {
		n := 0
		for _, c := range checks {
			n += c.Compiles()
		}
		checks = nil
		return n
	}
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	archive, err := testcontroller.ChartArchive("blog", writeOnlyChart)
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int32
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		_, _ = w.Write(archive)
	}))
	t.Cleanup(server.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	fetch := []string{"--fetch-allow", "127.0.0.1/32", "--ca-file", caFile}
	out, err := capstan(t, cluster, append([]string{"addon", "add", "blog", "-n", ns, "--chart-url", server.URL + "/blog-1.0.0.tgz",
		"--set", "replicas=2", "--secret-input", "auth.pasword=@" + pw}, fetch...)...)
	if err != nil {
		t.Fatalf("add --set with --secret-input: %v\n%s", err, out)
	}
	if !strings.Contains(out, "did you mean auth.password?") {
		t.Errorf("add with --secret-input auth.pasword should warn of it:\n%s", out)
	}
	if n := fetches.Swap(0); n != 1 {
		t.Errorf("add downloaded the chart %d times; want once", n)
	}
	if n := compiles(); n != 1 {
		t.Errorf("add compiled the chart's schema %d times; want once", n)
	}
	out, err = capstan(t, cluster, append([]string{"addon", "edit", "blog", "-n", ns, "--set", "replicas=3", "--secret-input", "auth.pasword=@" + pw}, fetch...)...)
	if err != nil {
		t.Fatalf("edit --set with --secret-input: %v\n%s", err, out)
	}
	if !strings.Contains(out, "did you mean auth.password?") {
		t.Errorf("edit with --secret-input auth.pasword should warn of it:\n%s", out)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("edit downloaded the chart %d times; want once", n)
	}
	if n := compiles(); n != 1 {
		t.Errorf("edit compiled the chart's schema %d times; want once", n)
	}
}
