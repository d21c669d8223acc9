package controller

import (
	"context"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/render"
)

// HookRunner runs the Helm hooks of one event the way Helm does: in weight
// order, waiting for Jobs and Pods, honouring delete policies. The hooks
// package implements it.
type HookRunner interface {
	Run(ctx context.Context, req HookRequest) error
}

// HookRequest is one event's hooks to run.
type HookRequest struct {
	// Applier applies and deletes as the add-on's identity.
	Applier *apply.Applier
	// Addon is the add-on the hooks belong to.
	Addon *capstanv1.Addon
	// Event is the hook event, such as pre-install.
	Event string
	// Hooks are every hook of the render, prepared like the other objects
	// (namespace, labels); the runner runs those of Event.
	Hooks []render.Hook
	// Timeout bounds each hook.
	Timeout time.Duration
	// Progress is called when a hook starts, so status can show it.
	Progress func(capstanv1.HookProgress)
}

// The hook events of each lifecycle, before and after the apply.
var hookEvents = map[Lifecycle][2]string{
	LifecycleInstall: {"pre-install", "post-install"},
	LifecycleUpgrade: {"pre-upgrade", "post-upgrade"},
	LifecycleDelete:  {"pre-delete", "post-delete"},
}

// hooksFor returns the runnable hooks of an event.
func hooksFor(hooks []render.Hook, event string) []render.Hook {
	var out []render.Hook
	for _, h := range hooks {
		if !h.Runnable() {
			continue
		}
		for _, e := range h.Events {
			if e == event {
				out = append(out, h)
				break
			}
		}
	}
	return out
}

// runHooks runs the hooks of one event, if there are any.
func (r *AddonReconciler) runHooks(ctx context.Context, s *scope, event string) error {
	hooks := hooksFor(s.hooks, event)
	if len(hooks) == 0 {
		return nil
	}
	if r.Hooks == nil {
		return terminal{errorf("the chart has %d %s hook(s), and this controller was built without a hook runner", len(hooks), event)}
	}
	err := r.Hooks.Run(ctx, HookRequest{
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
	_ = r.writeStatusNow(ctx, s)
}
