package controller_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// The shared fixtures of this package's integration tests: one control
// plane, one chart server and one running controller, started by TestMain.
var (
	cluster    *testcluster.Cluster
	admin      client.Client
	charts     *chartServer
	reconciler *controller.AddonReconciler
	// stepHooks lets a test stop a reconcile between apply steps, per Addon.
	stepHooks sync.Map // types.NamespacedName.String() -> func(step string) error, or func(addon, step) error
)

const controllerNS = install.Namespace

// platformConfigMap holds the suite's platform facts, in controllerNS.
const platformConfigMap = "capstan-platform"

func TestMain(m *testing.M) {
	// This test binary is the render worker of the suite's sandbox.
	render.ServeWorkerIfAsked()
	testcluster.Main(m, func(c *testcluster.Cluster) {
		cluster = c
		if err := setupSuite(); err != nil {
			panic(err)
		}
	})
}

// HookRunner is the hook runner the suite's controller uses; the hooks
// package's tests in this package set it before the controller starts.
var HookRunner controller.HookRunner

func setupSuite() error {
	ctx := context.Background()
	ctrl.SetLogger(zap.New(zap.WriteTo(logSink), zap.UseDevMode(true)))
	var err error
	admin, err = client.New(cluster.Config, client.Options{Scheme: scheme()})
	if err != nil {
		return err
	}
	if err := install.Apply(ctx, admin, false); err != nil {
		return err
	}
	// The platform's facts, which every add-on of the suite reads.
	if err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: platformConfigMap},
		Data: map[string]string{"hostname": "apps.example.com"}}); err != nil {
		return err
	}
	charts = newChartServer()
	cfg := cluster.ConfigFor(install.ControllerUser)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme(),
		Client:                 controller.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	fetcher, err := source.NewFetcher(source.Options{
		Guard:        netguard.Config{Allow: []string{charts.addr}, LoopbackOnly: true},
		CABundle:     charts.caPEM,
		AllowFileGit: true,
	})
	if err != nil {
		return err
	}
	// NOTE: a shorter time bound than the default, so that the test of a
	// render that never ends takes seconds; every test chart renders in
	// well under a second.
	sandbox, err := render.NewSandbox(render.SandboxConfig{Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	// NOTE: the main controller of a sharded install, which leaves the
	// shards' Addons to the shards' controllers that tests start
	// (startShard).
	mainShard, err := labels.Parse("!" + shardLabel)
	if err != nil {
		return err
	}
	reconciler = &controller.AddonReconciler{
		Reconciled: reconcileCounts.add,
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		RestConfig: cfg,
		Fetcher:    fetcher,
		Hooks:      HookRunner,
		Recorder:   mgr.GetEventRecorder("capstan"),
		Config: controller.Config{
			Namespace:         controllerNS,
			PlatformConfigMap: platformConfigMap,
			Selector:          mainShard,
			ResyncInterval:    20 * time.Second,
			DriftDelay:        2 * time.Second,
			HealthPoll:        500 * time.Millisecond,
			HookTimeout:       time.Minute,
			// As many as the workers: one namespace alone never meets it,
			// and FillTenantShare has something to fill.
			MaxConcurrentPerTenant: 4,
			// Remote clusters are other local control planes on loopback;
			// this cluster's own API server stays refused.
			RemoteGuard: netguard.Config{Allow: []string{"127.0.0.0/8"}, Deny: netguard.APIServerDenyEntries(cfg.Host), LoopbackOnly: true},
			Sandbox:     sandbox,
		},
		BeforeApplyStep: func(ctx context.Context, addon *capstanv1.Addon, step string) error {
			f, _ := stepHooks.Load(addon.Namespace + "/" + addon.Name)
			switch f := f.(type) {
			case func(string) error:
				return f(step)
			case func(*capstanv1.Addon, string) error:
				return f(addon, step)
			}
			return nil
		},
	}
	// Notifications go to the receiver a test names in notifySecret, on
	// loopback; this cluster's own API server stays refused.
	notifyGuard, err := netguard.New(netguard.Config{Allow: []string{"127.0.0.0/8"}, Deny: netguard.APIServerDenyEntries(cfg.Host), LoopbackOnly: true})
	if err != nil {
		return err
	}
	reconciler.Notifier = &notify.Notifier{Client: notifyGuard.Client(), ReceiversTTL: time.Second, Backoff: 100 * time.Millisecond,
		Receivers: notify.FromSecrets(mgr.GetAPIReader(), controllerNS, []string{notifySecret, notifySecret + "-warnings", notifySecret + "-broken", notifySecret + "-team", notifySecret + "-elsewhere", notifySecret + "-other", notifySecret + "-pager"}),
		Log:       ctrl.Log.WithName("notify")}
	if err := mgr.Add(reconciler.Notifier); err != nil {
		return err
	}
	if err := reconciler.SetupWithManager(mgr, 4); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(context.Background()); err != nil {
			panic(err)
		}
	}()
	return nil
}

// logSink keeps the controller's log, so tests can search it for secrets.
var logSink = &testcontroller.SyncBuffer{}

// chartServer serves chart archives over https on loopback, and is an OCI
// registry at /v2/ (go-containerregistry's).
type chartServer struct {
	srv   *httptest.Server
	addr  string
	caPEM []byte
	mu    sync.Mutex
	files map[string][]byte
	seq   int
	// faults answer the paths under a prefix with a status of their own,
	// and count the requests they answered.
	faults map[string]*fault
	// redirects answer a path with a redirect to another address.
	redirects map[string]string
}

// fault is a server that misbehaves: an HTTP status, with a Retry-After
// header when retryAfter is set.
type fault struct {
	status     int
	retryAfter string
	hits       int
}

// breakPath makes the server answer the paths under prefix with status
// until the returned function mends it; hits counts the answers.
func (cs *chartServer) breakPath(prefix string, status int, retryAfter string) (hits func() int, mend func()) {
	f := &fault{status: status, retryAfter: retryAfter}
	cs.mu.Lock()
	if cs.faults == nil {
		cs.faults = map[string]*fault{}
	}
	cs.faults[prefix] = f
	cs.mu.Unlock()
	hits = func() int {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return f.hits
	}
	mend = func() {
		cs.mu.Lock()
		delete(cs.faults, prefix)
		cs.mu.Unlock()
	}
	return hits, mend
}

func newChartServer() *chartServer {
	cs := &chartServer{files: map[string][]byte{}, redirects: map[string]string{}}
	oci := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	cs.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		for prefix, f := range cs.faults {
			if strings.HasPrefix(r.URL.Path, prefix) {
				f.hits++
				cs.mu.Unlock()
				if f.retryAfter != "" {
					w.Header().Set("Retry-After", f.retryAfter)
				}
				http.Error(w, "the test broke this path", f.status)
				return
			}
		}
		to, redirected := cs.redirects[r.URL.Path]
		cs.mu.Unlock()
		if redirected {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v2") {
			oci.ServeHTTP(w, r)
			return
		}
		cs.mu.Lock()
		data, ok := cs.files[r.URL.Path]
		cs.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	cs.addr = cs.srv.Listener.Addr().String()
	cs.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cs.srv.Certificate().Raw})
	return cs
}

// chart is a chart's files: Chart.yaml is written for it.
type chart struct {
	name, version string
	files         map[string]string
}

// publish packages a chart and serves it, returning its URL and digest.
func (cs *chartServer) publish(t testing.TB, c chart) (url, digest string) {
	t.Helper()
	data := pack(t, c)
	cs.mu.Lock()
	// NOTE: every publish gets a path of its own: the controller caches an
	// archive by its URL, as it should for immutable chart versions.
	cs.seq++
	path := fmt.Sprintf("/charts/%d/%s-%s.tgz", cs.seq, c.name, c.version)
	cs.files[path] = data
	cs.mu.Unlock()
	sum := sha256.Sum256(data)
	return cs.srv.URL + path, "sha256:" + hex.EncodeToString(sum[:])
}

// publishOCI pushes a chart to the registry with Helm's registry client,
// into a repository of its own, and returns its oci:// reference (with no
// tag) and the manifest's digest.
func (cs *chartServer) publishOCI(t testing.TB, c chart) (ref, manifest string) {
	t.Helper()
	cs.mu.Lock()
	cs.seq++
	repo := fmt.Sprintf("%s/charts/%d/%s", cs.addr, cs.seq, c.name)
	cs.mu.Unlock()
	client, err := helmregistry.NewClient(helmregistry.ClientOptHTTPClient(cs.srv.Client()),
		helmregistry.ClientOptCredentialsFile(t.TempDir()+"/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Push(pack(t, c), repo+":"+c.version)
	if err != nil {
		t.Fatal(err)
	}
	return "oci://" + repo, res.Manifest.Digest
}

// pack makes a chart archive.
func pack(t testing.TB, c chart) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	// NOTE: a chart written for Capstan, as a restricted add-on needs.
	files := map[string]string{"Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\nannotations:\n  capstan.dev/addon: \"true\"\n", c.name, c.version)}
	for k, v := range c.files {
		files[k] = v
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		body := []byte(files[n])
		if err := tw.WriteHeader(&tar.Header{Name: c.name + "/" + n, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// --- builders -------------------------------------------------------------

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

type addonOpt func(*capstanv1.Addon)

func newAddon(namespace, name, chartURL string, opts ...addonOpt) *capstanv1.Addon {
	a := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chartURL}},
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

func withTarget(ns string) addonOpt { return func(a *capstanv1.Addon) { a.Spec.TargetNamespace = ns } }
func withValues(y string) addonOpt {
	return func(a *capstanv1.Addon) {
		a.Spec.Values = jsonValues(y)
	}
}
func withSpec(f func(*capstanv1.AddonSpec)) addonOpt { return func(a *capstanv1.Addon) { f(&a.Spec) } }

// --- waiting and reading --------------------------------------------------

func getAddon(t testing.TB, a *capstanv1.Addon) *capstanv1.Addon {
	t.Helper()
	out := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls the Addon until cond holds, within limit.
func waitFor(t testing.TB, a *capstanv1.Addon, limit time.Duration, what string, cond func(*capstanv1.Addon) bool) *capstanv1.Addon {
	t.Helper()
	var last *capstanv1.Addon
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		cur := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return false, nil
		}
		last = cur
		return cond(cur), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v\nlast status: %s", what, err, describeStatus(last))
	}
	return last
}

func waitPhase(t testing.TB, a *capstanv1.Addon, phase capstanv1.Phase) *capstanv1.Addon {
	t.Helper()
	return waitFor(t, a, 90*time.Second, "phase "+string(phase), func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == phase && cur.Status.ObservedGeneration == cur.Generation
	})
}

func describeStatus(a *capstanv1.Addon) string {
	if a == nil {
		return "(none)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s gen=%d observed=%d", a.Status.Phase, a.Generation, a.Status.ObservedGeneration)
	for _, c := range a.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	if p := a.Status.Plan; p != nil {
		fmt.Fprintf(&b, "\n  plan %s %+v", p.Hash, p.Summary)
		for _, o := range p.Objects {
			if o.Error != "" {
				fmt.Fprintf(&b, "\n  %s/%s: %s", o.Kind, o.Name, o.Error)
			}
		}
		for _, v := range p.Violations {
			fmt.Fprintf(&b, "\n  violation %s/%s %s: %s", v.Object.Kind, v.Object.Name, v.Rule, v.Message)
		}
		for _, v := range p.ValuesErrors {
			fmt.Fprintf(&b, "\n  values %s %s: %s", v.Path, v.Rule, v.Message)
		}
	}
	return b.String()
}

func condition(a *capstanv1.Addon, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(a.Status.Conditions, typ)
}

// live reads an object as the admin, or nil when it does not exist.
func live(t testing.TB, apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// eventually polls cond for up to limit.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, limit, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// updateStatus re-reads the Addon, changes its status and writes it back,
// retrying on conflicts: the controller may still be writing the status
// after the phase a test waited for.
func updateStatus(t testing.TB, a *capstanv1.Addon, change func(*capstanv1.Addon)) {
	t.Helper()
	eventually(t, 10*time.Second, "updating the Addon's status", func() bool {
		cur := getAddon(t, a)
		change(cur)
		return admin.Status().Update(context.Background(), cur) == nil
	})
}

// update re-reads the Addon, changes it and writes it back, retrying on
// conflicts with the controller.
func update(t testing.TB, a *capstanv1.Addon, change func(*capstanv1.Addon)) *capstanv1.Addon {
	t.Helper()
	var out *capstanv1.Addon
	eventually(t, 10*time.Second, "updating the Addon", func() bool {
		cur := getAddon(t, a)
		change(cur)
		if err := admin.Update(context.Background(), cur); err != nil {
			return false
		}
		out = cur
		return true
	})
	return out
}
