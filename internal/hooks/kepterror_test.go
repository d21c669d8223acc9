package hooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// TestCreateFailedOverAnEarlierObjectSaysWhy runs a pre-upgrade Pod hook
// that hangs until its timeout, so its Pod stays, then the same hook
// without the nodeSelector that held it: the API server refuses to apply
// it over the old Pod (a Pod's nodeSelector cannot change). Once the hook
// lacks before-hook-creation, once a keep mark keeps its Pod from that
// policy. The error says that the old object was applied over, what kept
// it, and to delete it; not that the next sync runs the hook again, which
// fails the same way until someone does. Before, the error was the API
// server's alone.
func TestCreateFailedOverAnEarlierObjectSaysWhy(t *testing.T) {
	for _, c := range []struct {
		name, policy string
		keep         bool
		says         string
	}{
		{name: "without before-hook-creation", policy: "hook-succeeded", says: "was kept and applied over, because its delete policies lack before-hook-creation; delete Pod %s/db-smoke to run it anew, or add that policy"},
		{name: "kept by a mark", keep: true, says: "(kept by helm.sh/resource-policy: keep); delete Pod %s/db-smoke to run it anew"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			hooksOf := func(hang bool) []render.Hook {
				hs := f.hooksOf(`{extraHooks: [{name: smoke, kind: Pod, events: pre-upgrade, deletePolicy: "`+c.policy+`", hang: `+map[bool]string{true: "true", false: "false"}[hang]+`}]}`, true)
				for _, h := range hs {
					if c.keep && h.Object.GetName() == "db-smoke" {
						a := h.Object.GetAnnotations()
						a["helm.sh/resource-policy"] = "keep"
						h.Object.SetAnnotations(a)
					}
				}
				return hs
			}
			ctx := context.Background()
			req := hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-upgrade", Hooks: hooksOf(true), Timeout: 2 * time.Second,
				Run: "pre-upgrade/one", Keep: apply.Recreating}
			if e := hookError(t, f.runner.Run(ctx, req)); e.Reason != hooks.ReasonTimeout || e.Hook.Name != "db-smoke" {
				t.Fatalf("the first run returned %v; want the smoke Pod's timeout", e)
			}

			req.Hooks, req.Run, req.Timeout = hooksOf(false), "pre-upgrade/two", minute
			err := f.runner.Run(ctx, req)
			e := hookError(t, err)
			if e.Reason != hooks.ReasonCreateFailed || !e.Kept || hooks.Transient(err) {
				t.Fatalf("the second run returned %v (reason %s, kept %t); want a CreateFailed over the kept Pod", err, e.Reason, e.Kept)
			}
			msg := err.Error()
			if want := strings.ReplaceAll(c.says, "%s", f.ns); !strings.Contains(msg, want) {
				t.Errorf("the error says %q; want it to say %q", msg, want)
			}
			if strings.Contains(msg, "The next sync runs the hook again") {
				t.Errorf("the error says %q; the next sync fails the same way until the Pod is deleted", msg)
			}
		})
	}
}
