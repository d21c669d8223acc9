package chaos_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	testcluster.Main(m, func(c *testcluster.Cluster) { cluster = c })
}

// envInt reads a setting from the environment, so that `go test ./...`
// passes no unknown flag to other packages.
func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

// dbappArchive packages internal/hooks' test chart: an app with a
// pre-install, a pre-upgrade, a post-install and a pre-delete hook.
func dbappArchive(t *testing.T) []byte {
	t.Helper()
	data, err := testcontroller.ChartFolderArchive(filepath.Join("..", "..", "internal", "hooks", "testdata", "charts", "dbapp"), "dbapp")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestKillTheController kills the controller with SIGKILL at random
// moments while four add-ons are installed, upgraded and uninstalled, each
// with Helm hooks, and restarts it each time. The seed it prints replays
// the same choices (CAPSTAN_CHAOS_SEED); CAPSTAN_CHAOS_KILLS sets the count.
// After the last kill every add-on converges, and docs/reliability.md's
// invariants hold: no orphans, no never-delete kind deleted, no object
// applied twice with different content, no pre hook run again after its
// main apply, no post hook run again after it succeeded. It prints each
// kill's point: the change, and where the Addon's status stood.
func TestKillTheController(t *testing.T) {
	seed := envInt("CAPSTAN_CHAOS_SEED", time.Now().UnixNano())
	kills := int(envInt("CAPSTAN_CHAOS_KILLS", 10))
	t.Logf("seed %d (replay with CAPSTAN_CHAOS_SEED=%d), %d kills", seed, seed, kills)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	ctx := t.Context()
	env := newChaosEnv(t, dbappArchive(t))
	admin, srv := env.admin, env.charts
	start := func() *testcontroller.Process { return env.start("--resync-interval=1h", "--hook-timeout=2m") }
	rec := watchHistory(t)
	ctrl := start()

	names := []string{"alpha", "bravo", "charlie", "delta"}
	installed := map[string]bool{}
	points, phases := map[string]int{}, map[string]int{}
	asks := renders{}                 // every render asked for, by Addon
	installs := map[string][]string{} // each Addon's creations, by resourceVersion
	for k := range kills {
		name := names[rng.IntN(len(names))]
		key := client.ObjectKey{Namespace: install.Namespace, Name: "chaos-" + name}
		var point string
		switch {
		case !installed[name]:
			point = "install"
			// A removal may still be finishing: wait until the Addon is gone.
			waitGone(t, admin, key)
			// NOTE: every render of the run has a version of its own,
			// the round's number, so each content applied tells its render.
			a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: srv.URL + "/dbapp-1.0.0.tgz"}, TargetNamespace: "chaos-" + name,
					CreateNamespace: true, Prune: true, DeletionPolicy: capstanv1.DeletionDelete, ReleaseName: name,
					Values: jsonValues(t, fmt.Sprintf(`{"appVersion":"%d"}`, k))}}
			if err := admin.Create(ctx, a); err != nil {
				t.Fatal(err)
			}
			installed[name] = true
			asks.add(key, fmt.Sprint(k), true)
			installs[key.String()] = append(installs[key.String()], a.ResourceVersion)
		case rng.IntN(2) == 0:
			point = "upgrade"
			patch := fmt.Appendf(nil, `{"spec":{"values":{"appVersion":"%d"}}}`, k)
			if err := admin.Patch(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
				client.RawPatch("application/merge-patch+json", patch)); err != nil {
				t.Fatal(err)
			}
			asks.add(key, fmt.Sprint(k), false)
		default:
			point = "uninstall"
			if err := admin.Delete(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
				t.Fatal(err)
			}
			installed[name] = false
		}
		points[point]++
		// Kill while the controller works on it: within the first 3 s.
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
		phases[point+": "+killPoint(ctx, admin, key)]++
		ctrl.Kill()
		ctrl = start()
	}

	// Converge: every add-on installed is Synced; every other one is gone.
	began := time.Now()
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := ctrl.Alive(); err != nil {
			return false, err
		}
		for _, name := range names {
			a := &capstanv1.Addon{}
			err := admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "chaos-" + name}, a)
			switch {
			case installed[name] && (err != nil || a.Status.Phase != capstanv1.PhaseSynced || a.Status.ObservedGeneration != a.Generation):
				return false, nil
			case !installed[name] && !apierrors.IsNotFound(err):
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the add-ons did not converge within 5 minutes after the last kill: %v\n%s", err, ctrl.LogTail(20))
	}
	t.Logf("converged %s after the last kill", time.Since(began).Round(time.Second))

	orphans := checkOrphans(t, admin, names, installed)
	deleted := checkNeverDelete(t, admin, names)
	reruns, hooks := checkPreHooks(t, names)
	objects, contents, twice := rec.checkContents(t, asks)
	posts, postReruns, postRetries := rec.checkPostHooks(t, "seed", installs)
	t.Logf("figures: %d kills at %v; phases at the kills: %v", kills, points, phases)
	t.Logf("figures: %d hook Jobs run; %d orphans, %d never-delete objects deleted, %d pre hooks run again after their main apply; "+
		"%d objects with %d contents, %d applied twice with different content; %d post-install Jobs, %d run again after they succeeded, %d retried when they had not; %d Jobs deleted while the watch was away",
		hooks, orphans, deleted, reruns, objects, contents, twice, posts, postReruns, postRetries, rec.lostEnds())
	// A run whose every install was killed in its pre-install hooks and
	// then uninstalled applies nothing, rightly; an add-on installed at the
	// end is Synced, so its objects were applied and must have been seen.
	if hooks == 0 || (slices.Contains(slices.Collect(maps.Values(installed)), true) && objects == 0) {
		t.Error("no hook ran, or an add-on is installed and nothing was applied: the test exercised nothing")
	}
}

// chaosEnv is what each chaos test sets up: an admin client with Capstan's
// CRDs and RBAC installed, a loopback https server of one chart archive,
// and a controller binary built from the checkout.
type chaosEnv struct {
	t      *testing.T
	admin  client.Client
	charts *httptest.Server
	dir    string
	caFile string
	bin    string
}

func newChaosEnv(t *testing.T, archive []byte) *chaosEnv {
	t.Helper()
	admin, err := client.New(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(t.Context(), admin, false); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := testcontroller.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return &chaosEnv{t: t, admin: admin, charts: srv, dir: dir, caFile: caFile, bin: bin}
}

// start runs the controller, trusting and allowing the chart server, and
// allowing the extra addresses in allow.
func (e *chaosEnv) start(args ...string) *testcontroller.Process {
	return testcontroller.Start(e.t, cluster, e.bin, e.dir, append([]string{"--ca-file=" + e.caFile, "--fetch-allow=" + e.charts.Listener.Addr().String()}, args...)...)
}

// waitGone waits until an Addon is gone.
func waitGone(t *testing.T, admin client.Client, key client.ObjectKey) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(admin.Get(ctx, key, &capstanv1.Addon{})), nil
	})
	if err != nil {
		t.Fatalf("Addon %s was not removed", key)
	}
}

// checkOrphans counts the applied objects (ConfigMaps and Deployments with
// Capstan's labels) that no Addon's inventory holds; an add-on removed
// with uninstall must leave none.
func checkOrphans(t *testing.T, admin client.Client, names []string, installed map[string]bool) int {
	t.Helper()
	orphans := 0
	for _, name := range names {
		ns := "chaos-" + name
		inventory := map[string]bool{}
		a := &capstanv1.Addon{}
		if err := admin.Get(t.Context(), client.ObjectKey{Namespace: install.Namespace, Name: ns}, a); err == nil {
			for _, r := range a.Status.Inventory {
				inventory[r.Kind+"/"+r.Namespace+"/"+r.Name] = true
			}
		}
		var objs []client.Object
		cms := &corev1.ConfigMapList{}
		deps := &appsv1.DeploymentList{}
		sel := client.MatchingLabels{capstanv1.AddonLabel: ns}
		if err := admin.List(t.Context(), cms, client.InNamespace(ns), sel); err != nil {
			t.Fatal(err)
		}
		if err := admin.List(t.Context(), deps, client.InNamespace(ns), sel); err != nil {
			t.Fatal(err)
		}
		for i := range cms.Items {
			objs = append(objs, &cms.Items[i])
		}
		for i := range deps.Items {
			objs = append(objs, &deps.Items[i])
		}
		for _, o := range objs {
			kind := "ConfigMap"
			if _, ok := o.(*appsv1.Deployment); ok {
				kind = "Deployment"
			}
			if !installed[name] || !inventory[kind+"/"+o.GetNamespace()+"/"+o.GetName()] {
				orphans++
				t.Errorf("orphan: %s %s/%s (add-on %s installed: %v)", kind, o.GetNamespace(), o.GetName(), name, installed[name])
			}
		}
	}
	return orphans
}

// checkNeverDelete counts the target Namespaces (a never-delete kind)
// that are gone, and the deletions of namespaces by Capstan in the audit
// log.
func checkNeverDelete(t *testing.T, admin client.Client, names []string) int {
	t.Helper()
	deleted := 0
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]bool{}
	for _, e := range events {
		o := e.ObjectRef
		if o == nil || o.Resource != "namespaces" || !strings.HasPrefix(o.Name, "chaos-") {
			continue
		}
		if e.Verb == "delete" && e.User.Username == install.ControllerUser {
			deleted++
			t.Errorf("Capstan deleted namespace %s", o.Name)
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code < 300 && !strings.Contains(e.RequestURI, "dryRun") {
			created[o.Name] = true
		}
	}
	for _, name := range names {
		ns := "chaos-" + name
		if !created[ns] {
			continue
		}
		if err := admin.Get(t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
			deleted++
			t.Errorf("namespace %s, a never-delete kind, is gone", ns)
		}
	}
	return deleted
}

// checkPreHooks counts pre-install hooks run again after their install's
// main apply: once an add-on's ConfigMap was created, its initdb Job is not
// created again until the ConfigMap is deleted by an uninstall.
func checkPreHooks(t *testing.T, names []string) (reruns, hooks int) {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		ns := "chaos-" + name
		applied := false
		for _, e := range events {
			o := e.ObjectRef
			if o == nil || o.Namespace != ns || strings.Contains(e.RequestURI, "dryRun") || e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
				continue
			}
			switch {
			case o.Resource == "configmaps" && o.Name == name+"-config" && e.ResponseStatus.Code == 201:
				applied = true
			case o.Resource == "configmaps" && o.Name == name+"-config" && e.Verb == "delete":
				applied = false
			case o.Resource == "jobs" && e.ResponseStatus.Code == 201:
				hooks++
				if o.Name == name+"-initdb" && applied {
					reruns++
					t.Errorf("%s: the pre-install hook ran again after the install's main apply", name)
				}
			}
		}
	}
	return reruns, hooks
}
