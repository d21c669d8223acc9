package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// HookRunner runs the Helm hooks of one event the way Helm does: in weight
// order, waiting for Jobs and Pods, honouring delete policies. hooks.Runner
// implements it; tests may give another.
type HookRunner interface {
	Run(ctx context.Context, req hooks.Request) error
}

// The hook events of each lifecycle, before and after the apply.
var hookEvents = map[Lifecycle][2]string{
	LifecycleInstall: {"pre-install", "post-install"},
	LifecycleUpgrade: {"pre-upgrade", "post-upgrade"},
	LifecycleDelete:  {"pre-delete", "post-delete"},
}

// events returns the hook events this sync runs before and after the
// apply; either may be empty. A retry runs only the post event that failed.
func (s *scope) events() (pre, post string) {
	if s.lifecycle == LifecycleRetryPost {
		return "", s.addon.Status.PendingHook.Event
	}
	e := hookEvents[s.lifecycle]
	if d := s.addon.Status.PreHooksDone; d != nil && s.render != nil && d.Event == e[0] && d.Hash == s.render.Hash {
		return "", e[1] // the pre hooks of this render ran before a stop
	}
	return e[0], e[1]
}

// plannedHooks lists the hooks this sync would run, in the order they run,
// then the chart's tests when spec.test.enable runs them after it, then a
// folder's SyncFail hooks, which run if it fails: a person who
// approves the plan approves them too, by their digests in its hash.
func (s *scope) plannedHooks() []capstanv1.PlannedHook {
	var out []capstanv1.PlannedHook
	pre, post := s.events()
	events := []string{pre, post}
	if pre != "" || post != "" {
		if t := s.addon.Spec.Test; t != nil && t.Enable {
			events = append(events, render.TestEvent)
		}
		events = append(events, render.SyncFailEvent)
	}
	for _, event := range events {
		if event == "" {
			continue
		}
		for _, h := range hooks.Select(s.hooks, event) {
			out = append(out, capstanv1.PlannedHook{ObjectRef: capstanv1.RefOf(h.Object), Events: []string{event}, Weight: h.Weight, DeletePolicies: h.DeletePolicies})
		}
	}
	return out
}

// hookNotices reports the hooks of events Helm does not know: Helm never
// runs them, and neither does Capstan, but the chart author should know.
// A folder's render gives its own notices (render.Result.Notices).
func hookNotices(hs []render.Hook) []capstanv1.Notice {
	var out []capstanv1.Notice
	for _, h := range hs {
		if len(h.UnknownEvents) == 0 {
			continue
		}
		out = append(out, capstanv1.Notice{
			Path: "hooks/" + h.Object.GetKind() + "/" + h.Object.GetName(),
			Message: fmt.Sprintf("the helm.sh/hook annotation in %s names event(s) Helm does not know (%s), so, as in Helm, the hook never runs; the known events are %s",
				h.Template, strings.Join(h.UnknownEvents, ", "), strings.Join(render.KnownHookEvents(), ", ")),
		})
	}
	return out
}

// runHooks runs the hooks of one event, if there are any. A hook that
// fails is terminal: the add-on is Stalled until the next change or resync,
// not retried at once. A retry of a pending post event goes on from the
// run that stopped (runEvent), and so does a run of an event that
// status.hook shows running: a controller stopped while it ran, or after
// its hooks succeeded and before that was recorded. A pre-upgrade
// migration Job still running is then waited for, not deleted and started
// anew, and one that succeeded is not run again; the run name (hookRun)
// holds the render, so a new render runs every hook.
func (r *AddonReconciler) runHooks(ctx context.Context, s *scope, event string) error {
	h := s.addon.Status.Hook
	return r.runEvent(ctx, s, event, s.lifecycle == LifecycleRetryPost || h != nil && h.Event == event)
}

// runEvent runs the hooks of one event. With resume, this sync goes on
// from a run of the same event whose end was never recorded
// (status.pendingHook): a controller killed after a post hook's Job
// completed, or while it ran, or a post hook that failed. The hooks that
// succeeded in that run are not run again, and the one it was waiting for
// (status.hook) is waited for again; the others run as usual.
func (r *AddonReconciler) runEvent(ctx context.Context, s *scope, event string, resume bool) error {
	if !s.hasHooks(event) {
		return nil
	}
	var waiting *capstanv1.ObjectRef
	if h := s.addon.Status.Hook; resume && h != nil && h.Event == event {
		ref := h.ObjectRef
		waiting = &ref
	}
	hs := s.hooks
	if event == render.TestEvent {
		hs = testHooks(hs)
	}
	err := r.Hooks.Run(ctx, hooks.Request{
		Applier: s.applier, Addon: s.addon, Event: event, Hooks: hs, Timeout: r.hookTimeout(s),
		Progress: func(p capstanv1.HookProgress) { r.showHook(ctx, s, &p) },
		Run:      hookRun(s, event), Resume: resume, Waiting: waiting,
		AwaitHealthy: func(ctx context.Context) error { return r.awaitCurrent(ctx, s, event) },
	})
	if err == nil {
		// Tests stop here, as a controller killed after the hooks
		// succeeded and before it recorded that would: status.hook still
		// names the last hook.
		if err := r.stepHook(ctx, s, event+" succeeded"); err != nil {
			return err
		}
	}
	r.showHook(ctx, s, nil)
	return err
}

// hookRun names one run of an event's hooks, for the runner to stamp on
// the hook objects. It holds the Addon's UID (an Addon made again under
// the same name is another release, whose post-install hooks run anew),
// the event, the render, and the last apply (status.lastAppliedTime, which
// the apply before the post hooks sets): the same render applied again
// later, as when a failed upgrade is rolled back to the values before it,
// is another run.
func hookRun(s *scope, event string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", s.addon.UID, event)
	if s.render != nil {
		h.Write([]byte(s.render.Hash))
	}
	if t := s.addon.Status.LastAppliedTime; t != nil {
		// NOTE: status keeps whole seconds; so does the name.
		fmt.Fprintf(h, "\n%s", t.UTC().Format(time.RFC3339))
	}
	if event == render.TestEvent {
		// NOTE: each request is a run of its own: a resumed run must not
		// take an earlier run's test, kept by its policies, for its own.
		fmt.Fprintf(h, "\n%s", s.addon.Annotations[capstanv1.TestAnnotation])
	}
	return event + "/" + hex.EncodeToString(h.Sum(nil))[:16]
}

// showHook writes the running hook into status at once, so a long hook is
// visible while it runs.
func (r *AddonReconciler) showHook(ctx context.Context, s *scope, p *capstanv1.HookProgress) {
	if p == nil && s.addon.Status.Hook == nil {
		return
	}
	s.addon.Status.Hook = p
	_ = r.checkpointStatus(ctx, s)
}
