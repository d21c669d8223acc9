package server_test

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/catalog"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// TestPageFlowsWithTheController drives the page in a real headless
// Chromium while the real controller, a process of its own, plans and
// applies on the local control plane: an editor adds "any Helm chart" from
// the catalog with manual sync, installs its plan and sees it reach Synced;
// edits a value through the chart's schema form, sees the diff, approves it
// and sees the live object change; and removes it with uninstall. The
// secret input never appears in any page.
func TestPageFlowsWithTheController(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch", "delete"),
		rbacPolicy("", "secrets", "create"), rbacPolicy("", "events", "list"))
	dir := t.TempDir()
	bin, err := testcontroller.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	testcontroller.Start(t, cluster, bin, dir, "--ca-file="+writeCA(t, dir), "--fetch-allow=127.0.0.1/32",
		"--resync-interval=1h", "--drift-delay=1s")
	const password = "flow-secret-Qz81"
	ctx := browser(t)
	signIn(t, ctx, editor)
	addon := "/addons/" + ns + "/flow"
	noSecret := func(when string) {
		t.Helper()
		if html := value(t, ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(html, password) {
			t.Fatalf("%s: the page shows the secret input", when)
		}
	}

	run(t, ctx, "adding any Helm chart from the catalog",
		chromedp.Navigate(api.URL+"/catalog"),
		chromedp.Click(`//a[text()="Add Any Helm chart"]`),
		chromedp.WaitVisible(chromedp.ID("chart")),
		chromedp.SetValue(chromedp.ID("chart"), chartServer.URL+"/form-1.0.0.tgz"),
		chromedp.SetValue(chromedp.ID("namespace"), ns),
		chromedp.SetValue(chromedp.ID("name"), "flow"),
		chromedp.Submit(chromedp.ID("chart")),
		chromedp.WaitVisible(chromedp.ID("f-greeting")),
		chromedp.SetValue(chromedp.ID("f-greeting"), "hi"),
		chromedp.SetValue(chromedp.ID("f-auth-password"), password),
		chromedp.Click(`//input[@name="manualSync"]`),
		chromedp.Click(`//button[text()="Add, suspended"]`),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Added")]`),
	)
	noSecret("after adding")
	reloadUntil(t, ctx, addon, `//button[text()="Install this plan"]`, "the controller's plan of the new add-on")
	run(t, ctx, "installing the plan",
		chromedp.Click(`//button[text()="Install this plan"]`),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Installing")]`),
	)
	// The live status, without a reload.
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(waitCtx, chromedp.WaitVisible(`//span[@data-field="phase" and text()="Synced"]`)); err != nil {
		t.Fatalf("the page did not show Synced: %v", err)
	}
	// The conditions follow too: the page was drawn while the plan waited.
	if err := chromedp.Do(waitCtx, chromedp.WaitVisible(`//tbody[@data-field="conditions"]/tr[td[1]="Ready" and td[2]="True" and td[3]="Synced"]`)); err != nil {
		t.Fatalf("the page's conditions did not follow the sync: %v", err)
	}
	if got := greeting(t, ns); got != "hi" {
		t.Fatalf("the live ConfigMap says %q; want the form's value", got)
	}

	run(t, ctx, "editing a value through the schema form",
		chromedp.Navigate(api.URL+addon),
		chromedp.Click(`//a[text()="Edit values"]`),
		chromedp.WaitVisible(chromedp.ID("f-greeting")),
	)
	if shown := value(t, ctx, chromedp.Evaluate[string](`document.getElementById("f-greeting").value`)); shown != "hi" {
		t.Errorf("the edit form shows greeting %q; want the value the add-on has", shown)
	}
	noSecret("on the edit form")
	run(t, ctx, "saving the edit",
		chromedp.SetValue(chromedp.ID("f-greeting"), "hello again"),
		chromedp.Click(`//button[text()="Save values"]`),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Values changed")]`),
	)
	reloadUntil(t, ctx, addon, `//pre[contains(@class,"diff")]/span[contains(text(),"hello again")]`, "the plan's diff of the edit")
	if got := greeting(t, ns); got != "hi" {
		t.Fatalf("the edit was applied before it was approved: the ConfigMap says %q", got)
	}
	screenshot(t, ctx, "addon-diff.png")
	run(t, ctx, "approving the plan",
		chromedp.Click(`//button[text()="Approve this plan"]`),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Approved")]`),
	)
	if err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return greeting(t, ns) == "hello again", nil
	}); err != nil {
		t.Fatalf("the approved edit did not reach the live ConfigMap: %q", greeting(t, ns))
	}
	noSecret("after the approval")

	// NOTE: a restricted add-on, which removal uninstalls: the form says
	// so, offers no box, and the controller does as it says.
	run(t, ctx, "removing with uninstall",
		chromedp.Navigate(api.URL+addon),
		chromedp.WaitVisible(`//form[@class="remove"]//p[contains(text(),"Removing uninstalls the software")]`),
		chromedp.Click(`//button[text()="Remove"]`),
		chromedp.WaitVisible(`//h1[text()="Add-ons"]`),
	)
	if err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flow"}, &corev1.ConfigMap{})
		gone := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flow"}, &capstanv1.Addon{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(gone), nil
	}); err != nil {
		t.Fatal("the removal with uninstall left the Addon or its ConfigMap")
	}
}

// reloadUntil reloads page until the element at xpath shows, for at most
// 90 s: the controller writes plans while the page is open.
func reloadUntil(t *testing.T, ctx context.Context, page, xpath, what string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		run(t, ctx, "loading "+page, chromedp.Navigate(api.URL+page), chromedp.WaitReady("body"))
		n := value(t, ctx, chromedp.Evaluate[int](`document.evaluate(`+jsString(xpath)+`, document, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null).snapshotLength`))
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			text := value(t, ctx, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("waited 90 s for %s; the page says:\n%s", what, text)
		}
		time.Sleep(time.Second)
	}
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// greeting reads the chart's ConfigMap, or "" when it does not exist.
func greeting(t *testing.T, ns string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "flow"}, cm); err != nil {
		return ""
	}
	return cm.Data["greeting"]
}

// writeCA writes the chart server's certificate, for the controller's
// --ca-file.
func writeCA(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "charts-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: chartServer.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPageGitManagedEditIsACommit edits the values of an add-on that git
// manages through its chart's schema form: the page commits the
// definition, with the editor as the author, and the syncer applies it.
func TestPageGitManagedEditIsACommit(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	git := gitserver.Start(t)
	url := git.Create(t, "ops")
	def := "# kept: a comment in git\nname: form\nhelm:\n  url: " + chartServer.URL + "/form-1.0.0.tgz\nvalues:\n  greeting: hi\n"
	gitserver.Clone(t, url).Write("addons/form.yaml", def).CommitAndPush("form")
	if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: url}}); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "form", Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"}, Values: jsonValues(`{"greeting":"hi"}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	page := browser(t)
	signIn(t, page, editor)
	run(t, page, "editing through the form",
		chromedp.Navigate(api.URL+"/addons/"+ns+"/form"),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"managed by git")]`),
		chromedp.Click(`//a[text()="Edit values"]`),
		chromedp.WaitVisible(chromedp.ID("f-greeting")),
		chromedp.SetValue(chromedp.ID("f-greeting"), "from the page"),
		chromedp.Click(`//button[text()="Save values"]`),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Committed")]`),
	)
	clone := gitserver.Clone(t, url)
	if l := clone.Git("log", "-1", "--format=%an|%s"); !strings.Contains(l, "system:serviceaccount:"+ns+":editor|") || !strings.Contains(l, "form") {
		t.Errorf("the commit does not name the editor: %s", l)
	}
	got := clone.Git("show", "HEAD:addons/form.yaml")
	if !strings.Contains(got, "greeting: from the page") || !strings.Contains(got, "# kept: a comment in git") {
		t.Errorf("the committed definition:\n%s", got)
	}
	synced := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(a), synced); err != nil || !strings.Contains(string(synced.Spec.Values.Raw), "from the page") {
		t.Errorf("the syncer did not apply the commit: %v, values %s", err, synced.Spec.Values.Raw)
	}
}

// TestCatalogCommitsInATrustedNamespace adds an operator's catalog entry
// in the controller's namespace, which is trusted and holds a gitops
// repository: the add-on is committed there as a definition whose objects
// go to the entry's namespace, and the syncer creates the Addon. The
// entry's chart is served on loopback: a commit's values are checked
// against its chart, and one whose chart cannot be fetched (the built-in
// Longhorn's, at a public name the tests' guard refuses) is refused
// (TestSecretValuesCheckIsNeverSkippedWhenBusy).
func TestCatalogCommitsInATrustedNamespace(t *testing.T) {
	ctx := context.Background()
	git := gitserver.Start(t)
	url := git.Create(t, "platform")
	gitserver.Clone(t, url).Write("README.md", "platform\n").CommitAndPush("start")
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-platform"},
		Spec: capstanv1.AddonRepositorySpec{URL: url}}
	if err := admin.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	entry := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-platform-form", Labels: map[string]string{catalog.Label: "true"}},
		Data: map[string]string{catalog.EntryKey: "id: platform-form\ntitle: Form\nnamespace: form-system\nchart: {url: '" + chartServer.URL + "/form-1.0.0.tgz'}\n" +
			"fields: [{path: greeting, label: Greeting, type: string}]\n"},
	}
	if err := admin.Create(ctx, entry); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Delete(ctx, repo)
		_ = admin.Delete(ctx, entry)
		_ = admin.Delete(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "platform-form"}})
	})
	// A server of its own reads the catalog now, not the tests' server's
	// catalog of up to 10 s ago.
	base := serve(t, newServer())
	platform := user(t, install.Namespace, "catalog-admin", addonRule("get", "list", "create", "update", "patch"))
	page := browser(t)
	run(t, page, "signing in",
		chromedp.Navigate(base+"/signin"),
		chromedp.SetValue(chromedp.ID("token"), platform),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(`//h1[text()="Add-ons"]`),
	)
	run(t, page, "adding the entry to the trusted namespace",
		chromedp.Navigate(base+"/catalog/platform-form"),
		chromedp.WaitVisible(chromedp.ID("f-greeting")),
		chromedp.SetValue(chromedp.ID("namespace"), install.Namespace),
		chromedp.SetValue(chromedp.ID("f-greeting"), "hi"),
		chromedp.Click(`//button[text()="Add, suspended"]`),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Committed")]`),
	)
	clone := gitserver.Clone(t, url)
	got := clone.Git("show", "HEAD:addons/platform-form.yaml")
	for _, want := range []string{"name: platform-form", "namespace: form-system", "createNamespace: true", "url: " + chartServer.URL + "/form-1.0.0.tgz", "greeting: hi"} {
		if !strings.Contains(got, want) {
			t.Errorf("the committed definition lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "suspend") {
		t.Errorf("a committed add-on is meant to install; it was committed suspended:\n%s", got)
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "platform-form"}, a); err != nil || a.Labels[gitops.ManagedByGitLabel] != repo.Name {
		t.Errorf("the syncer did not create the Addon from the commit: %v, labels %v", err, a.Labels)
	}
}

// TestCatalogCommitFailureKeepsTheForm commits a catalog entry to a gitops
// repository that the git server does not have: the page says why, keeps
// what was filled in, and nothing is created.
func TestCatalogCommitFailureKeepsTheForm(t *testing.T) {
	ctx := context.Background()
	git := gitserver.Start(t)
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-gone"},
		Spec: capstanv1.AddonRepositorySpec{URL: git.URL + "/gone.git"}}
	if err := admin.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, repo) })
	platform := user(t, install.Namespace, "catalog-fails", addonRule("get", "list", "create", "update", "patch"))
	page := browser(t)
	signIn(t, page, platform)
	run(t, page, "adding Longhorn to a repository that is gone",
		chromedp.Navigate(api.URL+"/catalog/longhorn"),
		chromedp.WaitVisible(chromedp.ID("f-persistence-defaultClassReplicaCount")),
		chromedp.SetValue(chromedp.ID("namespace"), install.Namespace),
		chromedp.SetValue(chromedp.ID("f-persistence-defaultClassReplicaCount"), "3"),
		chromedp.SetValue(chromedp.ID("yaml"), "persistence:\n  reclaimPolicy: Retain\n"),
		chromedp.Click(`//button[text()="Add, suspended"]`),
		chromedp.WaitVisible(`//*[contains(@class,"error")]`),
	)
	kept := value(t, page, chromedp.Evaluate[string](`document.getElementById("f-persistence-defaultClassReplicaCount").value + "|" + document.getElementById("yaml").value + "|" + document.getElementById("namespace").value`))
	if kept != "3|persistence:\n  reclaimPolicy: Retain\n|"+install.Namespace {
		t.Errorf("the form after the failed commit holds %q; want what was filled in", kept)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "longhorn"}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Errorf("a failed commit created the Addon: %v", err)
	}
}

// TestNewFormCommitsInATrustedNamespace adds a chart link through the form
// in the controller's namespace, which is trusted and holds a gitops
// repository: as from the catalog, the add-on is committed there, not
// created in the cluster past git; a secret input, which git must not
// hold, is refused.
func TestNewFormCommitsInATrustedNamespace(t *testing.T) {
	ctx := context.Background()
	git := gitserver.Start(t)
	url := git.Create(t, "platform-new")
	gitserver.Clone(t, url).Write("README.md", "platform\n").CommitAndPush("start")
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "form-platform"},
		Spec: capstanv1.AddonRepositorySpec{URL: url}}
	if err := admin.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Delete(ctx, repo)
		_ = admin.Delete(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "linked"}})
	})
	platform := user(t, install.Namespace, "form-admin", addonRule("get", "list", "create", "update", "patch"))
	page := browser(t)
	signIn(t, page, platform)
	run(t, page, "adding a chart link with a secret input to the trusted namespace",
		chromedp.Navigate(api.URL+"/new"),
		chromedp.SetValue(chromedp.ID("chart"), chartServer.URL+"/form-1.0.0.tgz"),
		chromedp.SetValue(chromedp.ID("namespace"), install.Namespace),
		chromedp.SetValue(chromedp.ID("name"), "linked"),
		chromedp.Submit(chromedp.ID("chart")),
		chromedp.WaitVisible(chromedp.ID("f-replicas")),
		chromedp.SetValue(chromedp.ID("f-replicas"), "2"),
		chromedp.SetValue(chromedp.ID("f-auth-password"), "not-for-git"),
		chromedp.Click(`//button[text()="Add, suspended"]`),
		chromedp.WaitVisible(`//*[contains(@class,"error") and contains(text(),"cannot be committed to git")]`),
	)
	if err := admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "linked"}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a form refused for its secret input created the Addon: %v", err)
	}
	run(t, page, "adding it without the secret input",
		chromedp.SetValue(chromedp.ID("f-replicas"), "2"),
		chromedp.Click(`//button[text()="Add, suspended"]`),
		chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Committed")]`),
	)
	got := gitserver.Clone(t, url).Git("show", "HEAD:addons/linked.yaml")
	for _, want := range []string{"name: linked", "url: " + chartServer.URL + "/form-1.0.0.tgz", "replicas: 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("the committed definition lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "not-for-git") {
		t.Errorf("the secret input reached git:\n%s", got)
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "linked"}, a); err != nil || a.Labels[gitops.ManagedByGitLabel] != repo.Name {
		t.Errorf("the Addon is not the syncer's from the commit: %v, labels %v", err, a.Labels)
	}
}
