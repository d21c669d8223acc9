package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// hostile is markup in every field a person or a chart can set; the page
// must show it as text.
const hostile = `<script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`

// browser starts a headless Chromium that can reach loopback only: every
// other request goes to a proxy on a closed loopback port, and no host
// name is resolved.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run `make chromium` (the page's tests need a real browser)")
	}
	// Chromium makes its singleton socket's folder under TMPDIR and leaves
	// it behind when it is killed: give it a folder of its own, removed
	// after the browser. t.TempDir's path is too long for a socket's.
	tmp, err := os.MkdirTemp("", "capstan-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
		chromedp.WindowSize(1280, 900),
		chromedp.Env("TMPDIR="+tmp),
	)
	// Chromium has crashed at start-up once (a segmentation fault) on a
	// machine loaded by the whole suite: start it before the test's first
	// step, and once more if it dies then. A crash after it opened its
	// first page still fails the test.
	for attempt := 1; ; attempt++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelBrowser := chromedp.NewContext(actx)
		ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
		stop := func() { cancelTimeout(); cancelBrowser(); cancelAlloc() }
		err := chromedp.Do(ctx, chromedp.Navigate("about:blank"))
		if err == nil {
			t.Cleanup(stop)
			return ctx
		}
		stop()
		if attempt == 2 {
			t.Fatalf("starting chromium: %v", err)
		}
		t.Logf("chromium did not start (%v); starting it again", err)
	}
}

func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one action that returns a value.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func signIn(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	run(t, ctx, "signing in",
		chromedp.Navigate(api.URL+"/signin"),
		chromedp.SetValue(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		// The sign-in page has an h1 too: wait for the list's.
		chromedp.WaitVisible(`//h1[text()="Add-ons"]`),
	)
}

// screenshot keeps a picture of the page for docs/images when
// CAPSTAN_SCREENSHOTS names a folder.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CAPSTAN_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := value(t, ctx, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pageAddon is an Addon with a plan, as the controller writes it, and
// hostile markup in its annotation, its plan's diff and its messages.
func pageAddon(t *testing.T, ns string) *capstanv1.Addon {
	t.Helper()
	ctx := context.Background()
	a := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blog", Annotations: map[string]string{"note": hostile}},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/blog-1.2.0.tgz"},
			Values: jsonValues(`{"replicas": 1}`)},
	}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Status.Phase = capstanv1.PhaseSuspended
	a.Status.Profile = capstanv1.ProfileRestricted
	a.Status.Version = "1.2.0"
	apimeta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: "Suspended", Message: "planned, nothing applied " + hostile, ObservedGeneration: a.Generation})
	a.Status.Plan = &capstanv1.Plan{Hash: hashOf("d"), Generation: a.Generation,
		Summary:   capstanv1.PlanSummary{Create: 1, Update: 1},
		Workloads: []capstanv1.Workload{{Kind: "Deployment", Name: "blog", Images: []string{"ghcr.io/example/blog:1.2.0"}, Ports: []capstanv1.WorkloadPort{{Name: "http", Port: 8080}}}},
		Objects: []capstanv1.PlannedObject{
			{ObjectRef: capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "blog"}, Action: capstanv1.ActionCreate,
				Diff: "--- live\n+++ planned\n@@ -0,0 +1,3 @@\n+kind: Deployment\n+metadata:\n+  name: blog\n"},
			{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "blog-settings"}, Action: capstanv1.ActionUpdate,
				Diff: "--- live\n+++ planned\n@@ -1,2 +1,2 @@\n data:\n-  title: old\n+  title: " + hostile + "\n", Wave: 2},
		},
		Notices: []capstanv1.Notice{{Path: "/capstan", Message: "the platform's facts were withheld"}},
	}
	// A registration as a hostile primary would have it, had the
	// controller not refused it: the page must still keep it inert.
	a.Status.Registration = &capstanv1.Registration{Name: "blog", Source: "https://blog.example/.well-known/capstan/addon.json",
		ReadAt: metav1.Now(), Tiles: []capstanv1.Tile{{Title: "Blog " + hostile, Icon: "B", Link: "javascript:document.title='pwned'"},
			{Title: "Writing", Link: "https://blog.example/write"}}}
	a.Status.History = []capstanv1.Revision{
		{Number: 2, AppliedAt: metav1.Now(), Version: "1.1.0", AppliedHash: hashOf("e"), PlanHash: hashOf("c"), Changes: capstanv1.PlanSummary{Update: 2}},
		{Number: 1, AppliedAt: metav1.Now(), Version: "1.0.0 " + hostile, AppliedHash: hashOf("f"), PlanHash: hashOf("b"), Changes: capstanv1.PlanSummary{Create: 3, Hooks: 1}},
	}
	if err := admin.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPageInAChromium signs in as a viewer and as an editor in a real
// headless Chromium, and checks what each sees and may do.
func TestPageInAChromium(t *testing.T) {
	ns := namespace(t)
	a := pageAddon(t, ns)
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch", "delete"))
	page := api.URL + "/addons/" + ns + "/blog"

	t.Run("a viewer sees the plan and no action", func(t *testing.T) {
		ctx := browser(t)
		signIn(t, ctx, viewer)
		run(t, ctx, "reading the list",
			chromedp.Navigate(api.URL+"/addons?namespace="+ns),
			chromedp.WaitVisible(chromedp.CSS("table.addons")))
		rows := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.addons tbody tr").length`))
		// A tile is a link a chart chose: it names the add-on it comes
		// from, so that a tenant's tile cannot pass for the platform's.
		if from := value(t, ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("ul.tiles small.tile-from")].map(e => e.textContent).join("|")`)); from != "from "+ns+"/blog, a tenant's add-on|from "+ns+"/blog, a tenant's add-on" {
			t.Errorf("the tiles say they come from %q; want the add-on %s/blog on each", from, ns)
		}
		run(t, ctx, "reading the add-on", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("pre.diff")))
		actions := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("section.actions").length`))
		scripts := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("script").length`))
		imgs := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
		tiles := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("ul.tiles a").length`))
		scriptLinks := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("a[href^='javascript']").length`))
		if tiles != 2 || scriptLinks != 0 {
			t.Errorf("the page shows %d tiles, %d of them javascript: links; want 2 tiles and no such link", tiles, scriptLinks)
		}
		title := value(t, ctx, chromedp.Title())
		text := value(t, ctx, chromedp.Text(chromedp.CSS("main")))
		if rows != 1 || actions != 0 {
			t.Errorf("the viewer sees %d add-ons and %d action sections; want 1 and none", rows, actions)
		}
		if scripts != 1 || imgs != 0 || strings.Contains(title, "pwned") {
			t.Errorf("markup from the Addon ran or rendered: %d scripts (want only live.js), %d images, title %q", scripts, imgs, title)
		}
		for _, want := range []string{"Suspended", "+  title: <script>", "ghcr.io/example/blog:1.2.0", "withheld", "0 created, 2 updated, 0 deleted", "3 created, 0 updated, 0 deleted, 1 hooks", "blog-settings · wave 2"} {
			if !strings.Contains(text, want) {
				t.Errorf("the add-on page does not show %q as text", want)
			}
		}
		screenshot(t, ctx, "addon-page.png")
	})

	t.Run("an editor installs the reviewed plan and sees it sync", func(t *testing.T) {
		ctx := browser(t)
		signIn(t, ctx, editor)
		run(t, ctx, "reading the list",
			chromedp.Navigate(api.URL+"/addons?namespace="+ns),
			chromedp.WaitVisible(chromedp.CSS("table.addons")))
		screenshot(t, ctx, "addons-page.png")
		run(t, ctx, "installing",
			chromedp.Navigate(page),
			chromedp.WaitVisible(`//button[text()="Install this plan"]`),
			chromedp.Click(`//button[text()="Install this plan"]`),
			chromedp.WaitVisible(`//p[contains(@class,"flash")]`),
		)
		got := &capstanv1.Addon{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Suspend || got.Spec.ApprovedPlan != hashOf("d") || got.Spec.SyncRequest != 1 {
			t.Fatalf("after Install: suspend %v, approvedPlan %q, syncRequest %d", got.Spec.Suspend, got.Spec.ApprovedPlan, got.Spec.SyncRequest)
		}
		// The controller's part, written by hand: the page must show it
		// without a reload, as text. A wave that waits, then the sync.
		got.Status.Phase = capstanv1.PhaseProgressing
		got.Status.Wave = &capstanv1.WaveProgress{Wave: 1, Waiting: "Deployment " + ns + "/blog: " + hostile, Since: metav1.Now()}
		if err := admin.Status().Update(context.Background(), got); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "waiting for the wave in the live status",
			chromedp.WaitVisible(`//p[@data-field="wave" and starts-with(text(),"Wave 1 waits since ") and contains(text(),"for the waves before it: Deployment")]`))
		if imgs := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`)); imgs != 0 || strings.Contains(value(t, ctx, chromedp.Title()), "pwned") {
			t.Errorf("markup in status.wave rendered: %d images", imgs)
		}
		got.Status.Phase, got.Status.Wave = capstanv1.PhaseSynced, nil
		if err := admin.Status().Update(context.Background(), got); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "waiting for the live status",
			chromedp.WaitVisible(`//span[@data-field="phase" and text()="Synced"]`))
		if w := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('[data-field="wave"]').textContent`)); w != "" {
			t.Errorf("the wave line still says %q once the sync is over", w)
		}
		run(t, ctx, "refreshing",
			chromedp.Click(`//button[text()="Refresh"]`),
			chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Refresh requested")]`),
		)
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), got); err != nil || got.Annotations[capstanv1.RefreshAnnotation] == "" {
			t.Fatalf("after Refresh: %v, annotations %v", err, got.Annotations)
		}

		// The chart is not served, so the edit page offers the values as
		// YAML, filled with what the add-on has now.
		run(t, ctx, "editing values",
			chromedp.Click(`//a[text()="Edit values"]`),
			chromedp.WaitVisible(chromedp.ID("yaml")),
		)
		if shown := value(t, ctx, chromedp.Evaluate[string](`document.getElementById("yaml").value`)); shown != "replicas: 1\n" {
			t.Errorf("the edit page shows the values %q; want the current ones", shown)
		}
		run(t, ctx, "saving values",
			chromedp.SetValue(chromedp.ID("yaml"), "replicas: 3\n"),
			chromedp.Click(`//button[text()="Save values"]`),
			chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Values changed")]`),
		)
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), got); err != nil || !strings.Contains(string(got.Spec.Values.Raw), `"replicas":3`) {
			t.Fatalf("after the edit: %v, values %s", err, got.Spec.Values.Raw)
		}

		// A restricted add-on is uninstalled whatever a box says: the
		// form says so, and offers no uninstall box.
		run(t, ctx, "removing",
			chromedp.WaitVisible(`//form[@class="remove"]//p[contains(text(),"Removing uninstalls the software")]`),
		)
		if n := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('input[name="uninstall"]').length`)); n != 0 {
			t.Errorf("the Remove form of a restricted add-on offers %d uninstall boxes, which change nothing", n)
		}
		run(t, ctx, "removing",
			chromedp.Click(`//button[text()="Remove"]`),
			chromedp.WaitVisible(`//h1[text()="Add-ons"]`),
		)
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), got); !apierrors.IsNotFound(err) {
			t.Errorf("after Remove: %v", err)
		}
	})
}

func jsonValues(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
