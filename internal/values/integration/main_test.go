// Package integration_test runs the values package against the real local
// control plane: the generated Secret, the create-only writer under a
// create-only user, cleanup, and keep-on-remove with the garbage collector
// running. The pure tests stay in the values package, so they need no cluster.
package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/testcluster"
)

// waitTimeout bounds every wait for the cluster to act.
const waitTimeout = 60 * time.Second

var (
	cluster *testcluster.Cluster
	scheme  = runtime.NewScheme()
	crdOnce sync.Once
	crdErr  error
	nsCount atomic.Int32
)

func TestMain(m *testing.M) {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, capstanv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	testcluster.Main(m, func(c *testcluster.Cluster) { cluster = c })
}

// clientFor returns a controller-runtime client for a configuration.
func clientFor(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("build a client: %v", err)
	}
	return c
}

// admin returns a client that may do anything, with the Addon CRD installed.
func admin(t *testing.T) client.Client {
	t.Helper()
	c := clientFor(t, cluster.Config)
	crdOnce.Do(func() { crdErr = installCRD(t.Context(), c) })
	if crdErr != nil {
		t.Fatalf("install the Addon CRD: %v", crdErr)
	}
	return c
}

// installCRD applies config/crd/bases/capstan.dev_addons.yaml and waits
// until it is Established and c maps its kind.
func installCRD(ctx context.Context, c client.Client) error {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", "capstan.dev_addons.yaml"))
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return err
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return apply.WaitForCRD(ctx, c, crd.Name, 100*time.Millisecond, waitTimeout)
}

// namespace creates a namespace of the test's own.
func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	name := fmt.Sprintf("v%d-%s", nsCount.Add(1), strings.ToLower(t.Name()))
	name = strings.NewReplacer("/", "-", "_", "-").Replace(name)
	if len(name) > 63 {
		name = name[:63]
	}
	name = strings.TrimRight(name, "-")
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// addon creates an Addon, so its values objects can carry a real owner.
func addon(t *testing.T, c client.Client, ns, name string, refs ...capstanv1.ValuesReference) *capstanv1.Addon {
	t.Helper()
	a := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: capstanv1.AddonSpec{
			Chart:      &capstanv1.ChartSource{URL: "https://charts.example/app-1.0.0.tgz"},
			ValuesFrom: refs,
		},
	}
	if err := c.Create(t.Context(), a); err != nil {
		t.Fatalf("create Addon %s/%s: %v", ns, name, err)
	}
	return a
}

// getSecret reads a Secret as admin; found is false when it is gone.
func getSecret(t *testing.T, c client.Client, ns, name string) (*corev1.Secret, bool) {
	t.Helper()
	s := &corev1.Secret{}
	err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get Secret %s/%s: %v", ns, name, err)
	}
	return s, true
}

// getConfigMap reads a ConfigMap as admin, or nil when it is gone.
func getConfigMap(t *testing.T, c client.Client, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get ConfigMap %s/%s: %v", ns, name, err)
	}
	return cm
}

// eventually polls cond until it holds or waitTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting until %s", waitTimeout, what)
}
