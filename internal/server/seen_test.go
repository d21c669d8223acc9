package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestEditAndRemoveTiedToTheVersionRead: two clients read an Addon's
// spec; the first edit that names the generation it read is made, and the
// second, made to the same generation, is refused with 409 and changes
// nothing, where it silently undid the first. A removal that names the UID
// of an Addon deleted and created again since is refused, and the new
// Addon stays; a git-managed Addon is checked before any commit.
func TestEditAndRemoveTiedToTheVersionRead(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"},
			Values: jsonValues(`{"replicas":2}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(a)
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch", "delete"))
	path := "/api/v1/namespaces/" + ns + "/addons/demo"
	read := a.Generation

	code, body := call(t, editor, http.MethodPatch, path, map[string]any{"spec": map[string]any{"values": map[string]any{"replicas": 3}},
		"generation": read, "uid": string(a.UID)})
	expect(t, "the first edit of the generation read", code, body, http.StatusOK)
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"spec": map[string]any{"values": map[string]any{"replicas": 5}},
		"generation": read})
	expect(t, "a second edit of the same generation", code, body, http.StatusConflict)
	if !strings.Contains(string(body), "look at it again") {
		t.Errorf("the refusal of a stale edit %s does not say what to do", body)
	}
	if v := specValuesOf(t, key); v["replicas"] != float64(3) {
		t.Errorf("after a refused stale edit, spec.values is %v; want the first edit's replicas 3", v)
	}
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"spec": map[string]any{"values": map[string]any{"replicas": 4}},
		"generation": -1})
	expect(t, "an edit naming a negative generation", code, body, http.StatusBadRequest)
	if !strings.Contains(string(body), `"field":"generation"`) {
		t.Errorf("the refusal of a negative generation %s does not name the field", body)
	}

	// The Addon is deleted and created again under the same name.
	old := a.UID
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	a = &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"spec": map[string]any{"values": map[string]any{"replicas": 5}},
		"uid": string(old)})
	expect(t, "an edit of the Addon deleted since", code, body, http.StatusConflict)
	if v := specValuesOf(t, key); len(v) != 0 {
		t.Errorf("an edit of the old Addon changed the new one: spec.values %v", v)
	}
	code, body = call(t, editor, http.MethodDelete, path+"?uid="+string(old), nil)
	expect(t, "a removal of the Addon deleted since", code, body, http.StatusConflict)
	now := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, now); err != nil || now.UID != a.UID || now.DeletionTimestamp != nil {
		t.Fatalf("a removal of the old Addon touched the new one: %v, %+v", err, now.ObjectMeta)
	}
	if m := marks(t, key); len(m) > 0 {
		t.Errorf("a refused removal left the marks %v", m)
	}
	code, body = call(t, editor, http.MethodDelete, path+"?uid=", nil)
	expect(t, "a removal with an empty uid", code, body, http.StatusBadRequest)
	code, body = call(t, editor, http.MethodDelete, path+"?uid="+string(a.UID), nil)
	expect(t, "a removal of the Addon read", code, body, http.StatusNoContent)

	// A git-managed Addon: nothing is committed for a stale version.
	url := gitManagedLonghorn(t, ns)
	longhorn := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "longhorn"}, longhorn); err != nil {
		t.Fatal(err)
	}
	def, err := os.ReadFile(filepath.Join("..", "gitops", "testdata", "longhorn.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gitPath := "/api/v1/namespaces/" + ns + "/addons/longhorn"
	before := commits(t, url)
	code, body = call(t, editor, http.MethodPatch, gitPath, map[string]any{"definition": string(def) + "manualSync: true\n",
		"generation": longhorn.Generation + 1})
	expect(t, "a commit made to a generation the Addon is not at", code, body, http.StatusConflict)
	code, body = call(t, editor, http.MethodDelete, gitPath+"?uid=0b9e6a2c-2f4f-4d51-9b7c-1a2b3c4d5e6f", nil)
	expect(t, "a removal by commit of another Addon's UID", code, body, http.StatusConflict)
	if after := commits(t, url); after != before {
		t.Errorf("%d commits were made for stale changes", after-before)
	}
}
