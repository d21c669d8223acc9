package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/testcluster"
)

// The shared fixtures: one control plane for the package, and an admin
// client that can watch.
var (
	cluster *testcluster.Cluster
	admin   client.WithWatch
)

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	testcluster.Main(m, func(c *testcluster.Cluster) {
		cluster = c
		s := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(s); err != nil {
			panic(err)
		}
		var err error
		admin, err = client.NewWithWatch(c.Config, client.Options{Scheme: s})
		if err != nil {
			panic(err)
		}
	})
}

const release = "db"

// fixture is one test's namespace, add-on and runner.
type fixture struct {
	t       *testing.T
	ns      string
	addon   *capstanv1.Addon
	applier *apply.Applier
	runner  *hooks.Runner

	mu       sync.Mutex
	progress []string // "event kind/name", in the order Progress was called
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ns := newNamespace(t)
	return &fixture{
		t:       t,
		ns:      ns,
		addon:   &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dbapp"}},
		applier: &apply.Applier{Client: admin, Poll: 100 * time.Millisecond, CRDTimeout: 30 * time.Second},
		runner:  &hooks.Runner{Poll: 100 * time.Millisecond},
	}
}

// newNamespace creates a namespace named after the test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 45 {
		name = name[:45]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%05d", time.Now().UnixNano()%100000)
	if err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// hooksOf renders the dbapp chart with values (YAML) through the renderer
// and prepares its hooks as the controller does: the target namespace and
// Capstan's labels.
func (f *fixture) hooksOf(valuesYAML string, upgrade bool) []render.Hook {
	f.t.Helper()
	ch, err := loader.Load(filepath.Join("testdata", "charts", "dbapp"))
	if err != nil {
		f.t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(valuesYAML), &vals); err != nil {
		f.t.Fatal(err)
	}
	res, err := render.Helm(context.Background(), ch, vals, render.Options{ReleaseName: release, Namespace: f.ns, Upgrade: upgrade})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, h := range res.Hooks {
		if h.Object.GetNamespace() == "" {
			h.Object.SetNamespace(f.ns)
		}
		labels := h.Object.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[capstanv1.AddonLabel] = f.addon.Name
		labels[capstanv1.AddonNamespaceLabel] = f.addon.Namespace
		labels[capstanv1.ManagedByLabel] = "capstan"
		h.Object.SetLabels(labels)
	}
	return res.Hooks
}

// run runs the hooks of one event with a per-hook timeout.
func (f *fixture) run(event string, hs []render.Hook, timeout time.Duration) error {
	return f.runner.Run(context.Background(), hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: event, Hooks: hs, Timeout: timeout,
		Progress: func(p capstanv1.HookProgress) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if p.Since.IsZero() || p.Event != event {
				f.t.Errorf("progress %+v: want event %s and a start time", p, event)
			}
			f.progress = append(f.progress, p.Event+" "+p.Kind+"/"+p.Name)
			return nil
		},
	})
}

// job reads a Job, or returns nil when it does not exist.
func (f *fixture) job(name string) *batchv1.Job {
	f.t.Helper()
	j := &batchv1.Job{}
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, j)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// configMap reads a ConfigMap, or returns nil when it does not exist.
func (f *fixture) configMap(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return cm
}

// podsOf lists the pods of a Job by its UID.
func (f *fixture) podsOf(uid string) []corev1.Pod {
	f.t.Helper()
	list := &corev1.PodList{}
	if err := admin.List(context.Background(), list, client.InNamespace(f.ns), client.MatchingLabels{batchv1.ControllerUidLabel: uid}); err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

// eventually polls cond for up to limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, limit, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// creation is an object's creation as a watch saw it: its resourceVersion
// when it was added and, for a Job, when it became Complete or Failed.
type creation struct {
	key        string // Kind/name
	createdRV  string
	finishedRV string
}

// recorder watches ConfigMaps, Jobs and Pods in a namespace and records
// their creations in the API server's order.
type recorder struct {
	mu       sync.Mutex
	byKey    map[string]*creation
	order    []*creation
	watchers []watch.Interface
}

func (f *fixture) record() *recorder {
	f.t.Helper()
	r := &recorder{byKey: map[string]*creation{}}
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &batchv1.JobList{}, &corev1.PodList{}} {
		w, err := admin.Watch(context.Background(), list, client.InNamespace(f.ns))
		if err != nil {
			f.t.Fatal(err)
		}
		r.watchers = append(r.watchers, w)
		go r.consume(w)
	}
	f.t.Cleanup(r.stop)
	return r
}

func (r *recorder) consume(w watch.Interface) {
	for ev := range w.ResultChan() {
		obj, ok := ev.Object.(client.Object)
		if !ok {
			continue
		}
		kind := fmt.Sprintf("%T", obj)
		kind = kind[strings.LastIndex(kind, ".")+1:]
		key := kind + "/" + obj.GetName()
		r.mu.Lock()
		switch ev.Type {
		case watch.Added:
			c := &creation{key: key, createdRV: obj.GetResourceVersion()}
			r.byKey[key] = c
			r.order = append(r.order, c)
		case watch.Modified:
			if job, ok := obj.(*batchv1.Job); ok && r.byKey[key] != nil && r.byKey[key].finishedRV == "" {
				for _, c := range job.Status.Conditions {
					if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
						r.byKey[key].finishedRV = obj.GetResourceVersion()
					}
				}
			}
		}
		r.mu.Unlock()
	}
}

// saw reports whether the watch saw an object whose Kind/name starts with
// prefix created.
func (r *recorder) saw(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.order {
		if strings.HasPrefix(c.key, prefix) {
			return true
		}
	}
	return false
}

func (r *recorder) stop() {
	for _, w := range r.watchers {
		w.Stop()
	}
}

// created returns the ConfigMaps and Jobs created, ordered by the
// resourceVersion the API server gave their creation.
func (r *recorder) created(t *testing.T) []*creation {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*creation
	for _, c := range r.order {
		if !strings.HasPrefix(c.key, "Pod/") && strings.Contains(c.key, "/"+release+"-") {
			cp := *c
			out = append(out, &cp)
		}
	}
	var cmpErr error
	slices.SortStableFunc(out, func(a, b *creation) int {
		n, err := resourceversion.CompareResourceVersion(a.createdRV, b.createdRV)
		if err != nil {
			cmpErr = err
		}
		return n
	})
	if cmpErr != nil {
		t.Fatal(cmpErr)
	}
	return out
}

func keys(cs []*creation) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.key)
	}
	return out
}

// rvLess reports whether resourceVersion a came before b.
func rvLess(t *testing.T, a, b string) bool {
	t.Helper()
	n, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return n < 0
}

// hookError returns err as a hook error, or fails the test.
func hookError(t *testing.T, err error) *hooks.Error {
	t.Helper()
	var he *hooks.Error
	if !errors.As(err, &he) {
		t.Fatalf("Run returned %v, want a *hooks.Error", err)
	}
	return he
}
