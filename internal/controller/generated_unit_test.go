package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/prepare"
	"capstan.dev/capstan/internal/render"
)

func renderedSecret(namespace, name, cert string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"stringData": map[string]any{"tls.crt": cert}}}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestRenderedObjectMatchesThePlacedNamespace: a chart renders a Secret tls
// in another namespace, and then one with no namespace whose certificate
// it generates. The generated field is the second Secret's, put in the
// add-on's namespace: renderedObject must find that one, not the first
// Secret of that name, and nothing in another namespace.
func TestRenderedObjectMatchesThePlacedNamespace(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "capstan-system"}}
	namespaced := func(schema.GroupVersionKind) (bool, bool, error) { return true, true, nil }
	res := &render.Result{
		Objects: []*unstructured.Unstructured{renderedSecret("other", "tls", "fixed"), renderedSecret("", "tls", "random")},
		Generated: []render.Generated{{APIVersion: "v1", Kind: "Secret", Name: "tls",
			Paths: [][]string{{"stringData", "tls.crt"}}}},
	}
	prepared, err := prepare.Prepare(prepare.Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: res, Scope: namespaced})
	if err != nil {
		t.Fatal(err)
	}
	s := &scope{objects: prepared.Objects, generated: prepared.Generated}
	if len(s.generated) != 1 {
		t.Fatalf("generated %+v; want the one of the render", s.generated)
	}
	o := s.renderedObject(s.generated[0])
	if o == nil {
		t.Fatal("renderedObject found nothing; want the Secret tls of apps")
	}
	if cert, _, _ := unstructured.NestedString(o.Object, "stringData", "tls.crt"); cert != "random" || o.GetNamespace() != "apps" {
		t.Errorf("renderedObject found the Secret tls of %q whose certificate is %q; want the one of apps that the chart generates", o.GetNamespace(), cert)
	}
	if o := s.renderedObject(render.Generated{APIVersion: "v1", Kind: "Secret", Namespace: "elsewhere", Name: "tls"}); o != nil {
		t.Errorf("a Secret tls of namespace elsewhere matched %s/%s", o.GetNamespace(), o.GetName())
	}
}

// TestKeepSecretStringData: a generated stringData key of a core Secret
// is kept from the live data (the API server stores no stringData), and
// leaves stringData once it is empty; a key the live Secret lacks, and a
// Secret of another group, keep the render's value.
func TestKeepSecretStringData(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"password": "bGl2ZQ==", "user": "YXBw"}}}
	secret := func(apiVersion string, stringData map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"stringData": stringData}}
		u.SetAPIVersion(apiVersion)
		u.SetKind("Secret")
		u.SetName("db")
		return u
	}

	obj := secret("v1", map[string]any{"user": "app", "password": "new"})
	if !keepSecretStringData(obj, live, []string{"stringData", "password"}) {
		t.Fatal("stringData.password was not kept; want the live data.password")
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "data", "password"); v != "bGl2ZQ==" {
		t.Errorf("data.password = %q; want the live bGl2ZQ==", v)
	}
	if _, found, _ := unstructured.NestedString(obj.Object, "stringData", "password"); found {
		t.Error("stringData.password is still set; the API server would write it over the kept data.password")
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "stringData", "user"); v != "app" {
		t.Errorf("stringData.user = %q; want the render's app, untouched", v)
	}

	only := secret("v1", map[string]any{"password": "new"})
	if !keepSecretStringData(only, live, []string{"stringData", "password"}) {
		t.Fatal("stringData.password was not kept")
	}
	if _, found := only.Object["stringData"]; found {
		t.Errorf("an empty stringData is left: %v", only.Object)
	}

	added := secret("v1", map[string]any{"token": "new"})
	if keepSecretStringData(added, live, []string{"stringData", "token"}) {
		t.Error("a key the live Secret lacks was kept")
	}
	if v, _, _ := unstructured.NestedString(added.Object, "stringData", "token"); v != "new" {
		t.Errorf("stringData.token = %q; want the render's new", v)
	}

	other := secret("example.com/v1", map[string]any{"password": "new"})
	if keepSecretStringData(other, live, []string{"stringData", "password"}) {
		t.Error("a Secret of another group was taken for a core Secret")
	}
}
