package controller

import (
	"context"
	"fmt"
	"strings"

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

// plannedHooks lists the hooks this sync would run, in the order they run.
func (s *scope) plannedHooks() []capstanv1.PlannedHook {
	var out []capstanv1.PlannedHook
	pre, post := s.events()
	for _, event := range []string{pre, post} {
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
// not retried at once.
func (r *AddonReconciler) runHooks(ctx context.Context, s *scope, event string) error {
	if event == "" || len(hooks.Select(s.hooks, event)) == 0 {
		return nil
	}
	err := r.Hooks.Run(ctx, hooks.Request{
		Applier: s.applier, Addon: s.addon, Event: event, Hooks: s.hooks, Timeout: r.hookTimeout(s),
		Progress: func(p capstanv1.HookProgress) { r.showHook(ctx, s, &p) },
	})
	r.showHook(ctx, s, nil)
	return err
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
