package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/catalog"
	"capstan.dev/capstan/internal/install"
)

// TestCatalogTargetsTheEntrysNamespace adds Longhorn from the catalog,
// with no gitops repository, in a trusted namespace and in a restricted
// one. In the trusted one its objects go to the entry's namespace,
// created when missing, as a committed definition's do, not next to
// whatever else the Addon's namespace holds; in the restricted one they
// stay in the Addon's namespace, the only one its profile allows.
func TestCatalogTargetsTheEntrysNamespace(t *testing.T) {
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trustedNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns, user, target string
		create           bool
	}{
		{ns: trustedNamespace, user: "catalog-cluster", target: "longhorn-system", create: true},
		{ns: namespace(t), user: "catalog-restricted"},
	} {
		token := user(t, tc.ns, tc.user, addonRule("get", "list", "create", "update", "patch"))
		name := tc.user + "-longhorn"
		t.Cleanup(func() {
			_ = admin.Delete(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: name}})
		})
		resp := signInAt(t, api.URL, token).do(t, http.MethodPost, "/catalog/longhorn", url.Values{"namespace": {tc.ns}, "name": {name}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("adding Longhorn in %s: %d", tc.ns, resp.StatusCode)
		}
		a := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: name}, a); err != nil {
			t.Fatalf("the catalog form did not create the Addon in %s: %v", tc.ns, err)
		}
		if a.Spec.TargetNamespace != tc.target || a.Spec.CreateNamespace != tc.create {
			t.Errorf("Longhorn added in %s sends its objects to %q (createNamespace %v); want %q (%v)",
				tc.ns, a.Spec.TargetNamespace, a.Spec.CreateNamespace, tc.target, tc.create)
		}
	}
}

// TestCatalogRefusesSecretInputsInItsYAML adds an operator's catalog
// entry, whose chart is served on loopback and whose schema marks
// auth.password writeOnly, with no gitops repository. The catalog's form
// has no secret fields, and its YAML would write the secret into
// spec.values, readable by anyone who may view the Addon: the add is
// refused with the form shown again, naming the path, and nothing is
// created. The same entry without the secret is added.
func TestCatalogRefusesSecretInputsInItsYAML(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	entry := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-" + ns, Labels: map[string]string{catalog.Label: "true"}},
		Data: map[string]string{catalog.EntryKey: "id: secret-" + ns + "\ntitle: Form\nchart: {url: '" + chartServer.URL + "/form-1.0.0.tgz'}\n" +
			"fields: [{path: greeting, label: Greeting, type: string}]\n"},
	}
	if err := admin.Create(ctx, entry); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, entry) })
	// A server of its own reads the catalog now, not the tests' server's
	// catalog of up to 10 s ago.
	base := serve(t, newServer())
	sess := signInAt(t, base, user(t, ns, "catalog-editor", addonRule("get", "list", "create", "update", "patch")))
	path := "/catalog/secret-" + ns
	key := client.ObjectKey{Namespace: ns, Name: "form"}

	code, page := sess.send(t, http.MethodPost, path, url.Values{"namespace": {ns}, "name": {key.Name}, "v.greeting": {"hi"},
		"yaml": {"auth:\n  password: hunter2\n"}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(page, "auth.password") || !strings.Contains(page, "writeOnly") ||
		!strings.Contains(page, "nothing was created") {
		t.Fatalf("adding from the catalog with a secret in the YAML: %d; want 422, naming auth.password and saying nothing was created\n%s", code, page)
	}
	if !strings.Contains(page, "hunter2") {
		t.Errorf("the refused form lost its YAML; want it shown again to be fixed\n%s", page)
	}
	if err := admin.Get(ctx, key, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the refused add, the Addon: %v; want none", err)
	}

	code, page = sess.send(t, http.MethodPost, path, url.Values{"namespace": {ns}, "name": {key.Name}, "v.greeting": {"hi"},
		"yaml": {"replicas: 2\n"}})
	if code != http.StatusSeeOther {
		t.Fatalf("adding from the catalog without a secret: %d; want it added\n%s", code, page)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"greeting": "hi", "replicas": float64(2)}) {
		t.Errorf("the added Addon's values: %v", got)
	}
}

// TestCatalogFormWaitsWhenTheCheckCannotFetch: while the user's one
// page-fetch turn is taken, the catalog's form cannot fetch the chart to
// check its YAML for secret inputs, and adds nothing unchecked: the form
// is shown again, 429, saying to try again, and no Addon is created.
func TestCatalogFormWaitsWhenTheCheckCannotFetch(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	entry := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-" + ns, Labels: map[string]string{catalog.Label: "true"}},
		Data: map[string]string{catalog.EntryKey: "id: busy-" + ns + "\ntitle: Form\nchart: {url: '" + chartServer.URL + "/form-1.0.0.tgz?busy=" + ns + "'}\n" +
			"fields: [{path: greeting, label: Greeting, type: string}]\n"},
	}
	if err := admin.Create(ctx, entry); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, entry) })
	slow := newSlowCharts(t)
	srv := newServer()
	srv.MaxPageFetches = 2
	base := serve(t, srv)
	token := user(t, ns, "catalog-editor", addonRule("get", "list", "create", "update", "patch"))
	sess := signInAt(t, base, token)
	held := make(chan int, 1)
	go func() {
		code, _, _ := pageGet(t, base, token, "/new?"+url.Values{"chart": {slow.URL + "/slow-1.0.0.tgz?busy=" + ns}, "namespace": {ns}, "name": {"slow"}}.Encode())
		held <- code
	}()
	<-slow.asked
	defer func() { slow.release(); <-held }()

	code, page := sess.send(t, http.MethodPost, "/catalog/busy-"+ns, url.Values{"namespace": {ns}, "name": {"form"}, "v.greeting": {"hi"},
		"yaml": {"auth:\n  password: hunter2\n"}})
	if code != http.StatusTooManyRequests || !strings.Contains(page, "try again") || !strings.Contains(page, "nothing was written") {
		t.Errorf("adding from the catalog while the user's page-fetch turn is taken: %d; want 429, saying to try again and that nothing was written\n%.2000s", code, page)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "form"}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the busy add, the Addon: %v; want none", err)
	}
}

// TestCatalogRefusesAGitFolderWithFields: an operator's git-folder entry
// with fields is listed as a problem, saying where a folder's variables
// come from, and is not offered: its form builds no values, and would drop
// what was typed in the fields. Posting its form adds nothing.
func TestCatalogRefusesAGitFolderWithFields(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	id := "folder-" + ns
	entry := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-" + ns, Labels: map[string]string{catalog.Label: "true"}},
		Data: map[string]string{catalog.EntryKey: "id: " + id + "\ntitle: Apps\nkind: git-folder\n" +
			"fields: [{path: replicas, label: Replicas, type: integer}]\n"},
	}
	if err := admin.Create(ctx, entry); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, entry) })
	// A server of its own reads the catalog now, not the tests' server's
	// catalog of up to 10 s ago.
	base := serve(t, newServer())
	sess := signInAt(t, base, user(t, ns, "catalog-folder", addonRule("get", "list", "create", "update", "patch")))

	code, page := sess.send(t, http.MethodGet, "/catalog", nil)
	if code != http.StatusOK || !strings.Contains(page, "ConfigMap <code>catalog-"+ns+"</code>: entry "+id+": a git-folder entry takes no fields") ||
		!strings.Contains(page, "spec.substitute") || strings.Contains(page, `href="/catalog/`+id+`"`) {
		t.Fatalf("the catalog: %d; want the git-folder entry with fields listed as a problem, naming spec.substitute, and not offered\n%s", code, page)
	}
	code, page = sess.send(t, http.MethodPost, "/catalog/"+id, url.Values{"namespace": {ns}, "name": {"apps"},
		"git": {"https://git.example/apps.git"}, "v.replicas": {"3"}})
	if code != http.StatusSeeOther {
		t.Fatalf("posting the refused entry's form: %d; want to be sent elsewhere\n%s", code, page)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "apps"}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Errorf("after posting the refused entry's form, the Addon: %v; want none", err)
	}
}
