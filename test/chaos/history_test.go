package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// history is what watches that a chaos test keeps running saw of the
// objects Capstan applied (every object with its managed-by label): each
// distinct content of every ConfigMap and Deployment, and the creation and
// completion of every Job, in the API server's order. The watches are
// informers, so they go on after the API server comes back.
type history struct {
	mu      sync.Mutex
	objects map[types.UID]*appliedObject
	jobs    map[types.UID]*hookJob
	// unknownEnd counts Jobs deleted while the watch was broken: their
	// last state is the last one seen, which may lack a completion.
	unknownEnd int
}

// appliedObject is one ConfigMap or Deployment, by UID: deleted and made
// again, it is another.
type appliedObject struct {
	kind, namespace, name string
	addon                 string // the Addon's namespace/name, from Capstan's labels
	// contents are the distinct contents the watch saw, in order, and
	// versions the render each came from: a ConfigMap's data.appVersion
	// or data.version, a Deployment's image tag.
	contents, versions []string
	// generation is the highest metadata.generation seen, which the API
	// server raises on every change of a Deployment's spec, and
	// firstGeneration the one of the first content seen (1, unless the
	// watch missed the creation).
	generation, firstGeneration int64
}

// hookJob is one Job, by UID.
type hookJob struct {
	namespace, name, addon string
	// createdRV is the resourceVersion the watch first saw it at: its
	// creation, unless a broken watch listed it again later.
	createdRV string
	// completedRV is the first resourceVersion at which it was seen
	// Complete; a Job deleted once it completed shows Complete in the
	// deletion's event, at the deletion's resourceVersion.
	completedRV string
}

// watchHistory starts the watches and waits until they are listening.
func watchHistory(t *testing.T) *history {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := &history{objects: map[types.UID]*appliedObject{}, jobs: map[types.UID]*hookJob{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = capstanv1.ManagedByLabel + "=capstan"
	}))
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.observe(obj) },
		UpdateFunc: func(_, obj any) { h.observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				if _, job := tomb.Obj.(*batchv1.Job); job {
					h.mu.Lock()
					h.unknownEnd++
					h.mu.Unlock()
				}
				obj = tomb.Obj
			}
			h.observe(obj)
		},
	}
	for _, inf := range []cache.SharedIndexInformer{factory.Core().V1().ConfigMaps().Informer(), factory.Apps().V1().Deployments().Informer(), factory.Batch().V1().Jobs().Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("the watch of %v did not start", typ)
		}
	}
	return h
}

func (h *history) observe(obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	addon := o.GetLabels()[capstanv1.AddonNamespaceLabel] + "/" + o.GetLabels()[capstanv1.AddonLabel]
	h.mu.Lock()
	defer h.mu.Unlock()
	switch o := o.(type) {
	case *batchv1.Job:
		j := h.jobs[o.UID]
		if j == nil {
			j = &hookJob{namespace: o.Namespace, name: o.Name, addon: addon, createdRV: o.ResourceVersion}
			h.jobs[o.UID] = j
		}
		for _, c := range o.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue && j.completedRV == "" {
				j.completedRV = o.ResourceVersion
			}
		}
	case *corev1.ConfigMap:
		version := o.Data["appVersion"]
		if version == "" {
			version = o.Data["version"]
		}
		if version == "" {
			return // not a ConfigMap whose content tells its render
		}
		data, _ := json.Marshal(o.Data) // NOTE: a map marshals in key order
		h.content(o, "ConfigMap", addon, string(data), version, 0)
	case *appsv1.Deployment:
		if len(o.Spec.Template.Spec.Containers) == 0 {
			return
		}
		image := o.Spec.Template.Spec.Containers[0].Image
		template, _ := json.Marshal(o.Spec.Template)
		h.content(o, "Deployment", addon, string(template), image[strings.LastIndex(image, ":")+1:], o.Generation)
	}
}

// content notes one state of an applied object; h.mu is held.
func (h *history) content(o client.Object, kind, addon, content, version string, generation int64) {
	a := h.objects[o.GetUID()]
	if a == nil {
		a = &appliedObject{kind: kind, namespace: o.GetNamespace(), name: o.GetName(), addon: addon, firstGeneration: generation}
		h.objects[o.GetUID()] = a
	}
	if n := len(a.contents); n == 0 || a.contents[n-1] != content {
		a.contents = append(a.contents, content)
		a.versions = append(a.versions, version)
	}
	a.generation = max(a.generation, generation)
}

// asked is one render a test asked an add-on for: the version its values
// give (unique within the add-on), and whether it was asked as an install
// (a new Addon) rather than an upgrade.
type asked struct {
	version string
	install bool
}

// renders are the renders a test asked for, by the Addon's namespace/name,
// in the order it asked.
type renders map[string][]asked

func (r renders) add(key client.ObjectKey, version string, install bool) {
	r[key.String()] = append(r[key.String()], asked{version: version, install: install})
}

// index is the place of a version among an add-on's renders, or -1.
func (r renders) index(addon, version string) int {
	return slices.IndexFunc(r[addon], func(a asked) bool { return a.version == version })
}

// checkContents counts the objects applied twice with different content.
// Each content of an object must come from a render the test asked its
// add-on for, and each next content from a render asked later: a content
// of the same render that differs (say, rendered as an upgrade where it
// was an install) or of an earlier render (a stale render applied again,
// as by a restarted controller) counts. So does a Deployment whose
// generation, which the API server raises on every change of its spec,
// is higher than 1 + the renders asked after its first within its Addon:
// it changed more often than the renders did, even if the watch missed
// a state (counted from the generation first seen, when the watch missed
// the creation). It returns the objects and the contents seen too.
func (h *history) checkContents(t *testing.T, asks renders) (objects, contents, bad int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.objects {
		if _, ok := asks[a.addon]; !ok {
			continue // another test's
		}
		objects++
		contents += len(a.contents)
		what := fmt.Sprintf("%s %s/%s of %s", a.kind, a.namespace, a.name, a.addon)
		last, first := -1, map[string]string{} // the newest render seen, and each version's first content
		for i, v := range a.versions {
			n := asks.index(a.addon, v)
			switch {
			case n < 0:
				bad++
				t.Errorf("%s: content %d is of version %q, which the test never asked for (versions seen: %v)", what, i+1, v, a.versions)
			case n < last:
				bad++
				t.Errorf("%s: version %q was applied again after the newer %q (versions seen: %v)", what, v, asks[a.addon][last].version, a.versions)
			case first[v] != "" && first[v] != a.contents[i]:
				bad++
				t.Errorf("%s: version %q was applied twice with different content:\n%s\n%s", what, v, first[v], a.contents[i])
			}
			if first[v] == "" {
				first[v] = a.contents[i]
			}
			last = max(last, n)
		}
		if a.kind != "Deployment" || len(a.versions) == 0 {
			continue
		}
		made := asks.index(a.addon, a.versions[0])
		if made < 0 {
			continue
		}
		allowed := a.firstGeneration
		for _, r := range asks[a.addon][made+1:] {
			if r.install {
				break // another Addon, whose objects are others
			}
			allowed++
		}
		if a.generation > allowed {
			bad++
			t.Errorf("%s: generation %d, but at most %d was possible from the renders asked for since it was made: its spec changed more often than the renders (versions seen: %v)", what, a.generation, allowed, a.versions)
		}
	}
	return objects, contents, bad
}

// checkPostHooks counts the post hook Jobs (hook names one, such as
// "seed") created again for an install after one of the same install had
// completed: a post hook that succeeded must not run again. One that had
// not succeeded may be retried; retries counts those. installs are the
// resourceVersions at which each Addon was created, by its namespace/name:
// a Job belongs to the last Addon of the name created before it.
func (h *history) checkPostHooks(t *testing.T, hook string, installs map[string][]string) (runs, reruns, retries int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	byInstall := map[string][]*hookJob{}
	for _, j := range h.jobs {
		rvs, ok := installs[j.addon]
		if !ok || !strings.HasSuffix(j.name, "-"+hook) {
			continue
		}
		n := 0
		for i, rv := range rvs {
			if rvLess(t, rv, j.createdRV) {
				n = i + 1
			}
		}
		key := fmt.Sprintf("%s, install %d", j.addon, n)
		byInstall[key] = append(byInstall[key], j)
	}
	for key, jobs := range byInstall {
		slices.SortFunc(jobs, func(a, b *hookJob) int {
			c, err := resourceversion.CompareResourceVersion(a.createdRV, b.createdRV)
			if err != nil {
				t.Fatal(err)
			}
			return c
		})
		runs += len(jobs)
		for i, j := range jobs {
			rerun := slices.IndexFunc(jobs[:i], func(prev *hookJob) bool {
				return prev.completedRV != "" && rvLess(t, prev.completedRV, j.createdRV)
			})
			switch {
			case rerun >= 0:
				reruns++
				t.Errorf("%s: the %s hook Job %s/%s was created again (rv %s) after one had succeeded (rv %s)", key, hook, j.namespace, j.name, j.createdRV, jobs[rerun].completedRV)
			case i > 0:
				retries++
			}
		}
	}
	return runs, reruns, retries
}

// lostEnds is the count of Jobs deleted while the watch was broken.
func (h *history) lostEnds() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unknownEnd
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

// killPoint names where the controller stood on an add-on when it was
// killed, from the Addon's status just before the kill: the hook running
// (status.hook), a post event pending after its apply was recorded
// (status.pendingHook), an event recorded done (status.preHooksDone: by
// event, and whether hook-succeeded objects are still to delete), the sync
// done, or not yet at its hooks (fetch,
// render, preview, the inventory).
func killPoint(ctx context.Context, admin client.Client, key client.ObjectKey) string {
	a := &capstanv1.Addon{}
	err := admin.Get(ctx, key, a)
	switch {
	case apierrors.IsNotFound(err):
		return "Addon absent"
	case err != nil:
		return "unknown"
	}
	st := a.Status
	switch {
	case st.Hook != nil:
		return st.Hook.Event + " hook running"
	case a.DeletionTimestamp != nil && st.PendingHook != nil:
		return st.PendingHook.Event + " pending"
	case a.DeletionTimestamp != nil:
		return "uninstalling, no hook running"
	case st.PendingHook != nil:
		return st.PendingHook.Event + " pending, apply recorded"
	case st.PreHooksDone != nil:
		return hooksDone(st.PreHooksDone)
	case st.ObservedGeneration == a.Generation && st.Phase == capstanv1.PhaseSynced:
		return "synced"
	}
	return "before its hooks"
}

// hooksDone labels a status.preHooksDone: a pre event's record stands
// until its apply is recorded, while a post event's, or one of no event,
// stands only for the hook-succeeded objects still to delete.
func hooksDone(d *capstanv1.PendingHook) string {
	left := ""
	if len(d.Objects) > 0 {
		left = ", its hook-succeeded objects still to delete"
	}
	switch d.Event {
	case "":
		return "hook-succeeded objects of a recorded run still to delete"
	case "pre-install", "pre-upgrade":
		return d.Event + " done, apply not recorded" + left
	}
	return d.Event + " done" + left
}
