package shards_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	testcluster.Main(m, func(c *testcluster.Cluster) { cluster = c })
}

// fixture is what both tests share: an admin client, the controller binary,
// and a chart of one ConfigMap served over https on loopback.
type fixture struct {
	admin     client.Client
	bin, dir  string
	chartURL  string
	hookedURL string
	caFile    string
	host      string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	admin, err := client.New(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(ctx, admin, false); err != nil {
		t.Fatal(err)
	}
	f := &fixture{admin: admin, dir: t.TempDir()}
	if f.bin, err = testcontroller.Build(ctx, f.dir); err != nil {
		t.Fatal(err)
	}
	archives := map[string][]byte{"/note-1.0.0.tgz": chartArchive(t, false), "/hooked-1.0.0.tgz": chartArchive(t, true)}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := archives[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	f.chartURL, f.hookedURL, f.host = srv.URL+"/note-1.0.0.tgz", srv.URL+"/hooked-1.0.0.tgz", srv.Listener.Addr().String()
	f.caFile = filepath.Join(f.dir, "ca.pem")
	if err := os.WriteFile(f.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs one controller under name, with args added.
func (f *fixture) start(t *testing.T, name string, args ...string) *testcontroller.Process {
	t.Helper()
	bin, err := testcontroller.Named(f.bin, f.dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return testcontroller.Start(t, cluster, bin, f.dir, append([]string{"--ca-file=" + f.caFile, "--fetch-allow=" + f.host,
		"--resync-interval=1h"}, args...)...)
}

// chartArchive is a chart of one ConfigMap named after the release, and
// with hook a post-install Job too.
func chartArchive(t *testing.T, hook bool) []byte {
	t.Helper()
	name := "note"
	files := map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  note: hello\n",
	}
	if hook {
		name = "hooked"
		files["templates/hook.yaml"] = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-seed
  annotations:
    helm.sh/hook: post-install
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: seed
          image: busybox:1.36
`
	}
	files["Chart.yaml"] = "apiVersion: v2\nname: " + name + "\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n"
	data, err := testcontroller.ChartArchive(name, files)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func newNamespace(t *testing.T, admin client.Client, name string) string {
	t.Helper()
	if err := admin.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// waitSynced waits until every Addon of ns is Synced for its generation.
func waitSynced(t *testing.T, admin client.Client, ns string, n int, limit time.Duration, alive ...*testcontroller.Process) {
	t.Helper()
	var synced int
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, limit, true, func(ctx context.Context) (bool, error) {
		for _, p := range alive {
			if err := p.Alive(); err != nil {
				return false, err
			}
		}
		list := &capstanv1.AddonList{}
		if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		synced = 0
		for _, a := range list.Items {
			if a.Status.Phase == capstanv1.PhaseSynced && a.Status.ObservedGeneration == a.Generation {
				synced++
			}
		}
		return synced == n, nil
	})
	if err != nil {
		t.Fatalf("%d of %d add-ons Synced within %s: %v", synced, n, limit, err)
	}
}

// metricSum sums the samples of one metric in a process's metrics whose
// labels include every one of labels.
func metricSum(t *testing.T, p *testcontroller.Process, name string, labels map[string]string) float64 {
	t.Helper()
	samples, err := p.Samples(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return testcontroller.Sum(samples, name, labels)
}

// TestShardsSplitTheAddons runs two shards and a main controller over 200
// add-ons, a third in each shard and a third in none. Each add-on is
// reconciled by exactly one controller, the one of its shard: the API
// server's audit log names, for every status write of an Addon, the
// controller that made it (each runs under its own name, its user agent);
// each controller's capstan_addons gauge, which counts every add-on it
// reconciled once, counts exactly its shard's; and its reconciles count at
// least that many.
func TestShardsSplitTheAddons(t *testing.T) {
	f := setup(t)
	ns := newNamespace(t, f.admin, "shards")
	procs := map[string]*testcontroller.Process{
		"capstan-shard-a": f.start(t, "capstan-shard-a", "--watch-label-selector="+gitops.ShardLabel+"=a"),
		"capstan-shard-b": f.start(t, "capstan-shard-b", "--watch-label-selector="+gitops.ShardLabel+"=b"),
		"capstan-main":    f.start(t, "capstan-main", "--watch-label-selector=!"+gitops.ShardLabel),
	}
	const n = 200
	shardOf := func(i int) string { return []string{"a", "b", ""}[i%3] }
	began := time.Now()
	for i := range n {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("note-%03d", i)},
			Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: f.chartURL}}}
		if s := shardOf(i); s != "" {
			a.Labels = map[string]string{gitops.ShardLabel: s}
		}
		if err := f.admin.Create(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	alive := []*testcontroller.Process{procs["capstan-shard-a"], procs["capstan-shard-b"], procs["capstan-main"]}
	waitSynced(t, f.admin, ns, n, 5*time.Minute, alive...)
	t.Logf("%d add-ons in 3 controllers Synced in %s", n, time.Since(began).Round(time.Second))

	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	writers := map[string]map[string]bool{} // Addon -> the controllers that wrote its status
	for _, e := range events {
		o := e.ObjectRef
		if o == nil || o.Resource != "addons" || o.Subresource != "status" || o.Namespace != ns || e.User.Username != install.ControllerUser {
			continue
		}
		agent, _, _ := strings.Cut(e.UserAgent, "/")
		if writers[o.Name] == nil {
			writers[o.Name] = map[string]bool{}
		}
		writers[o.Name][agent] = true
	}
	for i := range n {
		name := fmt.Sprintf("note-%03d", i)
		want := "capstan-main"
		if s := shardOf(i); s != "" {
			want = "capstan-shard-" + s
		}
		if got := writers[name]; len(got) != 1 || !got[want] {
			t.Errorf("Addon %s (shard %q) was written by %v; want %s alone", name, shardOf(i), got, want)
		}
	}
	size := map[string]float64{}
	for i := range n {
		if s := shardOf(i); s != "" {
			size["capstan-shard-"+s]++
		} else {
			size["capstan-main"]++
		}
	}
	// The main controller also has the Addons other tests left in other
	// namespaces with no shard label.
	var all capstanv1.AddonList
	if err := f.admin.List(t.Context(), &all); err != nil {
		t.Fatal(err)
	}
	for _, a := range all.Items {
		if _, sharded := a.Labels[gitops.ShardLabel]; a.Namespace != ns && !sharded {
			size["capstan-main"]++
		}
	}
	for name, p := range procs {
		var got float64
		// NOTE: polled, as another test's leftover Addons may still be
		// queued behind this test's.
		_ = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			got = metricSum(t, p, "capstan_addons", nil)
			return got == size[name], nil
		})
		if got != size[name] {
			t.Errorf("%s's capstan_addons counts %g add-ons; its shard has %g", name, got, size[name])
		}
		if r := metricSum(t, p, "controller_runtime_reconcile_total", map[string]string{"controller": "addon"}); r < size[name] {
			t.Errorf("%s reconciled %g times; want at least once per add-on of its shard (%g)", name, r, size[name])
		}
	}
}
