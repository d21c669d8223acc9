package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestCreateFailedOverAnEarlierObjectForAnotherReason runs a pre-upgrade
// ConfigMap hook whose policy (hook-failed) keeps its object, then the
// same hook again, which the API server refuses for a reason of its own:
// a label value the chart got wrong, or a policy that forbids it. The
// object kept has nothing to do with either, so the error does not send
// anyone to delete it; it says how to retry once the cause is fixed.
// Before, every refusal over a kept object was blamed on it.
func TestCreateFailedOverAnEarlierObjectForAnotherReason(t *testing.T) {
	for _, c := range []struct {
		name   string
		refuse func(f *fixture, h render.Hook)
	}{
		{name: "a value the chart got wrong", refuse: func(_ *fixture, h render.Hook) {
			labels := h.Object.GetLabels()
			labels["capstan.dev/tier"] = "not a label value!"
			h.Object.SetLabels(labels)
		}},
		{name: "a policy that forbids it", refuse: func(f *fixture, _ render.Hook) {
			f.applier.Client = interceptor.NewClient(admin, interceptor.Funcs{
				Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
					if raw, err := json.Marshal(obj); err == nil && strings.Contains(string(raw), `"name":"db-settings"`) {
						return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "db-settings", errors.New("the registry policy denies it"))
					}
					return c.Apply(ctx, obj, opts...)
				},
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			hooksOf := func() []render.Hook {
				return f.hooksOf(`{extraHooks: [{name: settings, kind: ConfigMap, events: pre-upgrade, deletePolicy: hook-failed}]}`, true)
			}
			ctx := context.Background()
			req := hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-upgrade", Hooks: hooksOf(), Timeout: minute, Run: "pre-upgrade/one"}
			if err := f.runner.Run(ctx, req); err != nil {
				t.Fatalf("the first run: %v", err)
			}
			if f.configMap("db-settings") == nil {
				t.Fatal("the first run left no ConfigMap to apply over")
			}

			req.Hooks, req.Run = hooksOf(), "pre-upgrade/two"
			for _, h := range req.Hooks {
				if h.Object.GetName() == "db-settings" {
					c.refuse(f, h)
				}
			}
			err := f.runner.Run(ctx, req)
			e := hookError(t, err)
			if e.Reason != hooks.ReasonCreateFailed || e.Kept || hooks.Transient(err) {
				t.Fatalf("the second run returned %v (reason %s, kept %t); want a CreateFailed that blames no kept object", err, e.Reason, e.Kept)
			}
			msg := err.Error()
			if strings.Contains(msg, "applied over") || strings.Contains(msg, "to run it anew") {
				t.Errorf("the error says %q; the object kept is not why the API server refused the hook", msg)
			}
			if !strings.Contains(msg, "spec.syncRequest") {
				t.Errorf("the error says %q; want it to say how to retry", msg)
			}
		})
	}
}
