package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/values"
)

func jobRef(name string) capstanv1.ObjectRef {
	return capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "ns", Name: name}
}

func jobHook(name, event string) render.Hook {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("batch/v1")
	u.SetKind("Job")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetAnnotations(map[string]string{"helm.sh/hook": event})
	return render.Hook{Object: u, Events: []string{event}}
}

// TestDoneRecordKeepsLeftovers checks that a sync's record of an event
// keeps the objects an earlier record could not delete, the new run's
// object of the same name taking the place of the old, and that an
// uninstall's record does not, and that a record of no event goes once
// its objects are gone.
func TestDoneRecordKeepsLeftovers(t *testing.T) {
	s := &scope{addon: &capstanv1.Addon{}}
	s.addon.Status.PreHooksDone = &capstanv1.PendingHook{Event: "post-upgrade", Run: "old",
		Objects: []capstanv1.HookObject{{ObjectRef: jobRef("stuck"), Run: "old"}, {ObjectRef: jobRef("migrate"), Run: "old"}}}
	d := s.doneRecord("pre-upgrade", "h", "new", []capstanv1.ObjectRef{jobRef("migrate")})
	want := []capstanv1.HookObject{{ObjectRef: jobRef("migrate"), Run: "new"}, {ObjectRef: jobRef("stuck"), Run: "old"}}
	if len(d.Objects) != len(want) || d.Objects[0] != want[0] || d.Objects[1] != want[1] {
		t.Errorf("sync record objects = %+v; want %+v", d.Objects, want)
	}
	if d := s.doneRecord("pre-delete", "", "new", nil); len(d.Objects) != 0 {
		t.Errorf("uninstall record objects = %+v; want none", d.Objects)
	}
	if l := leftOver(d); l == nil || l.Event != "" || len(l.Objects) != 2 {
		t.Errorf("leftOver = %+v; want the objects in a record of no event", l)
	}
	if l := withoutRun(&capstanv1.PendingHook{}); l != nil {
		t.Errorf("withoutRun of a record of no event = %+v; want none", l)
	}
}

// TestHookClash checks that a clean-up that failed holds a sync only when
// a hook of the events it runs makes the same object.
func TestHookClash(t *testing.T) {
	s := &scope{hooks: []render.Hook{jobHook("migrate", "pre-upgrade"), jobHook("notify", "post-upgrade")}}
	left := []capstanv1.HookObject{{ObjectRef: jobRef("notify"), Run: "old"}}
	if got := s.hookClash(left, "pre-upgrade", "post-upgrade"); got != "post-upgrade" {
		t.Errorf("clash = %q; want post-upgrade", got)
	}
	if got := s.hookClash(left, "pre-upgrade", ""); got != "" {
		t.Errorf("clash with no post event = %q; want none", got)
	}
	if got := s.hookClash([]capstanv1.HookObject{{ObjectRef: jobRef("gone"), Run: "old"}}, "pre-upgrade", "post-upgrade"); got != "" {
		t.Errorf("clash of an object no hook makes = %q; want none", got)
	}
}

// TestCleanUpErrorIsNoHookFailure checks what a failed delete after the
// record says, and that it is retried, not stalled: the SyncFail hooks run
// only for a terminal error.
func TestCleanUpErrorIsNoHookFailure(t *testing.T) {
	err := error(&hooks.CleanUpError{Event: "post-upgrade", Object: jobRef("notify"), Err: errors.New("held by its finalizers x")})
	msg := err.Error()
	for _, want := range []string{"the post-upgrade hooks all succeeded and are recorded done", "deleting Job ns/notify", "held by its finalizers x", "no hook runs again, and it is deleted once it can be"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "runs the hook again") || strings.Contains(msg, "hook failed") {
		t.Errorf("message %q says a hook failed or runs again", msg)
	}
	if c := classify(err); c == classTerminal {
		t.Error("classified terminal; want it retried, with no SyncFail hooks run")
	}
}

// TestPendingKeepsWhatSucceeded checks that a failed post event's record
// names the hook-succeeded objects left for its retry, with their run,
// and that a pending event no run goes on from hands them to
// status.preHooksDone, to be deleted, keeping what that names already.
func TestPendingKeepsWhatSucceeded(t *testing.T) {
	s := &scope{addon: &capstanv1.Addon{}}
	st := &s.addon.Status
	st.PendingHook = &capstanv1.PendingHook{Event: "post-install", Hash: "h"}
	failed := &hooks.Error{Event: "post-install", Hook: jobRef("second"), Left: []capstanv1.ObjectRef{jobRef("seed")}}
	keepForRetry(s, "post-upgrade", "run", failed)
	if len(st.PendingHook.Objects) != 0 {
		t.Fatalf("a failure of another event recorded %+v", st.PendingHook.Objects)
	}
	keepForRetry(s, "post-install", "run", failed)
	keepForRetry(s, "post-install", "run", failed) // a retry that fails again
	want := capstanv1.HookObject{ObjectRef: jobRef("seed"), Run: "run"}
	if p := st.PendingHook; p.Event != "post-install" || p.Hash != "h" || len(p.Objects) != 1 || p.Objects[0] != want {
		t.Fatalf("status.pendingHook = %+v; want post-install h with the seed Job of its run", p)
	}
	old := capstanv1.HookObject{ObjectRef: jobRef("stuck"), Run: "old"}
	st.PreHooksDone = &capstanv1.PendingHook{Objects: []capstanv1.HookObject{old}}
	dropPending(st)
	if st.PendingHook != nil || st.PreHooksDone == nil || len(st.PreHooksDone.Objects) != 2 ||
		st.PreHooksDone.Objects[0] != old || st.PreHooksDone.Objects[1] != want {
		t.Errorf("after dropPending: pendingHook %+v, preHooksDone %+v; want the seed Job to delete, after the one left before", st.PendingHook, st.PreHooksDone)
	}
	if !postEvent("post-delete") || postEvent("pre-upgrade") || postEvent(render.TestEvent) {
		t.Error("postEvent misreads the events")
	}
}

// TestPendingKeepsOnlyItsRun checks that a failed retry of a pending post
// event under another run than the one that kept objects for it hands
// those to status.preHooksDone, to be deleted, and keeps only its own: the
// record does not grow with each failed retry under a new run.
func TestPendingKeepsOnlyItsRun(t *testing.T) {
	s := &scope{addon: &capstanv1.Addon{}}
	st := &s.addon.Status
	old := capstanv1.HookObject{ObjectRef: jobRef("seed"), Run: "one"}
	st.PendingHook = &capstanv1.PendingHook{Event: "post-delete", Hash: "h", Objects: []capstanv1.HookObject{old}}
	keepForRetry(s, "post-delete", "two", &hooks.Error{Event: "post-delete", Hook: jobRef("second"), Left: []capstanv1.ObjectRef{jobRef("seed")}})
	want := capstanv1.HookObject{ObjectRef: jobRef("seed"), Run: "two"}
	if p := st.PendingHook; p.Event != "post-delete" || p.Hash != "h" || len(p.Objects) != 1 || p.Objects[0] != want {
		t.Errorf("status.pendingHook = %+v; want only the seed Job of run two", p)
	}
	if d := st.PreHooksDone; d == nil || len(d.Objects) != 1 || d.Objects[0] != old {
		t.Errorf("status.preHooksDone = %+v; want the seed Job of run one, to delete", d)
	}
}

// TestPendingKeepsWhatARefusedReadLeft checks that a post event's run that
// a refused read of a hook ended (hooks.ReadError, no hook's failure)
// records the objects it left for its retry as a failed run does, so that
// none is left recorded nowhere: those of its run in status.pendingHook,
// and an earlier run's in status.preHooksDone, to be deleted; and that it
// is retried with backoff, neither stalled nor worded as a hook's failure.
func TestPendingKeepsWhatARefusedReadLeft(t *testing.T) {
	s := &scope{addon: &capstanv1.Addon{}}
	st := &s.addon.Status
	old := capstanv1.HookObject{ObjectRef: jobRef("seed"), Run: "one"}
	st.PendingHook = &capstanv1.PendingHook{Event: "post-install", Hash: "h", Objects: []capstanv1.HookObject{old}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "second", errors.New("no reads"))
	err := error(&hooks.ReadError{Event: "post-install", Hook: jobRef("second"), Left: []capstanv1.ObjectRef{jobRef("seed")}, Err: forbidden})
	keepForRetry(s, "post-install", "two", fmt.Errorf("the sync: %w", err))
	want := capstanv1.HookObject{ObjectRef: jobRef("seed"), Run: "two"}
	if p := st.PendingHook; p.Event != "post-install" || p.Hash != "h" || len(p.Objects) != 1 || p.Objects[0] != want {
		t.Errorf("status.pendingHook = %+v; want the seed Job of run two", p)
	}
	if d := st.PreHooksDone; d == nil || len(d.Objects) != 1 || d.Objects[0] != old {
		t.Errorf("status.preHooksDone = %+v; want the seed Job of run one, to delete", d)
	}
	if !apierrors.IsForbidden(err) || classify(err) != classTransient {
		t.Errorf("%v reads as Forbidden %t, classified %v; want Forbidden, retried with backoff", err, apierrors.IsForbidden(err), classify(err))
	}
	if msg := err.Error(); strings.Contains(msg, "hook failed") || !strings.Contains(msg, "the next look reads it again") {
		t.Errorf("message %q; want no hook's failure, and what comes next", msg)
	}
}

// TestSyncFailOutcome checks the words of a sync whose SyncFail hooks ran
// after it failed: a SyncFail hook that could not be read is no hook that
// failed, and since the SyncFail hooks are recorded as run whatever their
// end, no look reads it again: the message must not promise one. Before,
// it read "one failed: … it did not fail …, and the next look reads it
// again".
func TestSyncFailOutcome(t *testing.T) {
	failed := errors.New("the PreSync hook failed")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "notify", errors.New("no reads"))
	for _, c := range []struct {
		name      string
		herr      error
		want, not []string
	}{
		{"they succeeded", nil, []string{"the PreSync hook failed; then the SyncFail hooks ran"}, []string{"failed:", "could not be read"}},
		{"one failed", &hooks.Error{Event: "sync-fail", Hook: jobRef("notify"), Reason: "BackoffLimitExceeded"},
			[]string{"the PreSync hook failed; then the SyncFail hooks ran, and one failed: "}, nil},
		{"one could not be read", fmt.Errorf("running: %w", &hooks.ReadError{Event: "sync-fail", Hook: jobRef("notify"), Err: forbidden}),
			[]string{"the PreSync hook failed; then the SyncFail hooks ran, and the sync-fail hook Job", "could not be read", "no reads", "it is left as it is and not waited for"},
			[]string{"one failed", "did not fail", "the next look reads it again"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := syncFailOutcome(failed, c.herr)
			if !errors.Is(err, failed) {
				t.Errorf("%v does not wrap the sync's failure", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q; want %q in it", err, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("%q; want no %q in it", err, n)
				}
			}
		})
	}
}

// TestCleanUpWarningIsMasked checks that a failed clean-up's Warning event
// and log line hide the secret values an admission webhook's refusal to
// delete may quote, as every other hook event does.
func TestCleanUpWarningIsMasked(t *testing.T) {
	const secret = "hunter2-db-password"
	rec := events.NewFakeRecorder(1)
	r := &AddonReconciler{Recorder: rec}
	s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}},
		variables: &values.Variables{Secret: []string{secret}}}
	var logged []string
	ctx := logf.IntoContext(context.Background(), funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}))
	left := []capstanv1.HookObject{{ObjectRef: jobRef("notify"), Run: "run"}}
	r.warnCleanUp(ctx, s, left, errors.New(`admission webhook "guard" denied the request: Job ns/notify holds `+secret), "the sync goes on")
	event := <-rec.Events
	if strings.Contains(event, secret) || !strings.Contains(event, "HookCleanUpFailed") || !strings.Contains(event, "(hidden)") {
		t.Errorf("event %q; want the secret hidden", event)
	}
	if len(logged) != 1 || strings.Contains(logged[0], secret) || !strings.Contains(logged[0], "(hidden)") {
		t.Errorf("log %q; want one line with the secret hidden", logged)
	}
}
