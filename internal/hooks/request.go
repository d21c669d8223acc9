package hooks

import (
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/render"
)

// Request is one event's hooks to run.
type Request struct {
	// Applier applies and deletes as the add-on's identity.
	Applier *apply.Applier
	// Addon is the add-on the hooks belong to.
	Addon *capstanv1.Addon
	// Event is the hook event, such as pre-install.
	Event string
	// Hooks are every hook of the render, prepared like the other objects
	// (namespace, labels); the runner runs those of Event.
	Hooks []render.Hook
	// Timeout bounds each hook; zero means DefaultTimeout.
	Timeout time.Duration
	// Progress is called when a hook starts, so status can show it.
	Progress func(capstanv1.HookProgress)
}
