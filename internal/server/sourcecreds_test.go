package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAddAndEditRefuseCredentialsInASource: a source address with a
// password or token in it would be stored in spec, where every reader of
// the Addon sees it. An add or edit that puts one in spec.chart.repo,
// .url, .oci or spec.git.url is 422 naming the field, without the
// password, and nothing is written: no Addon, no values Secret, no change.
func TestAddAndEditRefuseCredentialsInASource(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "create", "patch"), rbacPolicy("", "secrets", "create", "delete", "get", "list"))
	base := "/api/v1/namespaces/" + ns + "/addons"
	for _, tc := range []struct {
		name, field string
		spec        map[string]any
	}{
		{"repo", "spec.chart.repo", map[string]any{"chart": map[string]any{"repo": "https://user:s3cr3tTOKEN@charts.example.com/", "name": "a"}}},
		{"url", "spec.chart.url", map[string]any{"chart": map[string]any{"url": "https://user:s3cr3tTOKEN@charts.example.com/a-1.0.0.tgz"}}},
		{"token", "spec.chart.url", map[string]any{"chart": map[string]any{"url": "https://s3cr3tTOKEN@charts.example.com/a-1.0.0.tgz"}}},
		{"oci", "spec.chart.oci", map[string]any{"chart": map[string]any{"oci": "oci://user:s3cr3tTOKEN@registry.example.com/charts/a", "version": "1.0.0"}}},
		{"git", "spec.git.url", map[string]any{"git": map[string]any{"url": "https://user:s3cr3tTOKEN@git.example.com/r.git", "path": "x"}}},
		{"scp", "spec.git.url", map[string]any{"git": map[string]any{"url": "git:s3cr3tTOKEN@git.example.com:org/r.git", "path": "x"}}},
		{"ftp", "spec.chart.url", map[string]any{"chart": map[string]any{"url": "ftp://user:s3cr3tTOKEN@charts.example.com/a-1.0.0.tgz"}}},
	} {
		code, body := call(t, editor, http.MethodPost, base, map[string]any{"name": "creds-" + tc.name, "spec": tc.spec, "secretInputs": map[string]string{"auth.password": "pw"}})
		expect(t, "adding with credentials in "+tc.field, code, body, http.StatusUnprocessableEntity)
		var got struct{ Field, Message string }
		_ = json.Unmarshal(body, &got)
		if got.Field != tc.field || !strings.Contains(got.Message, "secretRef") || strings.Contains(string(body), "s3cr3tTOKEN") {
			t.Errorf("adding with credentials in %s: %s; want field %s, the way out through secretRef, and no password", tc.field, body, tc.field)
		}
		err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "creds-" + tc.name}, &capstanv1.Addon{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("adding with credentials in %s: the Addon was read back (%v)", tc.field, err)
		}
		if left := valuesSecrets(t, ns, "creds-"+tc.name); len(left) > 0 {
			t.Errorf("adding with credentials in %s left the values Secrets %v", tc.field, left)
		}
	}

	// The addresses that carry no secret are still taken: a user name
	// alone in a git URL (ssh's git@, Azure DevOps' org@) is none.
	for i, spec := range []map[string]any{
		{"chart": map[string]any{"repo": "https://charts.example.com/stable", "name": "a"}},
		{"chart": map[string]any{"url": "https://charts.example.com/a-1.0.0.tgz"}},
		{"chart": map[string]any{"oci": "oci://registry.example.com/charts/a", "version": "1.0.0"}},
		{"chart": map[string]any{"oci": "oci://registry.example.com/charts/a@sha256:" + strings.Repeat("a", 64), "digest": "sha256:" + strings.Repeat("a", 64)}},
		{"git": map[string]any{"url": "git@github.com:org/repo.git", "path": "x"}},
		{"git": map[string]any{"url": "ssh://git@github.com:22/org/repo.git", "path": "x"}},
		{"git": map[string]any{"url": "https://org@dev.azure.com/org/project/_git/repo", "path": "x"}},
	} {
		name := "plain-" + string(rune('a'+i))
		code, body := call(t, editor, http.MethodPost, base, map[string]any{"name": name, "spec": spec})
		expect(t, "adding "+name, code, body, http.StatusCreated)
	}

	code, body := call(t, editor, http.MethodPatch, base+"/plain-b", map[string]any{"spec": map[string]any{"chart": map[string]any{"url": "https://user:s3cr3tTOKEN@charts.example.com/a-1.0.0.tgz"}}})
	expect(t, "editing in credentials", code, body, http.StatusUnprocessableEntity)
	if strings.Contains(string(body), "s3cr3tTOKEN") || !strings.Contains(string(body), "spec.chart.url") {
		t.Errorf("editing in credentials: %s; want spec.chart.url named and no password", body)
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "plain-b"}, a); err != nil || a.Spec.Chart.URL != "https://charts.example.com/a-1.0.0.tgz" {
		t.Errorf("a refused edit changed the Addon: %v %+v", err, a.Spec.Chart)
	}
}
