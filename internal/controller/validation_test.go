package controller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// addressPassword is the password in every address of these tests that carries
// one: no refusal may quote it.
const addressPassword = "s3cr3t"

// TestAPIServerRefusesBadAddons checks the CRD's validation on the real API
// server: each bad Addon is refused with a message that names the field.
func TestAPIServerRefusesBadAddons(t *testing.T) {
	chart := &capstanv1.ChartSource{URL: "https://charts.example/web-1.0.0.tgz"}
	git := &capstanv1.GitSource{URL: "https://git.example/repo.git", Path: "web"}
	for _, tc := range []struct {
		name string
		spec capstanv1.AddonSpec
		want string
	}{
		{"two-sources", capstanv1.AddonSpec{Chart: chart, Git: git}, "exactly one source"},
		{"no-source", capstanv1.AddonSpec{}, "exactly one source"},
		{"bad-digest", capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chart.URL, Digest: "sha256:abc"}}, "spec.chart.digest"},
		{"two-chart-kinds", capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chart.URL, OCI: "oci://r.example/c", Version: "1"}}, "spec.chart"},
		{"escaping-path", capstanv1.AddonSpec{Git: &capstanv1.GitSource{URL: git.URL, Path: "../etc"}}, "spec.git.path"},
		{"bad-variable", capstanv1.AddonSpec{Git: git, Substitute: map[string]string{"cluster-name": "prod"}}, "spec.substitute: a variable's name"},
		{"long-variable", capstanv1.AddonSpec{Git: git, Substitute: map[string]string{"v": strings.Repeat("x", 4097)}}, "spec.substitute: a variable's value is at most 4096 characters"},
		{"registration-credentials", capstanv1.AddonSpec{Git: git, Registration: &capstanv1.RegistrationSource{URL: "https://admin:" + addressPassword + "@wiki.example/addon.json"}}, "spec.registration.url must not carry credentials"},
		{"registration-token", capstanv1.AddonSpec{Git: git, Registration: &capstanv1.RegistrationSource{URL: "http://token@wiki.example"}}, "spec.registration.url must not carry credentials"},
		{"bad-substitute-kind", capstanv1.AddonSpec{Git: git, SubstituteFrom: []capstanv1.SubstituteReference{{Kind: "Pod", Name: "x"}}}, "spec.substituteFrom[0].kind"},
		{"bad-values-name", capstanv1.AddonSpec{Chart: chart, ValuesFrom: []capstanv1.ValuesReference{{Kind: "Secret", Name: "Bad Name"}}}, "spec.valuesFrom[0].name"},
		{"bad-substitute-name", capstanv1.AddonSpec{Git: git, SubstituteFrom: []capstanv1.SubstituteReference{{Kind: "ConfigMap", Name: "vars_prod"}}}, "spec.substituteFrom[0].name"},
		{"repo-credentials", capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: "https://user:" + addressPassword + "@charts.example/", Name: "web"}}, "spec.chart.repo must not carry credentials"},
		{"url-credentials", capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://user:" + addressPassword + "@charts.example/web-1.0.0.tgz"}}, "spec.chart.url must not carry credentials"},
		{"oci-credentials", capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{OCI: "oci://user:" + addressPassword + "@registry.example/charts/web", Version: "1"}}, "spec.chart.oci must not carry credentials"},
		{"git-credentials", capstanv1.AddonSpec{Git: &capstanv1.GitSource{URL: "https://user:" + addressPassword + "@git.example/repo.git", Path: "web"}}, "spec.git.url must not carry a password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bad-" + tc.name}, Spec: tc.spec}
			err := admin.Create(context.Background(), a)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an Invalid error naming %q", err, tc.want)
			}
			if strings.Contains(err.Error(), addressPassword) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestAPIServerRefusesAPasswordInAnAddonRepositoryURL checks, on the real
// API server, that an AddonRepository's spec.url with a password is
// refused before it is stored (where everyone who may view
// AddonRepositories, and the URL column of kubectl get, would show it),
// that the refusal names the field and the Secret to use and does not
// quote the address, and that addresses with a user name alone, or an '@'
// after the host, are still taken.
func TestAPIServerRefusesAPasswordInAnAddonRepositoryURL(t *testing.T) {
	repo := func(url string) *capstanv1.AddonRepository {
		return &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "creds"},
			Spec: capstanv1.AddonRepositorySpec{URL: url}}
	}
	for _, url := range []string{
		"https://user:" + addressPassword + "@git.example/org/repo.git",
		"http://user:" + addressPassword + "@git.example/org/repo.git",
		"ssh://git:" + addressPassword + "@git.example/org/repo.git",
		"user:" + addressPassword + "@git.example:org/repo.git",
		"https://a:b:" + addressPassword + "@git.example/repo",
	} {
		err := admin.Create(context.Background(), repo(url), client.DryRunAll)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.url must not carry a password") ||
			!strings.Contains(err.Error(), "spec.secretRef") {
			t.Errorf("%s: got %v, want an Invalid error that names spec.url and spec.secretRef", url, err)
			continue
		}
		if strings.Contains(err.Error(), addressPassword) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	for _, url := range []string{
		"https://git.example/org/repo.git",
		"https://git.example:8443/org/repo.git?ref=a@b",
		"git@github.com:org/repo.git",
		"ssh://git@git.example:22/org/repo.git",
		"https://org@dev.azure.com/org/project/_git/repo",
		"file:///srv/git/repo@x",
	} {
		if err := admin.Create(context.Background(), repo(url), client.DryRunAll); err != nil {
			t.Errorf("%s was refused: %v", url, err)
		}
	}
}

// TestAPIServerRefusesABadInventoryEntry checks the inventory's one-string
// form on the real API server: an entry that names no object is refused,
// so a hand-edited status cannot leave an Addon the controller cannot read.
func TestAPIServerRefusesABadInventoryEntry(t *testing.T) {
	ctx := context.Background()
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bad-inventory",
		Annotations: map[string]string{capstanv1.PausedAnnotation: "true"}},
		Spec: capstanv1.AddonSpec{Git: &capstanv1.GitSource{URL: "https://git.example/repo.git", Path: "web"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), a) })
	good := []byte(`{"status":{"inventory":["apps/v1 Deployment web/frontend","rbac.authorization.k8s.io/v1 ClusterRole system:web"]}}`)
	if err := admin.Status().Patch(ctx, a, client.RawPatch(types.MergePatchType, good)); err != nil {
		t.Fatalf("a good inventory was refused: %v", err)
	}
	if got := capstanv1.RefsOf(a.Status.Inventory); len(got) != 2 || got[0].Namespace != "web" || got[1].Name != "system:web" {
		t.Fatalf("read back as %v", got)
	}
	for _, entry := range []string{"Deployment frontend", "apps/v1 Deployment web/front/end", `{"kind":"Deployment"}`} {
		raw, _ := json.Marshal(entry)
		if strings.HasPrefix(entry, "{") {
			raw = []byte(entry)
		}
		patch := []byte(`{"status":{"inventory":[` + string(raw) + `]}}`)
		err := admin.Status().Patch(ctx, a.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.inventory") {
			t.Errorf("%s: got %v, want an Invalid error naming status.inventory", entry, err)
		}
	}
}

// TestAPIServerExplainsBadDurations sends durations the CRD must refuse,
// and ones it must take, for spec.hookTimeout and spec.healthTimeout: each
// refusal carries the rule's message, never CEL's conversion error (which
// a value such as 1d, or one past a duration's range, used to give).
func TestAPIServerExplainsBadDurations(t *testing.T) {
	for _, field := range []string{"hookTimeout", "healthTimeout"} {
		for value, ok := range map[string]bool{
			"1d": false, "99999999999h": false, "9999999h": false, "-1s": false, "0s": false, "25h": false, "10 m": false,
			"90s": true, "1h30m": true, "1.5h": true, "24h": true, "500ms": true,
		} {
			a := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": capstanv1.GroupVersion.String(), "kind": "Addon",
				"metadata": map[string]any{"namespace": "default", "name": "durations"},
				"spec":     map[string]any{"git": map[string]any{"url": "https://git.example/repo.git", "path": "web"}, field: value},
			}}
			err := admin.Create(context.Background(), a, client.DryRunAll)
			switch {
			case ok && err != nil:
				t.Errorf("%s %q was refused: %v", field, value, err)
			case !ok && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec."+field+" must be a duration such as 90s") ||
				strings.Contains(err.Error(), "conversion")):
				t.Errorf("%s %q: %v; want the rule's message alone", field, value, err)
			}
		}
	}
}

// TestAPIServerRefusesADependencyOnItself: an Addon that names itself in
// spec.dependsOn, without a namespace, is refused when it is written; one
// that names another Addon of its own name in another namespace is not.
func TestAPIServerRefusesADependencyOnItself(t *testing.T) {
	for _, c := range []struct {
		dep map[string]any
		ok  bool
	}{
		{map[string]any{"name": "waits"}, false},
		{map[string]any{"name": "waits", "namespace": ""}, false},
		{map[string]any{"name": "waits", "namespace": "other"}, true},
		{map[string]any{"name": "another"}, true},
	} {
		a := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": capstanv1.GroupVersion.String(), "kind": "Addon",
			"metadata": map[string]any{"namespace": "default", "name": "waits"},
			"spec":     map[string]any{"git": map[string]any{"url": "https://git.example/repo.git", "path": "web"}, "dependsOn": []any{c.dep}},
		}}
		err := admin.Create(context.Background(), a, client.DryRunAll)
		switch {
		case c.ok && err != nil:
			t.Errorf("dependsOn %v was refused: %v", c.dep, err)
		case !c.ok && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.dependsOn names this Addon itself")):
			t.Errorf("dependsOn %v: %v; want the rule's message", c.dep, err)
		}
	}
}
