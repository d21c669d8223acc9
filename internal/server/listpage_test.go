package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestListPageHidesRepositoryCredentials lists a namespace whose
// AddonRepository's URL holds a user and a token: the Add-ons page shows
// the repository's address without them, as every message does.
func TestListPageHidesRepositoryCredentials(t *testing.T) {
	ns := namespace(t)
	const token = "gh0-s3cret-t0ken"
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: "https://deploy:" + token + "@git.example/ops.git"}}
	if err := admin.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	viewer := user(t, ns, "viewer", addonRule("get", "list"), rbacPolicy("capstan.dev", "addonrepositories", "get", "list"))
	code, _, page := pageGet(t, api.URL, viewer, "/addons?namespace="+ns)
	if code != http.StatusOK || !strings.Contains(page, "Git repositories") {
		t.Fatalf("the list page: %d; want 200 with the repository", code)
	}
	if strings.Contains(page, token) || strings.Contains(page, "deploy:") {
		t.Errorf("the list page shows the repository's credentials")
	}
	if !strings.Contains(page, "https://git.example/ops.git") {
		t.Errorf("the list page does not show the repository's address")
	}
}
