package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
)

// marks reads the removal annotations an Addon carries.
func marks(t *testing.T, key client.ObjectKey) map[string]string {
	t.Helper()
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), key, a); err != nil {
		t.Fatalf("the Addon %s should still be there: %v", key, err)
	}
	out := map[string]string{}
	for _, k := range []string{capstanv1.UninstallAnnotation, capstanv1.KeepValuesAnnotation} {
		if v, ok := a.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestRefusedRemovalLeavesNoMark removes an Addon as a user who may patch
// it but not delete it: the removal is refused before the uninstall and
// keep-values marks are written, so a later removal still does what the
// Addon's deletion policy says.
func TestRefusedRemovalLeavesNoMark(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "demo", hashOf("a"))
	patcher := user(t, ns, "patcher", addonRule("get", "list", "update", "patch"))
	code, body := call(t, patcher, http.MethodDelete, "/api/v1/namespaces/"+ns+"/addons/demo?uninstall=true&keepValues=true", nil)
	expect(t, "a removal by a user who may not delete", code, body, http.StatusForbidden)
	if m := marks(t, client.ObjectKey{Namespace: ns, Name: "demo"}); len(m) > 0 {
		t.Errorf("a refused removal left the marks %v on the Addon", m)
	}
}

// TestFailedDeleteTakesTheMarksBack removes an Addon whose delete fails
// after the marks were written: the marks this removal wrote are taken
// back, and one that was there before stays.
func TestFailedDeleteTakesTheMarksBack(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	a := addonWithPlan(t, ns, "demo", hashOf("a"))
	key := client.ObjectKeyFromObject(a)
	patch := client.MergeFrom(a.DeepCopy())
	a.Annotations = map[string]string{capstanv1.KeepValuesAnnotation: "true"}
	if err := admin.Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	// The API server judges the dry run as usual; the real delete fails as
	// a lost connection or a conflict would make it.
	real, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	failing := deleteFails(real, apierrors.NewConflict(schema.GroupResource{Group: "capstan.dev", Resource: "addons"}, key.Name, nil))
	err = addons.Remove(ctx, failing, key, addons.RemoveOptions{Uninstall: true, KeepValues: true})
	if !apierrors.IsConflict(err) {
		t.Fatalf("the removal's error %v should be the delete's conflict", err)
	}
	if m := marks(t, key); len(m) != 1 || m[capstanv1.KeepValuesAnnotation] != "true" {
		t.Errorf("after a failed delete the Addon carries %v; want only the keep-values mark it had before", m)
	}

	// A delete that got no answer (the connection was lost) may have been
	// made: the controller may be reading the marks, so they stay.
	lost := deleteFails(real, &url.Error{Op: "Delete", URL: "https://127.0.0.1/addons", Err: io.ErrUnexpectedEOF})
	if err := addons.Remove(ctx, lost, key, addons.RemoveOptions{Uninstall: true, KeepValues: true}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the removal's error %v should be the lost connection's", err)
	}
	if m := marks(t, key); len(m) != 2 || m[capstanv1.UninstallAnnotation] != "true" {
		t.Errorf("after a delete with no answer the Addon carries %v; want both marks kept", m)
	}
}

// deleteFails is real, but a delete that is no dry run fails with err, as
// a conflict or a lost connection would make it; the API server judges
// the dry run as usual.
func deleteFails(real client.WithWatch, err error) client.WithWatch {
	return interceptor.NewClient(real, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			o := &client.DeleteOptions{}
			o.ApplyOptions(opts)
			if len(o.DryRun) > 0 {
				return c.Delete(ctx, obj, opts...)
			}
			return err
		},
	})
}

// TestGitRemovalThatFailsTakesTheMarkBack uninstalls a git-managed Addon
// whose repository the git server does not have: the commit fails, and the
// uninstall mark written before it is taken back, so that a later removal
// by git keeps the software as the Addon's deletion policy says.
func TestGitRemovalThatFailsTakesTheMarkBack(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	git := gitserver.Start(t)
	if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"},
		Spec: capstanv1.AddonRepositorySpec{URL: git.URL + "/gone.git"}}); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo", Labels: map[string]string{gitops.ManagedByGitLabel: "gone"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	remover := user(t, ns, "remover", addonRule("get", "list", "update", "patch", "delete"))
	code, body := call(t, remover, http.MethodDelete, "/api/v1/namespaces/"+ns+"/addons/demo?uninstall=true", nil)
	if code == http.StatusAccepted {
		t.Fatalf("a commit to a repository that is gone was accepted: %s", body)
	}
	if m := marks(t, client.ObjectKeyFromObject(a)); len(m) > 0 {
		t.Errorf("a failed removal by git left the marks %v on the Addon", m)
	}
}

// TestUnknownQueryParameter removes an Addon with a misspelt flag: it is
// refused, naming the flag and the ones the endpoint takes, and nothing is
// removed.
func TestUnknownQueryParameter(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "demo", hashOf("a"))
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch", "delete"))
	for _, tc := range []struct{ query, says string }{
		{"keep_values=true", `"keep_values"`},
		{"keepvalues=true", `"keepvalues"`},
		{"uninstall=true&uninstall=false", "give it once"},
		{"keepValues=", "not true or false"},
	} {
		code, body := call(t, editor, http.MethodDelete, "/api/v1/namespaces/"+ns+"/addons/demo?"+tc.query, nil)
		expect(t, "a removal with "+tc.query, code, body, http.StatusBadRequest)
		if !strings.Contains(string(body), tc.says) || (strings.Contains(tc.says, `"`) && !strings.Contains(string(body), "keepValues, uid and uninstall")) {
			t.Errorf("the refusal of %s: %s; want it to say %s (and name the keys allowed)", tc.query, body, tc.says)
		}
	}
	if m := marks(t, client.ObjectKey{Namespace: ns, Name: "demo"}); len(m) > 0 {
		t.Errorf("a refused removal left the marks %v", m)
	}
}

// TestUnknownQueryParameterOnEveryEndpoint sends dryRun=All, which the
// Kubernetes API takes and this API does not, to a write of each kind and
// a misspelt key to the reads: each is 400, naming the key, and the
// Addon is unchanged.
func TestUnknownQueryParameterOnEveryEndpoint(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "demo", hashOf("a"))
	// A plan that got through would fetch this Addon's chart, which is on
	// loopback.
	chartAddon(t, ns, "local", "public-1.0.0.tgz")
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch", "delete"))
	path := "/api/v1/namespaces/" + ns + "/addons/demo"
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPatch, path + "?dryRun=All", map[string]any{"spec": map[string]any{"suspend": false}}},
		{http.MethodPost, path + "/approve?dryRun=All", map[string]string{"hash": hashOf("a")}},
		{http.MethodPost, path + "/install?dryRun=All", map[string]string{"hash": hashOf("a")}},
		{http.MethodPost, path + "/resume?dryRun=All", nil},
		{http.MethodPost, path + "/refresh?dryRun=All", nil},
		{http.MethodPost, path + "/test?dryRun=All", nil},
		{http.MethodPost, "/api/v1/namespaces/" + ns + "/addons/local/plan?dryRun=All", nil},
		{http.MethodPost, "/api/v1/namespaces/" + ns + "/addons?dryRun=All", map[string]any{"name": "other", "spec": map[string]any{"suspend": true}}},
		{http.MethodGet, path + "?dryRun=All", nil},
		{http.MethodGet, path + "/events?dryRun=All", nil},
		{http.MethodGet, path + "/capabilities?dryRun=All", nil},
		{http.MethodGet, "/api/v1/namespaces/" + ns + "/capabilities?dryRun=All", nil},
		{http.MethodPost, "/api/v1/session?dryRun=All", map[string]string{"token": editor}},
		{http.MethodDelete, "/api/v1/session?dryRun=All", nil},
	} {
		code, body := call(t, editor, tc.method, tc.path, tc.body)
		expect(t, tc.method+" "+tc.path, code, body, http.StatusBadRequest)
		if !strings.Contains(string(body), `unknown query parameter \"dryRun\"`) {
			t.Errorf("%s %s: %s; want the refusal to name dryRun", tc.method, tc.path, body)
		}
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, a); err != nil {
		t.Fatal(err)
	}
	if !a.Spec.Suspend || a.Spec.ApprovedPlan != "" || a.Spec.SyncRequest != 0 || len(a.Annotations) > 0 {
		t.Errorf("refused requests changed the Addon: suspend %v, approvedPlan %q, syncRequest %d, annotations %v",
			a.Spec.Suspend, a.Spec.ApprovedPlan, a.Spec.SyncRequest, a.Annotations)
	}
	other := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "other"}, other); !apierrors.IsNotFound(err) {
		t.Errorf("a refused add created the Addon: %v", err)
	}
}

// TestGitRemovalOutlivesItsRequest uninstalls a git-managed Addon and goes
// away (a closed tab, a proxy that stops waiting) while the commit's clone
// is held by a slow remote. The commit is not cut short: once the remote
// answers it is made, with the mark; and when the remote fails it instead,
// the mark is taken back, as for any failed commit, since nothing was
// committed and a mark left on an Addon that stays would make a later
// removal, meant to keep the software, uninstall it.
func TestGitRemovalOutlivesItsRequest(t *testing.T) {
	for _, answers := range []bool{true, false} {
		ctx := context.Background()
		ns := namespace(t)
		git := gitserver.Start(t)
		url := git.Create(t, "ops")
		gitserver.Clone(t, url).Write("addons/demo.yaml", "name: demo\nhelm:\n  repo: https://charts.invalid/\n  chart: demo\n  version: 1.0.0\n").
			Write("addons/other.yaml", "name: other\nhelm:\n  repo: https://charts.invalid/\n  chart: other\n  version: 1.0.0\n").CommitAndPush("demo and other")
		hold := git.HoldAt(t, "/git-upload-pack", 1, false)
		if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
			Spec: capstanv1.AddonRepositorySpec{URL: hold.URL + "/ops.git"}}); err != nil {
			t.Fatal(err)
		}
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo", Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
			Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: "https://charts.invalid/", Name: "demo", Version: "1.0.0"}}}
		if err := admin.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKeyFromObject(a)
		remover := user(t, ns, "remover", addonRule("get", "list", "update", "patch", "delete"))

		reqCtx, cancel := context.WithCancel(ctx)
		go func() {
			<-hold.Reached
			cancel()
		}()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodDelete, api.URL+"/api/v1/namespaces/"+ns+"/addons/demo?uninstall=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+remover)
		if resp, err := apiClient().Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("the request was answered %s before the remote was", resp.Status)
		}
		if answers {
			hold.Pass()
		} else {
			hold.Fail()
		}

		deadline := time.Now().Add(30 * time.Second)
		for {
			_, statErr := os.Stat(filepath.Join(gitserver.Clone(t, url).Dir, "addons/demo.yaml"))
			removed := os.IsNotExist(statErr)
			live := &capstanv1.Addon{}
			err := admin.Get(ctx, key, live)
			unmarked := err == nil && live.Annotations[capstanv1.UninstallAnnotation] == ""
			if answers && removed || !answers && unmarked {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("remote answers %v: after the request went away, the file removed %v, the Addon read %v with annotations %v; want the commit made when the remote answers, and the mark taken back when it fails",
					answers, removed, err, live.Annotations)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestRemovalCancelledBeforeTheDeleteTakesTheMarksBack removes an Addon
// whose request goes away right after the marks are written: the delete
// is not sent, so nothing was removed, and the marks are taken back.
func TestRemovalCancelledBeforeTheDeleteTakesTheMarksBack(t *testing.T) {
	ns := namespace(t)
	a := addonWithPlan(t, ns, "demo", hashOf("a"))
	key := client.ObjectKeyFromObject(a)
	real, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	goesAway := interceptor.NewClient(real, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := c.Patch(ctx, obj, patch, opts...)
			cancel()
			return err
		},
	})
	if err := addons.Remove(ctx, goesAway, key, addons.RemoveOptions{Uninstall: true, KeepValues: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("the removal's error %v should say that the request was cancelled", err)
	}
	if m := marks(t, key); len(m) > 0 {
		t.Errorf("a removal cancelled before its delete left the marks %v on the Addon", m)
	}
}
