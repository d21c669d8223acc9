package corpus_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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

// TestChartsInstallAsHelmDoes installs every chart of the corpus twice on
// the local control plane, once with `helm install` and once as a Capstan
// add-on in the cluster profile, from the same loopback chart repository
// and with the same values, and requires the same live objects. See
// docs/rendering.md for the corpus and what each chart exercises.
func TestChartsInstallAsHelmDoes(t *testing.T) {
	ctx := t.Context()
	s := newSuite(t)
	t.Cleanup(report)
	for _, c := range corpus {
		t.Run(c.name, func(t *testing.T) {
			s.check(ctx, t, c)
		})
	}
}

// suite is what every chart's check shares.
type suite struct {
	admin client.Client
	snap  *snapshotter
	repo  *chartRepo
	helm  helmCLI
	ctrl  *testcontroller.Process
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	ctx := t.Context()
	binDir, chartsDir := corpusDirs(t)
	admin, err := client.New(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(ctx, admin, false); err != nil {
		t.Fatalf("installing Capstan's CRDs and RBAC: %v", err)
	}
	dir := t.TempDir()
	helm := helmCLI{bin: filepath.Join(binDir, "helm"), home: filepath.Join(dir, "helm"), kubeconfig: cluster.Kubeconfig}
	repo := serveCharts(t, helm, chartsDir, dir)
	bin, err := testcontroller.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := testcontroller.Start(t, cluster, bin, dir,
		"--ca-file="+repo.caFile,
		"--fetch-allow="+repo.host,
		// The second sync is asked for explicitly; no periodic resync
		// should fall between the checks.
		"--resync-interval=1h",
	)
	snap, err := newSnapshotter(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &suite{admin: admin, snap: snap, repo: repo, helm: helm, ctrl: ctrl}
}

// corpusDirs returns bin/ (or $CAPSTAN_BIN_DIR) and the corpus in it,
// fetched by `make charts`.
func corpusDirs(t *testing.T) (binDir, chartsDir string) {
	t.Helper()
	binDir = os.Getenv("CAPSTAN_BIN_DIR")
	if binDir == "" {
		binDir = filepath.Join("..", "..", "bin")
	}
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		t.Fatal(err)
	}
	chartsDir = filepath.Join(binDir, "charts")
	if _, err := os.Stat(filepath.Join(chartsDir, ".stamp")); err != nil {
		t.Fatalf("the chart corpus is missing from %s: run make charts (hack/charts/fetch.sh)", chartsDir)
	}
	return binDir, chartsDir
}

// installTimeout bounds one install by either tool, hooks included.
const installTimeout = 4 * time.Minute

// check runs the four steps for one chart: helm install and record, helm
// uninstall and clear, Capstan install and record, compare.
func (s *suite) check(ctx context.Context, t *testing.T, c chartCase) {
	ns := "corpus-" + c.name
	release := c.name
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(c.values), 0o600); err != nil {
		t.Fatal(err)
	}
	baseline, err := s.snap.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever happens, the next chart starts from a clean cluster.
	t.Cleanup(func() { s.clear(context.WithoutCancel(ctx), t, baseline, ns) })

	// 1. helm install, and the live objects it leaves.
	auditFrom := s.auditMark(t)
	began := time.Now()
	out, err := s.helm.run(ctx, "install", release, c.name, "--repo", s.repo.url, "--ca-file", s.repo.caFile,
		"--version", s.repo.versions[c.name], "-n", ns, "--create-namespace", "-f", valuesFile,
		"--wait", "--timeout", installTimeout.String())
	switch {
	case c.helmFails != "" && err == nil:
		t.Fatalf("helm install succeeded; the case expects it to fail with %q", c.helmFails)
	case c.helmFails != "":
		if !strings.Contains(out, c.helmFails) {
			t.Fatalf("helm install failed without %q:\n%s", c.helmFails, out)
		}
		s.checkFailsAsHelm(ctx, t, c, baseline, ns)
		return
	case err != nil:
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	helmTime := time.Since(began)
	hooksYAML, err := s.helm.run(ctx, "get", "hooks", release, "-n", ns)
	if err != nil {
		t.Fatalf("helm get hooks: %v\n%s", err, hooksYAML)
	}
	hooks := hookKeys(t, hooksYAML)
	helmObjects, err := s.snap.since(ctx, baseline)
	if err != nil {
		t.Fatal(err)
	}
	helmHooks := s.createOrder(t, auditFrom, hooks, func(u string) bool { return u == testcluster.AdminUser })
	t.Logf("helm install: %d objects, hooks %v, in %s", len(helmObjects), helmHooks, helmTime.Round(100*time.Millisecond))

	// 2. helm uninstall, and clear what it leaves (CRDs, hooks kept by
	// their policy, the namespace).
	if out, err := s.helm.run(ctx, "uninstall", release, "-n", ns, "--wait", "--timeout", installTimeout.String()); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	s.clear(ctx, t, baseline, ns)

	// 3. The same chart, values and release name as a Capstan add-on.
	auditFrom = s.auditMark(t)
	began = time.Now()
	a := s.createAddon(ctx, t, c, ns)
	got := s.waitAddon(ctx, t, a, "Synced and Ready", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && ready(cur)
	})
	capstanTime := time.Since(began)
	capstanObjects, err := s.snap.since(ctx, baseline)
	if err != nil {
		t.Fatal(err)
	}
	capstanHooks := s.createOrder(t, auditFrom, hooks, func(u string) bool { return u == install.ControllerUser })
	t.Logf("capstan: %d objects, hooks %v, in %s", len(capstanObjects), capstanHooks, capstanTime.Round(100*time.Millisecond))

	// 4. Compare.
	if len(helmObjects) == 0 {
		t.Fatal("helm install left no objects; the chart exercises nothing")
	}
	compare(t, helmObjects, capstanObjects, c.generated)
	if !slices.Equal(helmHooks, capstanHooks) {
		t.Errorf("hooks ran in another order:\n  helm:    %v\n  capstan: %v", helmHooks, capstanHooks)
	}

	// A second sync changes nothing: no writes but the Addon's own status.
	auditFrom = s.auditMark(t)
	request := got.Spec.SyncRequest + 1
	if err := s.admin.Patch(ctx, got, client.RawPatch("application/merge-patch+json",
		fmt.Appendf(nil, `{"spec":{"syncRequest":%d}}`, request))); err != nil {
		t.Fatal(err)
	}
	s.waitAddon(ctx, t, a, "the second sync", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastSyncRequest == request && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if writes := s.writesSince(t, auditFrom); len(writes) > 0 {
		t.Errorf("a second sync with nothing new wrote %d time(s): %v", len(writes), writes)
	}
	results = append(results, result{chart: c.name, objects: len(capstanObjects), hooks: len(capstanHooks),
		helm: helmTime, capstan: capstanTime})
}

// createAddon creates the chart's Addon in the cluster profile, with the
// release name and values helm install had; Cleanup removes it.
func (s *suite) createAddon(ctx context.Context, t *testing.T, c chartCase, ns string) *capstanv1.Addon {
	t.Helper()
	a := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "corpus-" + c.name},
		Spec: capstanv1.AddonSpec{
			Chart:           &capstanv1.ChartSource{Repo: s.repo.url, Name: c.name, Version: s.repo.versions[c.name]},
			TargetNamespace: ns,
			ReleaseName:     c.name,
			CreateNamespace: true,
			Values:          jsonValues(t, c.values),
			HealthChecks:    c.healthChecks,
		},
	}
	if err := s.admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.remove(context.WithoutCancel(ctx), t, a) })
	return a
}

// checkFailsAsHelm installs, with Capstan, a chart that helm install failed
// to install. Helm leaves what it applied before the failure; Capstan's
// dry run of every object comes first, so it must fail with the same
// reason and apply nothing.
func (s *suite) checkFailsAsHelm(ctx context.Context, t *testing.T, c chartCase, baseline map[string]bool, ns string) {
	t.Helper()
	if out, err := s.helm.run(ctx, "uninstall", c.name, "-n", ns, "--wait"); err != nil {
		t.Logf("helm uninstall of the failed release: %v\n%s", err, out)
	}
	s.clear(ctx, t, baseline, ns)
	a := s.createAddon(ctx, t, c, ns)
	var last *capstanv1.Addon
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, installTimeout, true, func(ctx context.Context) (bool, error) {
		cur := &capstanv1.Addon{}
		if err := s.admin.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return false, nil
		}
		last = cur
		p := cur.Status.Phase
		return cur.Status.ObservedGeneration == cur.Generation && (p == capstanv1.PhaseFailed || p == capstanv1.PhaseBlocked), nil
	})
	if err != nil {
		t.Fatalf("waiting for the add-on to fail as helm install did: %v\n%s", err, describe(last))
	}
	if d := describe(last); !strings.Contains(d, c.helmFails) {
		t.Errorf("the add-on failed without saying %q:\n%s", c.helmFails, d)
	}
	applied, err := s.snap.since(ctx, baseline)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) > 0 {
		t.Errorf("the add-on failed, yet applied %v", slices.Sorted(mapsKeys(applied)))
	}
	t.Logf("helm install and Capstan both refused the chart; Capstan applied nothing: %s", last.Status.Phase)
}

// ready reports the Addon's Ready condition.
func ready(a *capstanv1.Addon) bool {
	for _, c := range a.Status.Conditions {
		if c.Type == capstanv1.ConditionReady {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == a.Generation
		}
	}
	return false
}

// waitAddon polls the Addon until cond holds, within installTimeout.
func (s *suite) waitAddon(ctx context.Context, t *testing.T, a *capstanv1.Addon, what string, cond func(*capstanv1.Addon) bool) *capstanv1.Addon {
	t.Helper()
	var last *capstanv1.Addon
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, installTimeout, true, func(ctx context.Context) (bool, error) {
		if err := s.ctrl.Alive(); err != nil {
			return false, err
		}
		cur := &capstanv1.Addon{}
		if err := s.admin.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return false, nil
		}
		last = cur
		if cur.Status.ObservedGeneration != cur.Generation {
			return false, nil
		}
		if p := cur.Status.Phase; p == capstanv1.PhaseFailed || p == capstanv1.PhaseBlocked {
			return false, fmt.Errorf("the add-on is %s", p)
		}
		return cond(cur), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v\n%s", what, err, describe(last))
	}
	return last
}

// describe is an Addon's status in a few lines, for a failure message.
func describe(a *capstanv1.Addon) string {
	if a == nil {
		return "(no Addon read)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s generation=%d observed=%d", a.Status.Phase, a.Generation, a.Status.ObservedGeneration)
	for _, c := range a.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	if p := a.Status.Plan; p != nil {
		for _, o := range p.Objects {
			if o.Error != "" {
				fmt.Fprintf(&b, "\n  %s/%s: %s", o.Kind, o.Name, o.Error)
			}
		}
		for _, v := range p.Violations {
			fmt.Fprintf(&b, "\n  violation %s/%s %s: %s", v.Object.Kind, v.Object.Name, v.Rule, v.Message)
		}
		for _, v := range p.ValuesErrors {
			fmt.Fprintf(&b, "\n  values %s: %s", v.Path, v.Message)
		}
	}
	return b.String()
}

// remove deletes the Addon with uninstall and waits until it is gone.
func (s *suite) remove(ctx context.Context, t *testing.T, a *capstanv1.Addon) {
	cur := &capstanv1.Addon{}
	if err := s.admin.Get(ctx, client.ObjectKeyFromObject(a), cur); apierrors.IsNotFound(err) {
		return
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, capstanv1.UninstallAnnotation)
	if err := s.admin.Patch(ctx, cur, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Errorf("marking the Addon for uninstall: %v", err)
	}
	if err := s.admin.Delete(ctx, cur); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting the Addon: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, installTimeout, true, func(ctx context.Context) (bool, error) {
		err := s.admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the Addon was not removed: %v", err)
	}
}

// clear deletes every object that is not in baseline, and the namespace,
// and waits until they are gone.
func (s *suite) clear(ctx context.Context, t *testing.T, baseline map[string]bool, ns string) {
	left, err := s.snap.since(ctx, baseline)
	if err != nil {
		t.Errorf("listing what is left: %v", err)
		return
	}
	for _, u := range left {
		if err := s.snap.delete(ctx, u); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %s: %v", keyOf(u), err)
		}
	}
	if err := s.admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting namespace %s: %v", ns, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := s.admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		rest, err := s.snap.since(ctx, baseline)
		return err == nil && len(rest) == 0, nil
	})
	if err != nil {
		rest, _ := s.snap.since(ctx, baseline)
		t.Errorf("the cluster was not cleared: %v; left: %v", err, slices.Sorted(mapsKeys(rest)))
	}
}

func mapsKeys(m map[string]*unstructured.Unstructured) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// helmCLI runs bin/helm with a home of its own, so no user configuration
// leaks in, against the local control plane.
type helmCLI struct {
	bin, home, kubeconfig string
}

func (h helmCLI) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = []string{"HOME=" + h.home, "PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + h.kubeconfig,
		"HELM_CACHE_HOME=" + h.home + "/cache", "HELM_CONFIG_HOME=" + h.home + "/config", "HELM_DATA_HOME=" + h.home + "/data"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hookKeys parses `helm get hooks` into the keys of the hook objects.
func hookKeys(t *testing.T, out string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, doc := range strings.Split(out, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("helm get hooks printed a document that is not YAML: %v\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		keys[u.GroupVersionKind().Group+"/"+u.GetKind()+"/"+u.GetName()] = true
	}
	return keys
}
