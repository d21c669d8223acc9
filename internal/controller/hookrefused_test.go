package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/hooks"
)

// refusingReads has the API server, as the controller's clients see it,
// refuse (403 Forbidden) every GET of one object's path while refuse is
// set, as an authorizer whose rule was taken away for a while would. It
// counts the refusals.
type refusingReads struct {
	next    http.RoundTripper
	path    string
	refuse  *atomic.Bool
	refused *atomic.Int32
}

func (t refusingReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != t.path || !t.refuse.Load() {
		return t.next.RoundTrip(req)
	}
	t.refused.Add(1)
	body, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
		Message: "no reads of it for a while",
	})
	return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// refuseReadsOf has the controller's clients see every read of the path
// refused while the returned flag is set.
func refuseReadsOf(path string) (func(*controller.AddonReconciler), *atomic.Bool, *atomic.Int32) {
	refuse, refused := &atomic.Bool{}, &atomic.Int32{}
	return func(r *controller.AddonReconciler) {
		cfg := rest.CopyConfig(r.RestConfig)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return refusingReads{next: rt, path: path, refuse: refuse, refused: refused}
		})
		r.RestConfig = cfg
	}, refuse, refused
}

// TestRefusedReadsOfARunningHookShow installs the dbapp chart whose
// post-install Job waits for a node, and has the API server refuse every
// read of that Job for a while. The looks that wait for it say so in the
// Ready message, with what to fix if it lasts, rather than only "waiting
// for … to finish" until spec.hookTimeout; no hook failed, so the add-on
// is not Stalled. Once the reads are answered and the node is there, the
// same Job, made once, succeeds. Before, the refusal showed only in the
// controller's log.
func TestRefusedReadsOfARunningHookShow(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	label := "capstan.dev/" + ns
	change, refuse, refused := refuseReadsOf("/apis/batch/v1/namespaces/" + ns + "/jobs/db-second")
	shard := startShardWith(t, "refu-"+ns[len(ns)-5:], change)
	a := dbapp(t, ns, `{extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", nodeLabel: "`+label+`"}]}`, shard)

	eventually(t, 90*time.Second, "the second Job to be made", func() bool { return job(t, ns, "db-second") != nil })
	uid := job(t, ns, "db-second").UID
	refuse.Store(true)
	got := waitFor(t, a, 60*time.Second, "the waiting message to say the read was refused", func(cur *capstanv1.Addon) bool {
		m := readyMessage(cur)
		return strings.HasPrefix(m, "waiting for the post-install hook Job "+ns+"/db-second to finish") && strings.Contains(m, "reading it was refused")
	})
	refuse.Store(false)
	m := readyMessage(got)
	for _, want := range []string{"no reads of it for a while", "Capstan reads it again", "get on jobs.batch in " + ns} {
		if !strings.Contains(m, want) {
			t.Errorf("Ready message %q; want %q in it", m, want)
		}
	}
	if isStalled(got) || readyReason(got) != "WaitingForHook" {
		t.Errorf("the add-on is %s, Stalled %t; want WaitingForHook: no hook failed", readyReason(got), isStalled(got))
	}
	if h := got.Status.Hook; h == nil || h.Name != "db-second" {
		t.Errorf("status.hook = %+v; want the second Job", h)
	}
	if refused.Load() == 0 {
		t.Error("no read of the second Job was refused")
	}

	labelNode(t, label)
	synced(t, a)
	if j := job(t, ns, "db-second"); j == nil || j.UID != uid || j.Status.Succeeded != 1 {
		t.Errorf("second %s; want the Job made before the refusals (%s), succeeded", jobString(j), uid)
	}
	if n := rec.count("Job/db-second", watch.Added); n != 1 {
		t.Errorf("the second Job was created %d times; want once", n)
	}
}

// TestRefusedPreDeleteReadIsNoFailure deletes an add-on whose pre-delete
// backup Job waits for a node, and has the API server refuse one read of
// the Job while the uninstall waits for it. No hook failed: the add-on is
// never Stalled nor told that the pre-delete hook failed (with advice to
// orphan the software), status.hook goes on naming the Job, and once the
// node is there the same Job, made once, succeeds and the uninstall
// finishes. Before, the refusal stalled the uninstall as a hook's failure.
func TestRefusedPreDeleteReadIsNoFailure(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	label := "capstan.dev/" + ns
	h := &refusingHooks{HookRunner: reconciler.Hooks, event: "pre-delete", name: "db-backup", result: make(chan refusedRead, 1)}
	shard := startShardWith(t, "prdl-"+ns[len(ns)-5:], func(r *controller.AddonReconciler) { r.Hooks = h })
	a := dbapp(t, ns, `{hooks: {backup: {nodeLabel: "`+label+`"}}}`, shard,
		withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	synced(t, a)
	if err := admin.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var refused refusedRead
	select {
	case refused = <-h.result:
	case <-time.After(90 * time.Second):
		t.Fatal("the uninstall never came to read the backup Job")
	}
	if !hooks.IsReadError(refused.err) {
		t.Errorf("the run returned %v; want a refused read", refused.err)
	}
	// NOTE: a stall shows between two looks; every status is read for
	// one, for a while.
	deadline := time.Now().Add(15 * time.Second)
	var named bool
	for time.Now().Before(deadline) {
		cur := getAddon(t, a)
		if m := readyMessage(cur); isStalled(cur) || strings.Contains(m, "the pre-delete hook failed") {
			t.Fatalf("the add-on is Stalled %t with %q; want no hook's failure: the read was refused", isStalled(cur), m)
		}
		named = named || cur.Status.Hook != nil && cur.Status.Hook.Name == "db-backup"
		time.Sleep(100 * time.Millisecond)
	}
	if !named {
		t.Error("status.hook never named the backup Job after the refusal")
	}
	if j := job(t, ns, "db-backup"); j == nil || j.UID != refused.uid || j.DeletionTimestamp != nil {
		t.Fatalf("backup %s; want the running Job whose read was refused (%s), left as it is", jobString(j), refused.uid)
	}

	labelNode(t, label)
	gone(t, a)
	if n := rec.count("Job/db-backup", watch.Added); n != 1 {
		t.Errorf("the backup Job was created %d times; want once", n)
	}
}

// failingWrites has the API server, as the controller's clients see it,
// answer the first writes (PATCH or POST) of one object's path with 500
// InternalError, as an admission webhook that timed out would, while left
// is above zero. It counts them.
type failingWrites struct {
	next    http.RoundTripper
	path    string
	left    *atomic.Int32
	refused *atomic.Int32
}

func (t failingWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPatch && req.Method != http.MethodPost || req.URL.Path != t.path || t.left.Add(-1) < 0 {
		return t.next.RoundTrip(req)
	}
	t.refused.Add(1)
	body, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Code: http.StatusInternalServerError,
		Message: `Internal error occurred: failed calling webhook "check.example.com": context deadline exceeded`,
	})
	return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// TestPreDeleteRefusedForAMoment deletes an add-on whose
// pre-delete backup Job the API server fails to take once (a webhook that
// timed out). That is no hook failure: the uninstall is retried with
// backoff, never Stalled nor told that the pre-delete hook failed (with
// advice to orphan the software), and the Job is made on the retry and
// the uninstall finishes, long before the resync. Before, the refusal
// stalled the uninstall as the hook's failure until the resync.
func TestPreDeleteRefusedForAMoment(t *testing.T) {
	ns := newNamespace(t)
	left, refused := &atomic.Int32{}, &atomic.Int32{}
	left.Store(1)
	shard := startShardWith(t, "tpdl-"+ns[len(ns)-5:], func(r *controller.AddonReconciler) {
		r.Config.ResyncInterval = time.Hour
		cfg := rest.CopyConfig(r.RestConfig)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return failingWrites{next: rt, path: "/apis/batch/v1/namespaces/" + ns + "/jobs/db-backup", left: left, refused: refused}
		})
		r.RestConfig = cfg
	})
	a := dbapp(t, ns, "", shard, withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	synced(t, a)
	if err := admin.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		cur := &capstanv1.Addon{}
		err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), cur)
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m := readyMessage(cur); isStalled(cur) || strings.Contains(m, "the pre-delete hook failed") {
			t.Fatalf("the add-on is Stalled %t with %q; want the refused hook retried: the API server only could not take it for a moment", isStalled(cur), m)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Addon is still there after 90s: %s", describeStatus(cur))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if refused.Load() != 1 {
		t.Errorf("%d writes of the backup Job were failed; want 1", refused.Load())
	}
}

// TestPostDeleteRefusedForAMoment deletes an add-on whose post-delete Job
// the API server fails to take once (a webhook that timed out). That is no
// hook failure either: every Ready message the uninstall writes, read from
// a watch of the Addon, says nothing of a failed post-delete hook, and the
// Job is made on the retry. Before, the retry came, but the message said
// the post-delete hook had failed and that only those hooks would run
// again.
func TestPostDeleteRefusedForAMoment(t *testing.T) {
	ns := newNamespace(t)
	left, refused := &atomic.Int32{}, &atomic.Int32{}
	left.Store(1)
	shard := startShardWith(t, "tpdr-"+ns[len(ns)-5:], func(r *controller.AddonReconciler) {
		r.Config.ResyncInterval = time.Hour
		cfg := rest.CopyConfig(r.RestConfig)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return failingWrites{next: rt, path: "/apis/batch/v1/namespaces/" + ns + "/jobs/db-cleanup", left: left, refused: refused}
		})
		r.RestConfig = cfg
	})
	a := dbapp(t, ns, `{extraHooks: [{name: cleanup, kind: Job, events: post-delete}]}`, shard,
		withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	synced(t, a)
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &capstanv1.AddonList{}, client.InNamespace(a.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := admin.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(90 * time.Second)
	var said string
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the Addon ended before it was deleted")
			}
			cur, isAddon := ev.Object.(*capstanv1.Addon)
			if !isAddon || cur.Name != a.Name {
				continue
			}
			m := readyMessage(cur)
			if isStalled(cur) || strings.Contains(m, "the post-delete hook failed") {
				t.Fatalf("the add-on is Stalled %t with %q; want the refused hook retried as no failure: the API server only could not take it for a moment", isStalled(cur), m)
			}
			if strings.Contains(m, "could not take it for a moment") {
				said = m
			}
			if ev.Type == watch.Deleted {
				if refused.Load() != 1 {
					t.Errorf("%d writes of the post-delete Job were failed; want 1", refused.Load())
				}
				if !strings.Contains(said, "goes on refusing it") || !strings.Contains(said, "set spec.deletionPolicy: Orphan") {
					t.Errorf("the refusal was said as %q; want the way out should it last: the Addon keeps its finalizer meanwhile", said)
				}
				return
			}
		case <-deadline:
			t.Fatal("the Addon is still there after 90s")
		}
	}
}
