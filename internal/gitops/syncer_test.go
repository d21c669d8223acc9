package gitops_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/source"
)

const approved = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

// longhorn and umami are the definitions of the docs' examples.
var longhorn, umami = readTestdata("longhorn.yaml"), readTestdata("umami.yaml")

// readTestdata reads a file of testdata/; a missing one is a broken checkout.
func readTestdata(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sign is the hex HMAC-SHA256 of body, as GitHub and Gitea sign a push.
func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestSyncerLifecycle(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-sync")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)

	// A hand-made Addon with the name of a definition is not taken over.
	manual := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manual"},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://example.com/manual-1.0.0.tgz"}}}
	if err := env.client.Create(ctx, manual); err != nil {
		t.Fatal(err)
	}

	c1 := w.Write("addons/longhorn.yaml", longhorn).
		Write("addons/umami.yaml", umami).
		Write("umami/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: umami}\n").
		Write("addons/broken.yaml", "name: broken\nhelm: {repo: https://x, chart: c}\ncolour: red\n").
		Write("addons/dup.yaml", "name: dup\nhelm: {repo: https://x, chart: c}\n").
		Write("addons/dup.yml", "name: dup\nhelm: {repo: https://x, chart: c}\n").
		Write("addons/manual.yaml", "name: manual\nhelm: {repo: https://x, chart: c}\n").
		CommitAndPush("first definitions")
	createRepo(t, ns, "gitops", url)
	repo := waitSynced(t, ns, "gitops", c1)

	if repo.Status.Branch != "main" || repo.Status.Addons != 2 || repo.Status.InvalidFileCount != 4 {
		t.Fatalf("status: %+v", repo.Status)
	}
	wantInvalid := map[string]string{
		"addons/broken.yaml": "addons/broken.yaml:3: colour: unknown field",
		"addons/dup.yaml":    "keep one file",
		"addons/dup.yml":     "keep one file",
		"addons/manual.yaml": "is not managed by git",
	}
	for _, f := range repo.Status.InvalidFiles {
		if !strings.Contains(f.Message, wantInvalid[f.Path]) {
			t.Errorf("%s: %q lacks %q", f.Path, f.Message, wantInvalid[f.Path])
		}
	}
	if c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != controller.ReasonInvalidFiles {
		t.Fatalf("Ready: %+v", c)
	}
	if _, err := getAddon(t, ns, "dup"); !apierrors.IsNotFound(err) {
		t.Fatalf("two files for dup: neither may win, got %v", err)
	}
	if got := mustAddon(t, ns, "manual"); got.Spec.Chart.URL != "https://example.com/manual-1.0.0.tgz" || got.Labels[gitops.ManagedByGitLabel] != "" {
		t.Fatalf("the hand-made Addon was changed: %+v", got)
	}
	lh := mustAddon(t, ns, "longhorn")
	if lh.Spec.Chart.Version != "v1.10.2" || lh.Labels[gitops.ManagedByGitLabel] != "gitops" ||
		lh.Annotations[gitops.GitFileAnnotation] != "addons/longhorn.yaml" || lh.Annotations[gitops.GitCommitAnnotation] != c1 {
		t.Fatalf("longhorn: %+v %+v", lh.ObjectMeta, lh.Spec)
	}
	um := mustAddon(t, ns, "umami")
	if um.Spec.Git == nil || um.Spec.Git.URL != url || um.Spec.Git.Revision != c1 || um.Spec.Git.Path != "umami" {
		t.Fatalf("umami is not pinned to %s: %+v", c1, um.Spec.Git)
	}

	// What is not configuration, written by others: an approval, a counter,
	// annotations, a finalizer and status.
	lh.Spec.SyncRequest, lh.Spec.ApprovedPlan = 3, approved
	lh.Annotations[capstanv1.PausedAnnotation] = "true"
	lh.Annotations["example.com/note"] = "keep me"
	lh.Finalizers = append(lh.Finalizers, "example.com/keep")
	if err := env.client.Update(ctx, lh, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	lh.Status.Phase, lh.Status.LastSyncRequest = capstanv1.PhaseOutOfSync, 2
	if err := env.client.Status().Update(ctx, lh, client.FieldOwner("capstan")); err != nil {
		t.Fatal(err)
	}

	// An edit in git; umami becomes invalid and must stay as it was.
	c2 := w.Write("addons/longhorn.yaml", strings.NewReplacer("v1.10.2", "v1.11.0", "manualSync: true", "manualSync: false").Replace(longhorn)).
		Write("addons/umami.yaml", umami+"colour: red\n").
		CommitAndPush("upgrade longhorn, break umami")
	trigger(t, ns, "gitops")
	repo = waitSynced(t, ns, "gitops", c2)
	lh = mustAddon(t, ns, "longhorn")
	switch {
	case lh.Spec.Chart.Version != "v1.11.0" || lh.Spec.ManualSync:
		t.Errorf("the edit did not land: %+v", lh.Spec)
	case lh.Spec.SyncRequest != 3 || lh.Spec.ApprovedPlan != approved:
		t.Errorf("the approval was lost: %d %q", lh.Spec.SyncRequest, lh.Spec.ApprovedPlan)
	case lh.Annotations[capstanv1.PausedAnnotation] != "true" || lh.Annotations["example.com/note"] != "keep me" || lh.Annotations[gitops.GitCommitAnnotation] != c2:
		t.Errorf("annotations: %v", lh.Annotations)
	case len(lh.Finalizers) != 1 || lh.Status.Phase != capstanv1.PhaseOutOfSync || lh.Status.LastSyncRequest != 2:
		t.Errorf("finalizers %v, status %+v", lh.Finalizers, lh.Status)
	}
	if got := mustAddon(t, ns, "umami"); got.Spec.Git.Revision != c1 || got.ResourceVersion != um.ResourceVersion {
		t.Errorf("the invalid file's Addon changed: revision %s", got.Spec.Git.Revision)
	}
	if !hasInvalid(repo, "addons/umami.yaml") {
		t.Errorf("umami is not reported: %+v", repo.Status.InvalidFiles)
	}

	// A resync with no change writes nothing. The sync runs here, not in
	// the background, so the check cannot come before it.
	before := mustAddon(t, ns, "longhorn").ResourceVersion
	if _, err := env.syncer.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	if after := mustAddon(t, ns, "longhorn").ResourceVersion; after != before {
		t.Errorf("a no-change resync wrote the Addon: %s -> %s", before, after)
	}

	// A branch that does not exist: nothing changes, and it is reported.
	setBranch(t, ns, "gitops", "nope")
	eventually(t, 20*time.Second, "unreadable branch reported", func() error {
		r := getRepo(t, ns, "gitops")
		c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != controller.ReasonUnreadable || !strings.Contains(c.Message, `no branch "nope"`) {
			return fmt.Errorf("conditions %+v", r.Status.Conditions)
		}
		return nil
	})
	if _, err := getAddon(t, ns, "longhorn"); err != nil {
		t.Fatalf("an unreadable repository deleted an Addon: %v", err)
	}
	setBranch(t, ns, "gitops", "")

	// A token as the URL's user: every Addon would show it in its
	// spec.git.url. Refused before any request, and nothing changes.
	setURL := func(u string) { patchRepo(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.URL = u }) }
	setURL(strings.Replace(url, "://", "://ghp_hunter2@", 1))
	eventually(t, 20*time.Second, "the URL with a token refused", func() error {
		r := getRepo(t, ns, "gitops")
		c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.url must be a git URL without credentials") ||
			strings.Contains(c.Message, "hunter2") {
			return fmt.Errorf("conditions %+v", r.Status.Conditions)
		}
		return nil
	})
	if _, err := getAddon(t, ns, "longhorn"); err != nil {
		t.Fatalf("a refused URL deleted an Addon: %v", err)
	}
	setURL(url)

	// Remove with uninstall: the annotation first, then the deletion commit.
	mark := mustAddon(t, ns, "longhorn")
	markPatch := client.MergeFrom(mark.DeepCopy())
	mark.Annotations[capstanv1.UninstallAnnotation] = "true"
	if err := env.client.Patch(ctx, mark, markPatch); err != nil {
		t.Fatal(err)
	}
	c3, err := (&gitops.Writer{URL: url}).Remove(ctx, "longhorn")
	if err != nil {
		t.Fatal(err)
	}
	trigger(t, ns, "gitops")
	repo = waitSynced(t, ns, "gitops", c3)
	// The sync that deleted it says so: who took an Addon, and at which
	// commit.
	if c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady); c == nil ||
		!strings.Contains(c.Message, "Synced commit "+gitops.ShortCommit(c3)) ||
		!strings.Contains(c.Message, "deleted 1 Addons whose files left git, each with its deletion policy (Delete uninstalls, Orphan leaves the software running): longhorn (Delete, marked for uninstall)") {
		t.Fatalf("Ready of the sync that deleted longhorn: %+v", c)
	}
	lh = mustAddon(t, ns, "longhorn") // The example.com/keep finalizer holds it.
	if lh.DeletionTimestamp == nil || lh.Annotations[capstanv1.UninstallAnnotation] != "true" {
		t.Fatalf("longhorn: deletion %v, annotations %v", lh.DeletionTimestamp, lh.Annotations)
	}
	lh.Finalizers = nil
	if err := env.client.Update(ctx, lh); err != nil {
		t.Fatal(err)
	}

	// A force-push to an unrelated history just syncs the new head.
	w.Pull()
	c4 := w.ReplaceHistory(map[string]string{
		"addons/fresh.yaml":  "name: fresh\nhelm:\n  oci: oci://ghcr.io/example/fresh\n  version: 1.0.0\n",
		"addons/umami.yaml":  umami,
		"umami/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: umami}\n",
		"addons/manual.yaml": "name: manual\nhelm: {repo: https://x, chart: c}\n",
	}, "a new history")
	trigger(t, ns, "gitops")
	repo = waitSynced(t, ns, "gitops", c4)
	if got := mustAddon(t, ns, "umami"); got.Spec.Git.Revision != c4 {
		t.Errorf("umami not pinned to the new head: %s", got.Spec.Git.Revision)
	}
	if _, err := getAddon(t, ns, "fresh"); err != nil {
		t.Errorf("fresh: %v", err)
	}
	if repo.Status.InvalidFileCount != 1 {
		t.Errorf("invalid files: %+v", repo.Status.InvalidFiles)
	}
	if c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady); c == nil || strings.Contains(c.Message, "deleted") {
		t.Errorf("Ready of a sync that deleted nothing: %+v", c)
	}
}

func hasInvalid(r *capstanv1.AddonRepository, path string) bool {
	for _, f := range r.Status.InvalidFiles {
		if f.Path == path {
			return true
		}
	}
	return false
}

func setBranch(t *testing.T, ns, name, branch string) {
	t.Helper()
	patchRepo(t, ns, name, func(r *capstanv1.AddonRepository) { r.Spec.Branch = branch })
}

// patchRepo changes an AddonRepository as change says.
func patchRepo(t *testing.T, ns, name string, change func(*capstanv1.AddonRepository)) {
	t.Helper()
	r := getRepo(t, ns, name)
	patch := client.MergeFrom(r.DeepCopy())
	change(r)
	if err := env.client.Patch(context.Background(), r, patch); err != nil {
		t.Fatal(err)
	}
}

// TestSyncerEmptiedRepository shows that a folder gone from the repository
// changes nothing and says so, and that a folder emptied of definitions
// deletes the Addons, whose Orphan policy leaves the software running: no
// controller runs here, and the "software", a ConfigMap, stays.
func TestSyncerEmptiedRepository(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-empty")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nnamespace: "+ns+"\ndeletionPolicy: Orphan\nhelm: {repo: https://x, chart: kuma}\n").
		Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
		CommitAndPush("two add-ons")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)
	software := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kuma-config",
		Labels: map[string]string{capstanv1.AddonLabel: "kuma", capstanv1.AddonNamespaceLabel: ns, capstanv1.ManagedByLabel: "capstan"}}}
	if err := env.client.Create(ctx, software); err != nil {
		t.Fatal(err)
	}

	// The folder is renamed by mistake: nothing is deleted, and the
	// repository says what to check.
	w.Git("mv", "addons", "add-ons")
	w.CommitAndPush("renamed")
	trigger(t, ns, "gitops")
	eventually(t, 10*time.Second, "the missing folder reported", func() error {
		var r capstanv1.AddonRepository
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gitops"}, &r); err != nil {
			return err
		}
		c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `there is no folder "addons"`) ||
			!strings.Contains(c.Message, "nothing was changed") {
			return fmt.Errorf("Ready: %+v", c)
		}
		return nil
	})
	var list capstanv1.AddonList
	if err := env.client.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 2 {
		t.Fatalf("after the folder went missing: %d Addons (%v); want both", len(list.Items), err)
	}

	// The commit without the folder is not cloned again at each resync:
	// what it lacks is remembered until the branch moves. Two resyncs
	// are seen to start, so the first has ended, and neither fetched.
	fetches, listings := srv.Fetches(), srv.Listings()
	for i := int64(1); i <= 2; i++ {
		trigger(t, ns, "gitops")
		eventually(t, 10*time.Second, "a resync", func() error {
			if n := srv.Listings(); n < listings+i {
				return fmt.Errorf("%d ref listings", n-listings)
			}
			return nil
		})
	}
	time.Sleep(500 * time.Millisecond)
	if n := srv.Fetches() - fetches; n != 0 {
		t.Fatalf("the commit without the folder was fetched %d more times", n)
	}

	// The files are moved into a subfolder, which the syncer does not
	// read: the commit is refused, and the repository names the subfolder.
	w.Git("mv", "add-ons", "addons")
	c2 := w.Write("addons/team/kuma.yaml", "name: kuma\nnamespace: "+ns+"\ndeletionPolicy: Orphan\nhelm: {repo: https://x, chart: kuma}\n").
		Remove("addons/kuma.yaml").Remove("addons/dash.yaml").Write("addons/README.md", "Nothing here yet.\n").
		CommitAndPush("oops, everything moved")
	trigger(t, ns, "gitops")
	refused := func(commit, more string) {
		t.Helper()
		eventually(t, 10*time.Second, "the commit without definitions refused", func() error {
			r := getRepo(t, ns, "gitops")
			c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
			if c == nil || c.Reason != controller.ReasonEmptyRefused || !strings.Contains(c.Message, gitops.ShortCommit(commit)) ||
				!strings.Contains(c.Message, "spec.allowEmpty") || !strings.Contains(c.Message, more) {
				return fmt.Errorf("Ready: %+v", c)
			}
			if s := meta.FindStatusCondition(r.Status.Conditions, "Stalled"); s == nil || s.Status != metav1.ConditionTrue {
				return fmt.Errorf("Stalled: %+v", s)
			}
			if r.Status.LastSyncedCommit != c1 {
				return fmt.Errorf("last synced %s; want %s still", r.Status.LastSyncedCommit, c1)
			}
			return nil
		})
		var list capstanv1.AddonList
		if err := env.client.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 2 {
			t.Fatalf("after a commit without definitions: %d Addons (%v); want both", len(list.Items), err)
		}
	}
	refused(c2, `subfolders addons/team/ do`)

	// The folder is left with a README alone: refused too.
	w.Remove("addons/team/kuma.yaml")
	c3 := w.CommitAndPush("oops, everything deleted")
	trigger(t, ns, "gitops")
	refused(c3, "delete them by hand")

	// spec.allowEmpty says the emptied folder is meant: the Addons go.
	setSpec(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.AllowEmpty = true })
	waitSynced(t, ns, "gitops", c3)
	eventually(t, 10*time.Second, "Addons deleted", func() error {
		var list capstanv1.AddonList
		if err := env.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 0 {
			return fmt.Errorf("%d Addons left", len(list.Items))
		}
		return nil
	})
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(software), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the running software was removed: %v", err)
	}
}

// signedPush sends url a GitHub push of ref signed with secret, and
// returns the answer's code and body.
func signedPush(t testing.TB, url, secret, ref string) (code int, answer string) {
	t.Helper()
	body := fmt.Sprintf(`{"ref":%q,"after":"x"}`, ref)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+sign(secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestWebhookTriggersSync(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-hook")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/app.yaml", "name: app\nhelm: {repo: https://x, chart: app, version: 1.0.0}\n").CommitAndPush("app 1.0.0")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"}, Data: map[string][]byte{gitops.WebhookSecretKey: []byte("s3cret")}}
	if err := env.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	createRepo(t, ns, "gitops", url, func(r *capstanv1.AddonRepository) {
		r.Spec.WebhookSecretRef = &capstanv1.LocalObjectReference{Name: "hook"}
	})
	waitSynced(t, ns, "gitops", c1)
	hook := httptest.NewServer(&gitops.Webhook{Client: env.client, Syncer: env.syncer})
	t.Cleanup(hook.Close)
	endpoint := hook.URL + "/hooks/git/" + ns + "/gitops"

	w.Write("addons/app.yaml", "name: app\nhelm: {repo: https://x, chart: app, version: 2.0.0}\n").CommitAndPush("app 2.0.0")
	// A bad signature, a push to another branch: nothing happens.
	if code, _ := signedPush(t, endpoint, "wrong", "refs/heads/main"); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d", code)
	}
	// A bad signature and a repository that is not there get one answer:
	// the endpoint tells an unauthenticated caller nothing.
	answer := func(url string) string {
		body := `{"ref":"refs/heads/main"}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+sign("wrong", body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", string(b))
	}
	if bad, none := answer(endpoint), answer(hook.URL+"/hooks/git/"+ns+"/nothing-here"); bad != none {
		t.Fatalf("a bad signature is told apart from no repository: %q and %q", bad, none)
	}
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"ref":"refs/heads/main"}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("missing signature: %v %v", resp, err)
	}
	if code, _ := signedPush(t, endpoint, "s3cret", "refs/heads/other"); code != http.StatusAccepted {
		t.Fatalf("other branch: %d", code)
	}
	big := bytes.Repeat([]byte("x"), gitops.MaxWebhookBody+1)
	// A body is read only from a request that carries a signature.
	req, _ = http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(big))
	req.Header.Set("X-Gitlab-Token", "s3cret")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("huge body: %v %v", resp, err)
	}
	time.Sleep(time.Second)
	if v := mustAddon(t, ns, "app").Spec.Chart.Version; v != "1.0.0" {
		t.Fatalf("a refused webhook synced: version %s", v)
	}

	// A good signature syncs at once, not at the repository's interval (an
	// hour): a bound far below it, however slow the machine.
	start := time.Now()
	for range 5 {
		if code, _ := signedPush(t, endpoint, "s3cret", "refs/heads/main"); code != http.StatusAccepted {
			t.Fatalf("good signature: %d", code)
		}
	}
	eventually(t, 2*time.Minute, "webhook sync", func() error {
		if v := mustAddon(t, ns, "app").Spec.Chart.Version; v != "2.0.0" {
			return fmt.Errorf("version %s", v)
		}
		return nil
	})
	t.Logf("webhook to Addon updated: %v", time.Since(start))
}

// TestSyncerHandsTheShardOn: a repository's shard label reaches its Addons
// when it is set, changed and removed, without a commit; an Addon a person
// put in a shard by hand under a repository in none keeps its label, and a
// resync does not write it.
func TestSyncerHandsTheShardOn(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-shard")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma}\n").
		Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
		CommitAndPush("two add-ons")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)

	setShard := func(shard string) {
		patchRepo(t, ns, "gitops", func(r *capstanv1.AddonRepository) {
			if shard == "" {
				delete(r.Labels, gitops.ShardLabel)
			} else {
				r.Labels = map[string]string{gitops.ShardLabel: shard}
			}
		})
	}
	shardIs := func(name, want string) {
		t.Helper()
		eventually(t, 20*time.Second, name+" in shard "+want, func() error {
			if got := mustAddon(t, ns, name).Labels[gitops.ShardLabel]; got != want {
				return fmt.Errorf("shard %q", got)
			}
			return nil
		})
	}
	setShard("shard-a")
	shardIs("kuma", "shard-a")
	setShard("shard-b")
	shardIs("kuma", "shard-b")
	shardIs("dash", "shard-b")
	setShard("")
	shardIs("kuma", "")
	shardIs("dash", "")

	// A person puts dash in a shard by hand: the repository, in none,
	// leaves it there and writes nothing.
	dash := mustAddon(t, ns, "dash")
	patch := client.MergeFrom(dash.DeepCopy())
	dash.Labels[gitops.ShardLabel] = "by-hand"
	if err := env.client.Patch(ctx, dash, patch); err != nil {
		t.Fatal(err)
	}
	before := mustAddon(t, ns, "dash").ResourceVersion
	if _, err := env.syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	if got := mustAddon(t, ns, "dash"); got.ResourceVersion != before || got.Labels[gitops.ShardLabel] != "by-hand" {
		t.Fatalf("a resync wrote the hand-sharded Addon: %s -> %s, shard %q", before, got.ResourceVersion, got.Labels[gitops.ShardLabel])
	}
}

// TestSyncerGivesUpOnAServerThatHangs: a git server that answers nothing
// holds a sync no longer than the fetch timeout, and the repository says
// it could not be read.
func TestSyncerGivesUpOnAServerThatHangs(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-hang")
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	createRepo(t, ns, "gitops", srv.URL+"/gitops.git")

	fresh := &controller.AddonRepositoryReconciler{Client: env.client, FetchTimeout: time.Second}
	done := make(chan error, 1)
	go func() {
		_, err := fresh.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sync still waits for a server that answers nothing")
	}
	r := getRepo(t, ns, "gitops")
	c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonUnreadable || !strings.Contains(c.Message, "did not answer within 1s") {
		t.Fatalf("Ready: %+v", c)
	}
	// NOTE: a server that hangs for a while is no mistake a person must
	// fix: the backoff reads it again, so the repository is not Stalled,
	// which health tooling takes as failed.
	if s := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionStalled); s == nil || s.Status != metav1.ConditionFalse {
		t.Fatalf("Stalled: %+v; want False for a server that did not answer", s)
	}
}

// TestSyncerIsNotStalledByABadGateway: a git server that answers 502 (a
// proxy in front of it restarts) fails the read, which the backoff
// retries: Ready is False, and the repository is not Stalled. A
// repository that does not exist is Stalled, as a person must fix it.
func TestSyncerIsNotStalledByABadGateway(t *testing.T) {
	needCluster(t)
	ns := newNamespace(t, "gitops-502")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	git := gitserver.Start(t)
	createRepo(t, ns, "proxied", srv.URL+"/gitops.git")
	createRepo(t, ns, "missing", git.URL+"/missing.git")
	waitRead(t, ns, "proxied")
	waitRead(t, ns, "missing")
	fresh := &controller.AddonRepositoryReconciler{Client: env.client}
	for name, stalled := range map[string]metav1.ConditionStatus{"proxied": metav1.ConditionFalse, "missing": metav1.ConditionTrue} {
		if _, err := fresh.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		r := getRepo(t, ns, name)
		c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonUnreadable {
			t.Fatalf("%s: Ready %+v", name, c)
		}
		if s := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionStalled); s == nil || s.Status != stalled {
			t.Fatalf("%s: Stalled %+v; want %s (Ready says %q)", name, s, stalled, c.Message)
		}
	}
}

// TestSyncerGivesUpOnCredentialsThatHang: credentials that take for ever
// to get (a GitHub App's token, asked of an API that does not answer)
// hold a sync no longer than the fetch timeout, and the repository says
// it could not be read, as when its git server does not answer.
func TestSyncerGivesUpOnCredentialsThatHang(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := newNamespace(t, "gitops-auth-hang")
	srv := gitserver.Start(t)
	createRepo(t, ns, "gitops", srv.Create(t, "gitops"))
	waitRead(t, ns, "gitops")

	hang := func(ctx context.Context, _ string, _ *corev1.Secret) (transport.AuthMethod, error) {
		<-ctx.Done()
		return nil, fmt.Errorf("cannot get a GitHub App installation token: %w", ctx.Err())
	}
	fresh := &controller.AddonRepositoryReconciler{Client: env.client, Auth: hang, FetchTimeout: time.Second}
	began := time.Now()
	if _, err := fresh.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("the sync waited %s for credentials, past its fetch timeout of 1s", took)
	}
	r := getRepo(t, ns, "gitops")
	c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonUnreadable || !strings.Contains(c.Message, "did not answer within 1s") {
		t.Fatalf("Ready: %+v", c)
	}
	if s := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionStalled); s == nil || s.Status != metav1.ConditionFalse {
		t.Fatalf("Stalled: %+v; want False for credentials that did not come in time", s)
	}
}

// TestSyncerRestartsTheStallClockAfterCredentialsAPersonFixed: a
// credentials step that failed for a moment twice, then credentials a
// person must fix (Stalled at once), then, once fixed, one more passing
// failure a quarter of an hour after the first: that one is not Stalled,
// as the run of failures was ended by the failure a person fixed.
func TestSyncerRestartsTheStallClockAfterCredentialsAPersonFixed(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-auth-clock")
	srv := gitserver.Start(t)
	createRepo(t, ns, "gitops", srv.Create(t, "gitops"))
	waitRead(t, ns, "gitops")

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	var authErr error
	auth := func(context.Context, string, *corev1.Secret) (transport.AuthMethod, error) { return nil, authErr }
	fresh := &controller.AddonRepositoryReconciler{Client: env.client, Auth: auth, Now: func() time.Time { return clock }}
	unavailable := fmt.Errorf("cannot get a GitHub App installation token: %w", apierrors.NewServiceUnavailable("the token endpoint is restarting"))
	step := func(after time.Duration, err error, wantStalled metav1.ConditionStatus) {
		t.Helper()
		clock, authErr = t0.Add(after), err
		if _, err := fresh.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
			t.Fatal(err)
		}
		r := getRepo(t, ns, "gitops")
		c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
		if s := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionStalled); s == nil || s.Status != wantStalled {
			t.Fatalf("after %s: Stalled %+v, want %s (Ready %+v)", after, s, wantStalled, c)
		}
	}
	step(0, unavailable, metav1.ConditionFalse)
	step(5*time.Minute, unavailable, metav1.ConditionFalse)
	step(6*time.Minute, fmt.Errorf("the GitHub App private key does not parse"), metav1.ConditionTrue)
	step(15*time.Minute, unavailable, metav1.ConditionFalse)
}

// TestSyncerWaitsOutABusyGitBudget: other fetches hold the git memory
// budget, so the clone of the repository's commit is refused at once.
// That is no failed read: the repository is not Stalled, says it is read
// again shortly, and is, well before its interval; once the memory is
// back, the read syncs.
func TestSyncerWaitsOutABusyGitBudget(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-busy")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	c1 := gitserver.Clone(t, url).Write("addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: a}\n").
		Write("docs/big.txt", strings.Repeat("a line of the manual, not an add-on\n", 1<<15)).
		CommitAndPush("a")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)

	// A budget that holds one clone of the commit and a half, and another
	// fetch that holds one.
	measure := source.NewGitBudget(64 << 20)
	_, _, release, err := gitops.Repo{URL: url, Budget: measure}.Clone(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	small := source.NewGitBudget(measure.Held() * 3 / 2)
	release()
	_, _, release, err = gitops.Repo{URL: url, Budget: small}.Clone(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}

	fresh := &controller.AddonRepositoryReconciler{Client: env.client, GitBudget: small}
	read := func() ctrl.Result {
		t.Helper()
		res, err := fresh.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for range 4 {
		if res := read(); res.RequeueAfter < 15*time.Second || res.RequeueAfter > 30*time.Second {
			t.Fatalf("a read refused for the git budget is read again in %s; want 15-30s", res.RequeueAfter)
		}
	}
	r := getRepo(t, ns, "gitops")
	c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
	switch {
	case c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonGitMemoryBusy || !strings.Contains(c.Message, "read again in"):
		t.Fatalf("Ready: %+v", c)
	case meta.IsStatusConditionTrue(r.Status.Conditions, capstanv1.ConditionStalled):
		t.Fatalf("a busy git budget stalls the repository: %+v", r.Status.Conditions)
	case !meta.IsStatusConditionTrue(r.Status.Conditions, capstanv1.ConditionReconciling):
		t.Fatalf("a repository read again shortly is not Reconciling: %+v", r.Status.Conditions)
	}
	release()
	if res := read(); res.RequeueAfter != time.Hour {
		t.Fatalf("after the memory came back: read again in %s; want the interval", res.RequeueAfter)
	}
	if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit != c1 {
		t.Fatalf("after the memory came back: synced %q, conditions %+v", r.Status.LastSyncedCommit, r.Status.Conditions)
	}
}

// staleRepoOnce is a client whose first Get of an AddonRepository answers
// the copy it holds, as a cache that has not seen the last status write
// yet does; everything else is the API server's.
type staleRepoOnce struct {
	client.Client
	repo *capstanv1.AddonRepository
}

func (c *staleRepoOnce) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r, ok := obj.(*capstanv1.AddonRepository); ok && c.repo != nil {
		c.repo.DeepCopyInto(r)
		c.repo = nil
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestSyncerWritesItsWholeStatusAfterAStaleRead: a sync reports an
// invalid file; the fix is pushed, and the next sync starts at once, from
// a read of the repository that does not hold the first sync's status
// yet. The status never shows the new commit synced next to the invalid
// file of the commit before: that write is refused, and the next sync
// writes it whole.
func TestSyncerWritesItsWholeStatusAfterAStaleRead(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-stale-status")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: a}\n").CommitAndPush("a")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)

	stale := getRepo(t, ns, "gitops")
	c2 := w.Write("addons/b.yaml", "name: b\nbogus: true\nhelm: {repo: https://x, chart: b}\n").CommitAndPush("b, with a typo")
	syncer := &controller.AddonRepositoryReconciler{Client: env.client}
	if _, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit != c2 || !hasInvalid(r, "addons/b.yaml") {
		t.Fatalf("synced %s, invalid files %+v; want %s with b invalid", r.Status.LastSyncedCommit, r.Status.InvalidFiles, c2)
	}

	c3 := w.Write("addons/b.yaml", "name: b\nhelm: {repo: https://x, chart: b}\n").CommitAndPush("b fixed")
	syncer.Client = &staleRepoOnce{Client: env.client, repo: stale}
	for range 2 {
		if _, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
			t.Fatal(err)
		}
		if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit == c3 && (r.Status.InvalidFileCount != 0 || len(r.Status.InvalidFiles) != 0) {
			t.Fatalf("synced %s with %d invalid files %+v, of the commit before", c3, r.Status.InvalidFileCount, r.Status.InvalidFiles)
		}
	}
	if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit != c3 || r.Status.Addons != 2 {
		t.Fatalf("synced %s, %d Addons; want %s and 2", r.Status.LastSyncedCommit, r.Status.Addons, c3)
	}
}

// TestSyncerNamesADeletionWhoseStatusWriteConflicted: a sync deletes the
// Addon of a file removed from git (and fixes the invalid file beside
// it), and its status write is refused for a stale read. The sync after
// it, which has nothing left to delete, still names the deletion in
// Ready, and the receivers hear of that sync once, with the deletion in
// its message; the sync after that names it no more.
func TestSyncerNamesADeletionWhoseStatusWriteConflicted(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-prune-conflict")
	var mu sync.Mutex
	var posted []notify.Event
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e notify.Event
		if body, _ := io.ReadAll(r.Body); json.Unmarshal(body, &e) == nil && e.Namespace == ns {
			mu.Lock()
			posted = append(posted, e)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	u, _ := url.Parse(hook.URL)
	notifier := &notify.Notifier{Client: http.DefaultClient, Receivers: func(context.Context) ([]notify.Receiver, error) {
		return []notify.Receiver{{Name: "test", URL: u, Format: notify.FormatJSON, MinSeverity: notify.SeverityInfo}}, nil
	}}
	nctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = notifier.Start(nctx) }()

	srv := gitserver.Start(t)
	repoURL := srv.Create(t, "gitops")
	w := gitserver.Clone(t, repoURL)
	w.Write("addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: a}\n")
	w.Write("addons/x.yaml", "name: x\nbogus: true\nhelm: {repo: https://x, chart: x}\n")
	c1 := w.Write("addons/b.yaml", "name: b\nhelm: {repo: https://x, chart: b}\n").CommitAndPush("a, b, x with a typo")
	createRepo(t, ns, "gitops", repoURL)
	waitSynced(t, ns, "gitops", c1)
	mustAddon(t, ns, "b")

	stale := getRepo(t, ns, "gitops")
	syncer := &controller.AddonRepositoryReconciler{Client: env.client, Notifier: notifier}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}
	// A sync of a new commit writes the status, so that stale no longer
	// holds the repository's last write.
	c2 := w.Write("addons/c.yaml", "name: c\nhelm: {repo: https://x, chart: c}\n").CommitAndPush("c")
	if _, err := syncer.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, ns, "gitops", c2)

	w.Write("addons/x.yaml", "name: x\nhelm: {repo: https://x, chart: x}\n")
	c3 := w.Remove("addons/b.yaml").CommitAndPush("remove b, fix x")
	syncer.Client = &staleRepoOnce{Client: env.client, repo: stale}
	if res, err := syncer.Reconcile(ctx, req); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("the sync whose status write was refused: %+v, %v; want a retry", res, err)
	}
	if _, err := getAddon(t, ns, "b"); err == nil {
		t.Fatal("b was not deleted")
	}
	if _, err := syncer.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	r := getRepo(t, ns, "gitops")
	ready := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
	if r.Status.LastSyncedCommit != c3 || !strings.Contains(ready.Message, "deleted 1 Addons") || !strings.Contains(ready.Message, ": b (") {
		t.Fatalf("synced %s; Ready %q: want %s, naming b's deletion", r.Status.LastSyncedCommit, ready.Message, c3)
	}
	eventually(t, 20*time.Second, "the clean sync posted", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(posted) == 0 {
			return errors.New("nothing posted")
		}
		return nil
	})

	if _, err := syncer.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	r = getRepo(t, ns, "gitops")
	if ready := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady); strings.Contains(ready.Message, "deleted") {
		t.Fatalf("the sync after the one that named it still names the deletion: %q", ready.Message)
	}
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 1 || posted[0].Reason != "Synced" || !strings.Contains(posted[0].Message, "deleted 1 Addons") {
		t.Fatalf("posted %+v; want one Synced event that names b's deletion", posted)
	}
}

// laggingList is a client whose lists miss one Addon, as a cache that has
// not seen it yet does; everything else is the API server's.
type laggingList struct {
	client.Client
	hide string
}

func (c laggingList) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*capstanv1.AddonList); ok {
		kept := l.Items[:0]
		for _, a := range l.Items {
			if a.Name != c.hide {
				kept = append(kept, a)
			}
		}
		l.Items = kept
	}
	return nil
}

// TestSyncerTakesNoAddonItsCacheMissed: an Addon made by hand a moment
// before a sync, which the syncer's cache has not seen yet, is not taken
// over by the repository that defines the same name: it is reported, and
// left as it was.
func TestSyncerTakesNoAddonItsCacheMissed(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-lag")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("addons/grafana.yaml", "name: grafana\nhelm: {repo: https://x, chart: grafana, version: 2.0.0}\n").CommitAndPush("grafana")
	mine := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grafana"},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: "https://charts.example.com", Name: "grafana", Version: "1.0.0"}}}
	if err := env.client.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// The cluster's syncer must not get there first.
	createRepo(t, ns, "gitops", url, func(r *capstanv1.AddonRepository) { r.Spec.Interval = &metav1.Duration{Duration: time.Hour} })
	lagging := &controller.AddonRepositoryReconciler{Client: laggingList{Client: env.client, hide: "grafana"}}
	if _, err := lagging.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	got := mustAddon(t, ns, "grafana")
	if got.Labels[gitops.ManagedByGitLabel] != "" || got.Spec.Chart.Version != "1.0.0" {
		t.Fatalf("the hand-made Addon was taken over: labels %v, version %s", got.Labels, got.Spec.Chart.Version)
	}
	if !hasInvalid(getRepo(t, ns, "gitops"), "addons/grafana.yaml") {
		t.Fatalf("the clash is not reported: %+v", getRepo(t, ns, "gitops").Status.InvalidFiles)
	}
}

// shardView is a client whose Addon lists hold only what a label selector
// matches, as a sharded controller's cache does; everything else is the
// API server's.
type shardView struct {
	client.Client
	selector labels.Selector
}

func (c shardView) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*capstanv1.AddonList); ok {
		kept := l.Items[:0]
		for _, a := range l.Items {
			if c.selector.Matches(labels.Set(a.Labels)) {
				kept = append(kept, a)
			}
		}
		l.Items = kept
	}
	return nil
}

// TestSyncerDeletesAHandShardedAddon: a repository in no shard, synced by
// the main controller (!capstan.dev/shard), defines dash, which a person
// put in a shard by hand. Once dash's file is deleted, the main syncer
// deletes it, though its cache does not hold it: no other syncer would,
// since the shard's does not hold the repository. kuma, still defined,
// stays.
func TestSyncerDeletesAHandShardedAddon(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-handshard")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma}\n").
		Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
		CommitAndPush("two add-ons")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)
	dash := mustAddon(t, ns, "dash")
	patch := client.MergeFrom(dash.DeepCopy())
	dash.Labels[gitops.ShardLabel] = "by-hand"
	if err := env.client.Patch(ctx, dash, patch); err != nil {
		t.Fatal(err)
	}
	// NOTE: the cluster's syncer reads the repository again in an hour:
	// only the main controller's syncer below sees the commit.
	w.Remove("addons/dash.yaml").CommitAndPush("no dash")

	notSharded, err := labels.Parse("!" + gitops.ShardLabel)
	if err != nil {
		t.Fatal(err)
	}
	mainSyncer := &controller.AddonRepositoryReconciler{Client: shardView{Client: env.client, selector: notSharded}, APIReader: env.client}
	if _, err := mainSyncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	switch a, err := getAddon(t, ns, "dash"); {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case a.DeletionTimestamp == nil:
		t.Fatalf("the hand-sharded Addon whose file was deleted is still there, in shard %q", a.Labels[gitops.ShardLabel])
	}
	mustAddon(t, ns, "kuma")
}

// TestIntervalHasAFloor: the API refuses an interval that would read the
// repository in a hot loop, and says why.
func TestIntervalHasAFloor(t *testing.T) {
	needCluster(t)
	ns := newNamespace(t, "gitops-interval")
	r := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fast"},
		Spec: capstanv1.AddonRepositorySpec{URL: "https://127.0.0.1/x.git", Interval: &metav1.Duration{Duration: time.Millisecond}}}
	// NOTE: dry runs: a repository read every second is left behind.
	err := env.client.Create(context.Background(), r, client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.interval must be at least 1s") {
		t.Fatalf("interval 1ms: %v", err)
	}
	r.Spec.Interval.Duration = time.Second
	if err := env.client.Create(context.Background(), r, client.DryRunAll); err != nil {
		t.Fatalf("interval 1s: %v", err)
	}
}

// TestSyncerSuspended: while an AddonRepository is suspended, the syncer
// neither reads it nor applies or deletes an Addon, so a change made in
// the cluster during an incident stays; resuming syncs at once, and puts
// git's version back.
func TestSyncerSuspended(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-suspend")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma, version: 1.0.0}\n").
		Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
		CommitAndPush("two add-ons")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)

	patchRepo(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.Suspend = true })
	eventually(t, 10*time.Second, "the repository reported suspended", func() error {
		c := meta.FindStatusCondition(getRepo(t, ns, "gitops").Status.Conditions, capstanv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonSuspended {
			return fmt.Errorf("Ready: %+v", c)
		}
		return nil
	})
	kuma := mustAddon(t, ns, "kuma")
	kuma.Spec.Chart.Version = "0.9.0"
	if err := env.client.Update(ctx, kuma); err != nil {
		t.Fatal(err)
	}
	c2 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma, version: 2.0.0}\n").
		Remove("addons/dash.yaml").CommitAndPush("kuma 2, no dash")
	listings := srv.Listings()
	trigger(t, ns, "gitops")
	trigger(t, ns, "gitops")
	time.Sleep(time.Second)
	if n := srv.Listings() - listings; n != 0 {
		t.Fatalf("a suspended repository was read %d times", n)
	}
	if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit != c1 {
		t.Fatalf("a suspended repository synced %s", r.Status.LastSyncedCommit)
	}
	if v := mustAddon(t, ns, "kuma").Spec.Chart.Version; v != "0.9.0" {
		t.Fatalf("the change made in the cluster was undone: version %s", v)
	}
	mustAddon(t, ns, "dash")

	// No trigger: the resume itself syncs, long before the hour's interval.
	patchRepo(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.Suspend = false })
	waitSynced(t, ns, "gitops", c2)
	if v := mustAddon(t, ns, "kuma").Spec.Chart.Version; v != "2.0.0" {
		t.Fatalf("after the resume: version %s, want git's 2.0.0", v)
	}
	eventually(t, 10*time.Second, "dash deleted", func() error {
		if _, err := getAddon(t, ns, "dash"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("dash: %v", err)
		}
		return nil
	})
}

// TestSyncerResumeAppliesTheWholeFile: fields that others set in the
// cluster while the repository was suspended, which its file does not set
// (spec.suspend by `capstan addon suspend`, a key of spec.values and
// manualSync by an edit), are gone once it is resumed: git's file is the
// whole spec. An approval written in the cluster, and fields the
// definition format has no key for (healthTimeout, allowUnsafeCRDChanges),
// which git does not hold, stay; and the next sync writes nothing.
func TestSyncerResumeAppliesTheWholeFile(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-whole")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma, version: 1.0.0}\nvalues: {replicas: 1}\n").
		CommitAndPush("kuma")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)

	patchRepo(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.Suspend = true })
	eventually(t, 10*time.Second, "the repository reported suspended", func() error {
		c := meta.FindStatusCondition(getRepo(t, ns, "gitops").Status.Conditions, capstanv1.ConditionReady)
		if c == nil || c.Reason != controller.ReasonSuspended {
			return fmt.Errorf("Ready: %+v", c)
		}
		return nil
	})
	key := client.ObjectKey{Namespace: ns, Name: "kuma"}
	if err := addons.SetSuspend(ctx, env.client, key, true); err != nil {
		t.Fatal(err)
	}
	kuma := mustAddon(t, ns, "kuma")
	edit := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"values":{"extra":"x"},"manualSync":true}}`))
	if err := env.client.Patch(ctx, kuma, edit, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	approve := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"syncRequest":5,"approvedPlan":"`+approved+`"}}`))
	if err := env.client.Patch(ctx, kuma, approve, client.FieldOwner("capstan-cli")); err != nil {
		t.Fatal(err)
	}
	// NOTE: fields the definition format has no key for: only the
	// cluster holds them, as docs/crds.md says to patch
	// allowUnsafeCRDChanges.
	unheld := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"healthTimeout":"7m","allowUnsafeCRDChanges":true}}`))
	if err := env.client.Patch(ctx, kuma, unheld, client.FieldOwner("kubectl-patch")); err != nil {
		t.Fatal(err)
	}
	c2 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma, version: 2.0.0}\nvalues: {replicas: 1}\n").
		CommitAndPush("kuma 2")

	patchRepo(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.Suspend = false })
	repo := waitSynced(t, ns, "gitops", c2)
	kuma = mustAddon(t, ns, "kuma")
	switch s := kuma.Spec; {
	case s.Suspend || s.ManualSync:
		t.Errorf("fields set in the cluster stayed after the resume: suspend %v, manualSync %v", s.Suspend, s.ManualSync)
	case string(s.Values.Raw) != `{"replicas":1}`:
		t.Errorf("values %s, want git's {\"replicas\":1}", s.Values.Raw)
	case s.Chart.Version != "2.0.0":
		t.Errorf("version %s, want git's 2.0.0", s.Chart.Version)
	case s.SyncRequest != 5 || s.ApprovedPlan != approved:
		t.Errorf("the approval made in the cluster was lost: %d %q", s.SyncRequest, s.ApprovedPlan)
	case !s.AllowUnsafeCRDChanges || s.HealthTimeout == nil || s.HealthTimeout.Duration != 7*time.Minute:
		t.Errorf("fields the file cannot hold, set in the cluster, were lost: allowUnsafeCRDChanges %v, healthTimeout %v", s.AllowUnsafeCRDChanges, s.HealthTimeout)
	}

	// The Addon now matches: a sync writes nothing.
	rv := kuma.ResourceVersion
	time.Sleep(1100 * time.Millisecond)
	trigger(t, ns, "gitops")
	eventually(t, 10*time.Second, "synced again", func() error {
		if r := getRepo(t, ns, "gitops"); r.Status.LastSyncTime.Equal(repo.Status.LastSyncTime) {
			return fmt.Errorf("last sync still %s", r.Status.LastSyncTime)
		}
		return nil
	})
	if got := mustAddon(t, ns, "kuma").ResourceVersion; got != rv {
		t.Errorf("a sync with nothing to change wrote the Addon: resourceVersion %s, then %s", rv, got)
	}
}

// changeOnDelete is a client that makes a change to an Addon, with the API
// server's client, just before the syncer's first delete of it: what a
// person may do between the syncer's list and its delete.
type changeOnDelete struct {
	client.Client
	name   string
	change func(*capstanv1.Addon)
	done   *bool
}

func (c changeOnDelete) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if a, ok := obj.(*capstanv1.Addon); ok && a.Name == c.name && !*c.done {
		*c.done = true
		live := &capstanv1.Addon{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), live); err != nil {
			return err
		}
		patch := client.MergeFrom(live.DeepCopy())
		c.change(live)
		if err := c.Patch(ctx, live, patch); err != nil {
			return err
		}
	}
	return c.Client.Delete(ctx, obj, opts...)
}

// TestSyncerPruneSparesAnAddonMovedByHand: an Addon whose file left git
// and that a person relabels to another repository after the syncer
// listed it is not deleted by the old repository; one that some other
// write changed in between, and is still the repository's, is.
func TestSyncerPruneSparesAnAddonMovedByHand(t *testing.T) {
	needCluster(t)
	for _, tc := range []struct {
		name    string
		change  func(*capstanv1.Addon)
		deleted bool
	}{
		{"relabelled", func(a *capstanv1.Addon) { a.Labels[gitops.ManagedByGitLabel] = "other" }, false},
		{"annotated", func(a *capstanv1.Addon) { a.Annotations["example.com/note"] = "x" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t, "gitops-moved")
			srv := gitserver.Start(t)
			url := srv.Create(t, "gitops")
			w := gitserver.Clone(t, url)
			c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma}\n").
				Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
				CommitAndPush("two add-ons")
			createRepo(t, ns, "gitops", url)
			waitSynced(t, ns, "gitops", c1)
			// NOTE: the cluster's syncer reads the repository again in an
			// hour: only the syncer below sees the commit.
			c2 := w.Remove("addons/dash.yaml").CommitAndPush("no dash")

			done := false
			syncer := &controller.AddonRepositoryReconciler{Client: changeOnDelete{Client: env.client, name: "dash", change: tc.change, done: &done}, APIReader: env.client}
			if _, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}); err != nil {
				t.Fatal(err)
			}
			if !done {
				t.Fatal("the syncer deleted no dash")
			}
			if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit != c2 {
				t.Fatalf("not synced: %+v", r.Status.Conditions)
			}
			switch a, err := getAddon(t, ns, "dash"); {
			case apierrors.IsNotFound(err) || err == nil && a.DeletionTimestamp != nil:
				if !tc.deleted {
					t.Fatal("the Addon moved to another repository by hand was deleted by the old one")
				}
			case err != nil:
				t.Fatal(err)
			case tc.deleted:
				t.Fatalf("the repository's Addon whose file left git is still there: labels %v", a.Labels)
			case a.Labels[gitops.ManagedByGitLabel] != "other":
				t.Fatalf("labels %v", a.Labels)
			}
			mustAddon(t, ns, "kuma")
		})
	}
}

// TestSyncerReportsASpecTheAPIServerDoesNotKeep: a mutating admission
// policy that changes a field the file sets makes the Addon differ from
// its file after every write. The syncer does not write it again at every
// sync; it lists the file as invalid, naming the field, until the file
// changes.
func TestSyncerReportsASpecTheAPIServerDoesNotKeep(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-unkept")
	never := admissionregistrationv1.NeverReinvocationPolicy
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"capstan.dev"}, APIVersions: []string{"*"}, Resources: []string{"addons"}},
				},
			}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{spec: Object.spec{title: "Set by a policy"}}`}}},
			ReinvocationPolicy: never,
			FailurePolicy:      &fail,
		},
	}
	switch err := env.client.Create(ctx, policy); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		t.Skipf("the API server serves no MutatingAdmissionPolicy: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), policy) })
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}},
	}
	if err := env.client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), binding) })
	// NOTE: the API server loads a policy a moment after it is made.
	eventually(t, 30*time.Second, "the policy changes Addons", func() error {
		probe := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
			Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: "https://x", Name: "kuma", Version: "1.0.0"}}}
		if err := env.client.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Spec.Title != "Set by a policy" {
			return fmt.Errorf("title %q", probe.Spec.Title)
		}
		return nil
	})

	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\ntitle: Kuma\nhelm: {repo: https://x, chart: kuma, version: 1.0.0}\n").CommitAndPush("kuma")
	createRepo(t, ns, "gitops", url)
	repo := waitSynced(t, ns, "gitops", c1)
	unkept := func(r *capstanv1.AddonRepository) error {
		if len(r.Status.InvalidFiles) != 1 || r.Status.InvalidFiles[0].Path != "addons/kuma.yaml" ||
			!strings.Contains(r.Status.InvalidFiles[0].Message, "the API server does not keep spec.title of the Addon") {
			return fmt.Errorf("invalid files %+v", r.Status.InvalidFiles)
		}
		return nil
	}
	if err := unkept(repo); err != nil {
		t.Fatalf("the file's spec that the API server does not keep is not reported: %v", err)
	}
	kuma := mustAddon(t, ns, "kuma")
	if kuma.Spec.Title != "Set by a policy" || kuma.Spec.Chart.Version != "1.0.0" {
		t.Fatalf("title %q, version %q", kuma.Spec.Title, kuma.Spec.Chart.Version)
	}

	// A sync of the same commit writes nothing, and still reports it.
	time.Sleep(1100 * time.Millisecond)
	trigger(t, ns, "gitops")
	eventually(t, 10*time.Second, "synced again", func() error {
		r := getRepo(t, ns, "gitops")
		if r.Status.LastSyncTime.Equal(repo.Status.LastSyncTime) {
			return fmt.Errorf("last sync still %s", r.Status.LastSyncTime)
		}
		return unkept(r)
	})
	if got := mustAddon(t, ns, "kuma"); got.ResourceVersion != kuma.ResourceVersion {
		t.Errorf("the Addon was written again: resourceVersion %s, then %s", kuma.ResourceVersion, got.ResourceVersion)
	}

	// A new file is written, and reported as long as the policy changes it.
	c2 := w.Write("addons/kuma.yaml", "name: kuma\ntitle: Kuma\nhelm: {repo: https://x, chart: kuma, version: 2.0.0}\n").CommitAndPush("kuma 2")
	trigger(t, ns, "gitops")
	if err := unkept(waitSynced(t, ns, "gitops", c2)); err != nil {
		t.Error(err)
	}
	if v := mustAddon(t, ns, "kuma").Spec.Chart.Version; v != "2.0.0" {
		t.Errorf("version %s after a new commit, want 2.0.0", v)
	}
}

// TestSyncerBoundsInvalidFiles checks that a definition file with a
// problem on every line still lets the sync write its status, with the
// count of every problem it leaves out, the parser's and its own.
func TestSyncerBoundsInvalidFiles(t *testing.T) {
	needCluster(t)
	ns := newNamespace(t, "gitops-invalid")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)

	var keys strings.Builder
	keys.WriteString("name: junk\nhelm: {repo: https://x, chart: c}\n")
	for i := 0; keys.Len() < gitops.MaxFileSize-100; i++ {
		fmt.Fprintf(&keys, "k%d: 1\n", i)
	}
	c1 := w.Write("addons/umami.yaml", umami).
		Write("umami/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: umami}\n").
		Write("addons/junk.yaml", keys.String()).
		CommitAndPush("a file of unknown keys")
	createRepo(t, ns, "gitops", url)
	repo := waitSynced(t, ns, "gitops", c1)

	if repo.Status.Addons != 1 || repo.Status.InvalidFileCount != 1 || len(repo.Status.InvalidFiles) != 1 {
		t.Fatalf("status: addons %d, invalid files %d: %+v", repo.Status.Addons, repo.Status.InvalidFileCount, repo.Status.InvalidFiles)
	}
	msg := repo.Status.InvalidFiles[0].Message
	more := fmt.Sprintf("\naddons/junk.yaml: and %d more problems", strings.Count(keys.String(), "\n")-2-10)
	if len(msg) > 8<<10 || !strings.HasPrefix(msg, "addons/junk.yaml:3: k0: unknown field") || !strings.HasSuffix(msg, more) {
		t.Errorf("message of %d bytes: %.300q ... %q", len(msg), msg, msg[max(0, len(msg)-100):])
	}
	if c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady); c == nil || c.Reason != controller.ReasonInvalidFiles {
		t.Fatalf("Ready: %+v", c)
	}
}

// setSpec changes a repository's spec, again when the syncer's status
// write came first.
func setSpec(t testing.TB, ns, name string, change func(*capstanv1.AddonRepository)) {
	t.Helper()
	eventually(t, 10*time.Second, "the spec changed", func() error {
		r := getRepo(t, ns, name)
		change(r)
		return env.client.Update(context.Background(), r)
	})
}

// TestSyncerRefusesAFolderTooLarge: a commit whose definition files hold
// more than gitops.MaxFolderSize in all (each under the per-file limit,
// and valid) is refused before any is parsed: Ready says why and what to
// do, and no Addon is created, changed or deleted, not even the one whose
// file the commit removed. Once the large files are gone, it syncs.
func TestSyncerRefusesAFolderTooLarge(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-folder-size")
	srv := gitserver.Start(t)
	repoURL := srv.Create(t, "gitops")
	w := gitserver.Clone(t, repoURL)
	c1 := w.Write("addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: a}\n").
		Write("addons/b.yaml", "name: b\nhelm: {repo: https://x, chart: b}\n").CommitAndPush("a, b")
	createRepo(t, ns, "gitops", repoURL)
	waitSynced(t, ns, "gitops", c1)
	before := mustAddon(t, ns, "a")

	var values strings.Builder
	values.WriteString("values:\n")
	for i := 0; values.Len() < gitops.MaxFileSize-4096; i++ {
		fmt.Fprintf(&values, "  k%d: [1, 2, 3]\n", i)
	}
	w.Remove("addons/b.yaml").Write("addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: a, version: 2.0.0}\n")
	n := gitops.MaxFolderSize/gitops.MaxFileSize + 1
	for i := range n {
		w.Write(fmt.Sprintf("addons/big%d.yaml", i), fmt.Sprintf("name: big%d\nhelm: {repo: https://x, chart: big}\n%s", i, values.String()))
	}
	w.CommitAndPush("b leaves; a changes; large definitions")
	syncer := &controller.AddonRepositoryReconciler{Client: env.client}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}}
	if _, err := syncer.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	r := getRepo(t, ns, "gitops")
	ready := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
	if r.Status.LastSyncedCommit != c1 || ready.Status != metav1.ConditionFalse || ready.Reason != controller.ReasonUnreadable ||
		!strings.Contains(ready.Message, fmt.Sprintf(`the %d definition files of folder "addons" hold`, n+1)) ||
		!strings.Contains(ready.Message, fmt.Sprintf("more than the %d MiB Capstan reads of one folder", gitops.MaxFolderSize>>20)) || !strings.HasSuffix(ready.Message, "nothing was changed") {
		t.Fatalf("synced %s; Ready %+v; want %s kept and the folder refused for its size", r.Status.LastSyncedCommit, ready, c1)
	}
	if b := mustAddon(t, ns, "b"); b.DeletionTimestamp != nil {
		t.Fatal("b was deleted by a commit that was refused")
	}
	if a := mustAddon(t, ns, "a"); a.Generation != before.Generation || a.Spec.Chart.Version != before.Spec.Chart.Version {
		t.Fatalf("a changed by a commit that was refused: generation %d, chart %+v", a.Generation, a.Spec.Chart)
	}
	var list capstanv1.AddonList
	if err := env.client.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 2 {
		t.Fatalf("%d Addons (%v); want a and b alone", len(list.Items), err)
	}

	for i := range n {
		w.Remove(fmt.Sprintf("addons/big%d.yaml", i))
	}
	c3 := w.CommitAndPush("no large definitions")
	if _, err := syncer.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit != c3 || r.Status.Addons != 1 {
		t.Fatalf("synced %s with %d Addons; want %s and a alone", r.Status.LastSyncedCommit, r.Status.Addons, c3)
	}
}

// TestSyncerPruneFalse: with spec.prune false, an Addon whose file left
// git stays as it was, label and all, and status counts it; prune true
// deletes it. prune is true when the spec leaves it out.
func TestSyncerPruneFalse(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-noprune")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma}\n").
		Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
		CommitAndPush("two add-ons")
	createRepo(t, ns, "gitops", url)
	if r := waitSynced(t, ns, "gitops", c1); r.Spec.Prune == nil || !*r.Spec.Prune {
		t.Fatalf("spec.prune left out is %v; want true", r.Spec.Prune)
	}
	setSpec(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.Prune = new(bool) })

	c2 := w.Remove("addons/dash.yaml").CommitAndPush("dash leaves git")
	trigger(t, ns, "gitops")
	r := waitSynced(t, ns, "gitops", c2)
	c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
	if r.Status.RetainedAddons != 1 || r.Status.Addons != 1 || c == nil || !strings.Contains(c.Message, "spec.prune is false") {
		t.Fatalf("retained %d, addons %d, Ready %+v; want 1 kept and said so", r.Status.RetainedAddons, r.Status.Addons, c)
	}
	if a := mustAddon(t, ns, "dash"); a.Labels[gitops.ManagedByGitLabel] != "gitops" || a.DeletionTimestamp != nil {
		t.Fatalf("the kept Addon: labels %v, deleted at %v", a.Labels, a.DeletionTimestamp)
	}

	// The last file leaves too: with prune false, nothing is deleted, so
	// nothing is refused.
	c3 := w.Remove("addons/kuma.yaml").Write("addons/README.md", "Later.\n").CommitAndPush("kuma leaves git")
	trigger(t, ns, "gitops")
	if r := waitSynced(t, ns, "gitops", c3); r.Status.RetainedAddons != 2 {
		t.Fatalf("retained %d; want 2", r.Status.RetainedAddons)
	}

	setSpec(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.Prune = nil; r.Spec.AllowEmpty = true })
	eventually(t, 10*time.Second, "the kept Addons deleted once prune is true", func() error {
		var list capstanv1.AddonList
		if err := env.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if n := len(list.Items); n != 0 {
			return fmt.Errorf("%d Addons left", n)
		}
		if n := getRepo(t, ns, "gitops").Status.RetainedAddons; n != 0 {
			return fmt.Errorf("retained %d", n)
		}
		return nil
	})
}

// TestSyncerBacksOffAnUnreadableRepository: each failed read in a row
// doubles the wait before the next, which a read that succeeds resets.
func TestSyncerBacksOffAnUnreadableRepository(t *testing.T) {
	needCluster(t)
	ns := newNamespace(t, "gitops-backoff")
	srv := gitserver.Start(t)
	url := srv.URL + "/later.git"
	createRepo(t, ns, "gitops", url, func(r *capstanv1.AddonRepository) { r.Spec.Interval = &metav1.Duration{Duration: time.Minute} })
	waitRead(t, ns, "gitops")

	fresh := &controller.AddonRepositoryReconciler{Client: env.client}
	read := func() time.Duration {
		t.Helper()
		res, err := fresh.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "gitops"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter
	}
	for _, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		if got := read(); got != want {
			t.Fatalf("after a failed read: read again in %s; want %s", got, want)
		}
	}
	srv.Create(t, "later")
	gitserver.Clone(t, url).Write("addons/README.md", "Later.\n").CommitAndPush("first")
	if got := read(); got != time.Minute {
		t.Fatalf("after a read that worked: read again in %s; want the interval", got)
	}
	if err := os.RemoveAll(filepath.Join(srv.Root, "later.git")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != time.Minute {
		t.Fatalf("after a new failure: read again in %s; want the interval", got)
	}
}

// TestSyncerRefusesAFolderChangedToNoDefinition: spec.folder changed
// from addons to docs, which holds a README alone, leaves every Addon of
// addons a stray of docs; they still count, so the change is refused as
// an emptied folder is, and nothing is deleted or synced. A copy under a
// new name still does not count.
func TestSyncerRefusesAFolderChangedToNoDefinition(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-refolder")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma}\n").
		Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
		Write("docs/README.md", "How we run add-ons.\n").
		CommitAndPush("two add-ons")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)
	dash := mustAddon(t, ns, "dash")
	copied := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dash-test", Labels: dash.Labels, Annotations: dash.Annotations},
		Spec: *dash.Spec.DeepCopy()}
	if err := env.client.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}

	patchRepo(t, ns, "gitops", func(r *capstanv1.AddonRepository) { r.Spec.Folder = "docs" })
	eventually(t, 10*time.Second, "the folder without definitions refused", func() error {
		r := getRepo(t, ns, "gitops")
		c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonEmptyRefused ||
			!strings.Contains(c.Message, `folder "docs"`) || !strings.Contains(c.Message, "manages 2 Addons") {
			return fmt.Errorf("Ready: %+v", c)
		}
		if s := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionStalled); s == nil || s.Status != metav1.ConditionTrue {
			return fmt.Errorf("Stalled: %+v", s)
		}
		return nil
	})
	if r := getRepo(t, ns, "gitops"); r.Status.LastSyncedCommit != c1 {
		t.Fatalf("last synced %s; want %s still", r.Status.LastSyncedCommit, c1)
	}
	for _, name := range []string{"kuma", "dash", "dash-test"} {
		if a := mustAddon(t, ns, name); a.DeletionTimestamp != nil {
			t.Fatalf("%s is being deleted", name)
		}
	}
}

// TestSyncerSparesACopiedAddon: an Addon copied by hand under a new name
// (kubectl get addon dash -o yaml, renamed to dash-test, applied) keeps
// the repository's label and dash's capstan.dev/git-file. No file of its
// name is in git, yet it is not the repository's to delete: the sync that
// prunes dash leaves dash-test as it is and names it in Ready's message,
// and the refusal of an empty commit does not count it.
func TestSyncerSparesACopiedAddon(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-copied")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/kuma.yaml", "name: kuma\nhelm: {repo: https://x, chart: kuma}\n").
		Write("addons/dash.yaml", "name: dash\nhelm: {repo: https://x, chart: dash}\n").
		CommitAndPush("two add-ons")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)

	dash := mustAddon(t, ns, "dash")
	copied := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dash-test", Labels: dash.Labels, Annotations: dash.Annotations},
		Spec: *dash.Spec.DeepCopy()}
	if err := env.client.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	if copied.Annotations[gitops.GitFileAnnotation] != "addons/dash.yaml" || copied.Labels[gitops.ManagedByGitLabel] != "gitops" {
		t.Fatalf("the copy: labels %v, annotations %v", copied.Labels, copied.Annotations)
	}

	c2 := w.Remove("addons/dash.yaml").CommitAndPush("no dash")
	trigger(t, ns, "gitops")
	r := waitSynced(t, ns, "gitops", c2)
	switch a, err := getAddon(t, ns, "dash-test"); {
	case apierrors.IsNotFound(err):
		t.Fatal("the copy was deleted")
	case err != nil:
		t.Fatal(err)
	case a.DeletionTimestamp != nil || a.UID != copied.UID:
		t.Fatalf("the copy was deleted: %+v", a.ObjectMeta)
	}
	if c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "dash-test (addons/dash.yaml)") || !strings.Contains(c.Message, "neither deleted nor changed") {
		t.Fatalf("Ready %+v; want the copy named", c)
	}
	switch a, err := getAddon(t, ns, "dash"); {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case a.DeletionTimestamp == nil:
		t.Fatal("dash, whose file left git, is still there")
	}

	// The last file leaves: the refusal counts kuma alone.
	c3 := w.Remove("addons/kuma.yaml").Write("addons/README.md", "Later.\n").CommitAndPush("kuma leaves git")
	trigger(t, ns, "gitops")
	eventually(t, 10*time.Second, "the empty commit refused", func() error {
		c := meta.FindStatusCondition(getRepo(t, ns, "gitops").Status.Conditions, capstanv1.ConditionReady)
		if c == nil || c.Reason != controller.ReasonEmptyRefused {
			return fmt.Errorf("Ready: %+v", c)
		}
		if !strings.Contains(c.Message, gitops.ShortCommit(c3)) || !strings.Contains(c.Message, "manages 1 Addons") {
			return fmt.Errorf("Ready's message %q; want commit %s refused with 1 Addon", c.Message, gitops.ShortCommit(c3))
		}
		return nil
	})
	mustAddon(t, ns, "kuma")
	mustAddon(t, ns, "dash-test")
}

// TestSyncerReportsAnAddonAPolicyForbids: a validating admission policy
// forbids (403, as a policy engine's webhook and an exceeded quota answer)
// the Addon of one of the folder's two files. That file is reported as
// invalid, and the sync of the rest completes, its commit recorded as
// synced.
func TestSyncerReportsAnAddonAPolicyForbids(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-forbidden")
	forbidden := metav1.StatusReasonForbidden
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"capstan.dev"}, APIVersions: []string{"*"}, Resources: []string{"addons"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: `object.metadata.name != "b"`,
				Message: "b is not allowed here", Reason: &forbidden}},
		},
	}
	if err := env.client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), policy) })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}},
	}
	if err := env.client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), binding) })
	// NOTE: the API server loads a policy a moment after it is made.
	eventually(t, 30*time.Second, "the policy forbids b", func() error {
		probe := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"},
			Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: "https://x", Name: "b", Version: "1.0.0"}}}
		if err := env.client.Create(ctx, probe, client.DryRunAll); !apierrors.IsForbidden(err) {
			return fmt.Errorf("a dry run of b: %v", err)
		}
		return nil
	})

	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	c1 := gitserver.Clone(t, url).
		Write("addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: a}\n").
		Write("addons/b.yaml", "name: b\nhelm: {repo: https://x, chart: b}\n").
		CommitAndPush("a and b")
	createRepo(t, ns, "gitops", url)
	r := waitSynced(t, ns, "gitops", c1)
	ready := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady)
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != controller.ReasonInvalidFiles:
		t.Fatalf("Ready %+v; want True, InvalidFiles", ready)
	case r.Status.Addons != 1 || !hasInvalid(r, "addons/b.yaml") || r.Status.InvalidFileCount != 1:
		t.Fatalf("%d Addons, invalid files %+v; want a, and b refused", r.Status.Addons, r.Status.InvalidFiles)
	case !strings.Contains(r.Status.InvalidFiles[0].Message, "b is not allowed here"):
		t.Fatalf("the invalid file does not say why the API server refused it: %+v", r.Status.InvalidFiles)
	}
	mustAddon(t, ns, "a")
}

// TestSyncerKeepsTheAddonOfARenamedFile: a file renamed in git with its
// content as it was (git mv a.yaml 10-a.yaml, to order the files) still
// names the add-on a, and is invalid for its new name. The Addon a is
// kept as it was, the file is reported with a word that a is kept, and a
// rename of every file of the folder deletes nothing either.
func TestSyncerKeepsTheAddonOfARenamedFile(t *testing.T) {
	needCluster(t)
	ns := newNamespace(t, "gitops-rename")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	def := func(name string) string { return "name: " + name + "\nhelm: {repo: https://x, chart: " + name + "}\n" }
	c1 := w.Write("addons/a.yaml", def("a")).Write("addons/b.yaml", def("b")).CommitAndPush("a and b")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)
	uids := map[string]types.UID{"a": mustAddon(t, ns, "a").UID, "b": mustAddon(t, ns, "b").UID}
	kept := func() {
		t.Helper()
		for name, uid := range uids {
			a, err := getAddon(t, ns, name)
			if err != nil || a.UID != uid || a.DeletionTimestamp != nil {
				t.Fatalf("Addon %s, whose file was renamed, was not kept: %v %+v", name, err, a.ObjectMeta)
			}
		}
	}

	c2 := w.Remove("addons/a.yaml").Write("addons/10-a.yaml", def("a")).CommitAndPush("order the files")
	trigger(t, ns, "gitops")
	repo := waitSynced(t, ns, "gitops", c2)
	kept()
	if len(repo.Status.InvalidFiles) != 1 || repo.Status.InvalidFiles[0].Path != "addons/10-a.yaml" ||
		!strings.Contains(repo.Status.InvalidFiles[0].Message, `an Addon "a" of this repository, if any, is kept`) {
		t.Fatalf("invalid files %+v; want addons/10-a.yaml, with a word that a is kept", repo.Status.InvalidFiles)
	}

	c3 := w.Remove("addons/b.yaml").Write("addons/20-b.yaml", def("b")).CommitAndPush("order every file")
	trigger(t, ns, "gitops")
	repo = waitSynced(t, ns, "gitops", c3)
	kept()
	if repo.Status.InvalidFileCount != 2 {
		t.Fatalf("invalid files %+v; want 10-a.yaml and 20-b.yaml", repo.Status.InvalidFiles)
	}
}

// TestSyncerDeletesAnAddonWhoseFileMovedIntoASubfolder: subfolders are
// not read, so a file moved into addons/disabled/ turns its add-on off:
// the Addon is deleted as any whose file left the folder, and Ready
// names it with that file, so that a file moved down by mistake is found.
// A file of another name in a subfolder (a chart's values) changes
// nothing.
func TestSyncerDeletesAnAddonWhoseFileMovedIntoASubfolder(t *testing.T) {
	needCluster(t)
	ns := newNamespace(t, "gitops-nested")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	def := func(name string) string { return "name: " + name + "\nhelm: {repo: https://x, chart: " + name + "}\n" }
	c1 := w.Write("addons/a.yaml", def("a")).Write("addons/b.yaml", def("b")).Write("addons/a/values.yaml", "replicas: 2\n").CommitAndPush("a and b")
	createRepo(t, ns, "gitops", url)
	waitSynced(t, ns, "gitops", c1)
	uid := mustAddon(t, ns, "a").UID

	c2 := w.Remove("addons/b.yaml").Write("addons/disabled/b.yaml", def("b")).CommitAndPush("turn b off")
	trigger(t, ns, "gitops")
	repo := waitSynced(t, ns, "gitops", c2)
	if b, err := getAddon(t, ns, "b"); !apierrors.IsNotFound(err) && (err != nil || b.DeletionTimestamp == nil) {
		t.Fatalf("b, whose file moved into addons/disabled/, is kept: %v", err)
	}
	if c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady); c == nil ||
		!strings.Contains(c.Message, "deleted 1 Addons whose files left git") ||
		!strings.Contains(c.Message, "of those, 1 have a file of their name in a subfolder, which is not read: b (addons/disabled/b.yaml)") {
		t.Fatalf("Ready: %+v; want it to name b, deleted, and its file", c)
	}
	if a, err := getAddon(t, ns, "a"); err != nil || a.UID != uid || a.DeletionTimestamp != nil {
		t.Fatalf("a, whose file is in the folder, was not kept: %v %+v", err, a.ObjectMeta)
	}
}
