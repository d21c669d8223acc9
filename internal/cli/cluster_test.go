package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/testcluster"
)

// cliArgsEnv holds, separated by \x1f, the arguments of a capstan command
// line that this test program runs as its process instead of the tests.
const cliArgsEnv = "CAPSTAN_TEST_CLI_ARGS"

// The control plane of the tests that need an API server: started by the
// first of them, with Capstan's CRDs and no controller, so that a test
// writes an Addon's status itself. Most tests of the package need none,
// and run without starting it.
var shared struct {
	once    sync.Once
	cluster *testcluster.Cluster
	client  client.Client
	err     error
}

func TestMain(m *testing.M) {
	// `capstan plan` renders in copies of this program.
	render.ServeWorkerIfAsked()
	// A test that needs the command line as a process of its own, to send
	// it signals, runs this program with the arguments in cliArgsEnv.
	if args, ok := os.LookupEnv(cliArgsEnv); ok {
		os.Args = append([]string{"capstan"}, strings.Split(args, "\x1f")...)
		os.Exit(Execute())
	}
	code := m.Run()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	os.Exit(code)
}

// apiServer returns the shared control plane and an admin client of it.
func apiServer(t *testing.T) (*testcluster.Cluster, client.Client) {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.cluster, shared.err = testcluster.Start(ctx)
		if shared.err != nil {
			return
		}
		shared.client, shared.err = client.New(shared.cluster.Config, client.Options{Scheme: Scheme()})
		if shared.err == nil {
			shared.err = install.Apply(ctx, shared.client, false)
		}
	})
	if shared.err != nil {
		t.Fatalf("the local control plane: %v", shared.err)
	}
	return shared.cluster, shared.client
}

var namespaces atomic.Int32

// testNamespace creates a namespace of the test's own.
func testNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", namespaces.Add(1), strings.ToLower(t.Name()))
	if len(name) > 63 {
		name = name[:63]
	}
	name = strings.TrimRight(strings.NewReplacer("/", "-", "_", "-").Replace(name), "-")
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// capstan runs the command line against the shared control plane and
// returns what it printed and its error.
func capstan(t *testing.T, cluster *testcluster.Cluster, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := NewRootCommand()
	root.SetArgs(append(args, "--kubeconfig", cluster.Kubeconfig))
	root.SetOut(&out)
	root.SetErr(&out)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// newAddon creates an Addon with a plan in its status, as the controller
// would have written it, and returns it as stored.
func newAddon(t *testing.T, c client.Client, ns, name string, change func(*capstanv1.Addon)) *capstanv1.Addon {
	t.Helper()
	a := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://charts.invalid/" + name + "-1.0.0.tgz"}},
	}
	if change != nil {
		change(a)
	}
	if err := c.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	a.Status.ObservedGeneration = a.Generation
	a.Status.Phase = capstanv1.PhaseOutOfSync
	if a.Spec.Suspend {
		a.Status.Phase = capstanv1.PhaseSuspended
	}
	a.Status.Plan = &capstanv1.Plan{Hash: "sha256:" + strings.Repeat("ab", 32), Generation: a.Generation}
	if err := c.Status().Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

// getAddon reads an Addon back.
func getAddon(t *testing.T, c client.Client, ns, name string) *capstanv1.Addon {
	t.Helper()
	a := &capstanv1.Addon{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
		t.Fatal(err)
	}
	return a
}
