package gitops_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/testcluster"
)

// env is the control plane and the syncer that the integration tests share.
var env struct {
	skip   string
	cfg    *rest.Config
	client client.Client
	syncer *controller.AddonRepositoryReconciler
	// receivers are where the syncer's notifications go.
	mu        sync.Mutex
	receivers []notify.Receiver
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() || os.Getenv("CAPSTAN_SKIP_INTEGRATION") != "" {
		env.skip = "integration tests are off (-short or CAPSTAN_SKIP_INTEGRATION)"
		return m.Run()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCtx, stop := context.WithTimeout(ctx, 3*time.Minute)
	defer stop()
	cluster, err := testcluster.Start(startCtx)
	if errors.Is(err, testcluster.ErrBinariesMissing) {
		env.skip = "the local control plane is not built: " + err.Error()
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the local control plane:", err)
		return 1
	}
	defer cluster.Stop()
	if err := setupEnv(ctx, cluster.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func setupEnv(ctx context.Context, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, capstanv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, c); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return err
	}
	// Notifications go to the receivers a test sets in env.receivers, on
	// loopback.
	notifier := &notify.Notifier{Client: http.DefaultClient, ReceiversTTL: time.Millisecond, Log: log.Log.WithName("notify"),
		Receivers: func(context.Context) ([]notify.Receiver, error) {
			env.mu.Lock()
			defer env.mu.Unlock()
			return env.receivers, nil
		}}
	if err := mgr.Add(notifier); err != nil {
		return err
	}
	syncer := &controller.AddonRepositoryReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Notifier: notifier}
	if err := syncer.SetupWithManager(mgr); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			log.Log.Error(err, "Manager stopped")
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the manager's cache did not sync")
	}
	env.cfg, env.client, env.syncer = cfg, c, syncer
	return nil
}

func installCRDs(ctx context.Context, c client.Client) error {
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "config", "crd", "bases")
	for _, name := range []string{"capstan.dev_addons.yaml", "capstan.dev_addonrepositories.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create CRD %s: %w", crd.Name, err)
		}
		if err := apply.WaitForCRD(ctx, c, crd.Name, 50*time.Millisecond, 30*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func needCluster(t testing.TB) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
}

func newNamespace(t testing.TB, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	if err := env.client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually polls check until it returns nil, or fails the test after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getRepo(t testing.TB, ns, name string) *capstanv1.AddonRepository {
	t.Helper()
	r := &capstanv1.AddonRepository{}
	if err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func waitSynced(t testing.TB, ns, name, commit string) *capstanv1.AddonRepository {
	t.Helper()
	var r *capstanv1.AddonRepository
	eventually(t, 20*time.Second, "repository synced to "+commit, func() error {
		r = getRepo(t, ns, name)
		if r.Status.LastSyncedCommit != commit {
			return fmt.Errorf("last synced %q, conditions %+v", r.Status.LastSyncedCommit, r.Status.Conditions)
		}
		return nil
	})
	return r
}

// waitRead waits for the cluster's syncer to have read the repository
// once, whatever came of it: a test's own syncer of it then writes its
// status over that read, not in a race with it.
func waitRead(t testing.TB, ns, name string) {
	t.Helper()
	eventually(t, 20*time.Second, "repository "+name+" read", func() error {
		r := getRepo(t, ns, name)
		if c := meta.FindStatusCondition(r.Status.Conditions, capstanv1.ConditionReady); c == nil || c.ObservedGeneration != r.Generation {
			return fmt.Errorf("conditions %+v", r.Status.Conditions)
		}
		return nil
	})
}

func getAddon(t testing.TB, ns, name string) (*capstanv1.Addon, error) {
	t.Helper()
	a := &capstanv1.Addon{}
	err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, a)
	return a, err
}

func mustAddon(t testing.TB, ns, name string) *capstanv1.Addon {
	t.Helper()
	a, err := getAddon(t, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func createRepo(t testing.TB, ns, name, url string, mutate ...func(*capstanv1.AddonRepository)) {
	t.Helper()
	r := &capstanv1.AddonRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       capstanv1.AddonRepositorySpec{URL: url, Interval: &metav1.Duration{Duration: time.Hour}},
	}
	for _, m := range mutate {
		m(r)
	}
	if err := env.client.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func trigger(t testing.TB, ns, name string) {
	t.Helper()
	if err := env.syncer.Trigger(context.Background(), client.ObjectKey{Namespace: ns, Name: name}); err != nil {
		t.Fatal(err)
	}
}
