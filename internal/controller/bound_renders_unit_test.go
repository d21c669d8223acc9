package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"capstan.dev/capstan/internal/render"
)

// TestBoundRenders: a render that the sandbox stopped at a bound is
// refused at once while its inputs stay the same and its pause lasts; the
// pause doubles with each stop in a row up to the most; new inputs, a
// refresh, another Addon of the same name or any other end of a render
// render at once, and all but a refresh forget the stop.
func TestBoundRenders(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	addon := types.NamespacedName{Namespace: "team", Name: "spin"}
	a := boundKey{uid: "u1", generation: 3, hash: "sha256:aa"}
	with := func(f func(*boundKey)) boundKey { k := a; f(&k); return k }
	// A step asks admit at `at`; when the render may run, it ends with
	// `end`: "time" or "memory" (a bound), "template", "ok" or "cancel".
	// refusedUntil is the end of the pause a refusal names (0: admitted);
	// stopUntil the pause a stop records.
	type step struct {
		at                      time.Duration
		key                     boundKey
		refresh                 bool
		end                     string
		refusedUntil, stopUntil time.Duration
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a stop is refused until its pause ends, which doubles", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: a, refusedUntil: 10 * time.Minute},
			{at: 10*time.Minute - time.Second, key: a, refusedUntil: 10 * time.Minute},
			{at: 10 * time.Minute, key: a, end: "time", stopUntil: 30 * time.Minute},
			{at: 29 * time.Minute, key: a, refusedUntil: 30 * time.Minute},
			{at: 31 * time.Minute, key: a, end: "memory", stopUntil: 71 * time.Minute},
		}},
		{"the memory bound is remembered as the time bound is", []step{
			{at: 0, key: a, end: "memory", stopUntil: 10 * time.Minute},
			{at: 5 * time.Minute, key: a, refusedUntil: 10 * time.Minute},
		}},
		{"new values render at once, and the old stop is forgotten", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: with(func(k *boundKey) { k.hash = "sha256:bb" }), end: "ok"},
			{at: 2 * time.Minute, key: a, end: "time", stopUntil: 12 * time.Minute},
		}},
		{"new values that stop again start their own pause", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: with(func(k *boundKey) { k.hash = "sha256:bb" }), end: "time", stopUntil: 11 * time.Minute},
			{at: 2 * time.Minute, key: a, end: "ok"},
		}},
		{"a new generation renders at once", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: with(func(k *boundKey) { k.generation = 4 }), end: "ok"},
		}},
		{"an upgrade render is another render", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: with(func(k *boundKey) { k.upgrade = true }), end: "template"},
		}},
		{"an Addon made anew under the same name renders at once", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: with(func(k *boundKey) { k.uid = "u2" }), end: "ok"},
		}},
		{"a refresh renders at once, and a stop after it doubles the pause", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: a, refresh: true, end: "time", stopUntil: 21 * time.Minute},
			{at: 2 * time.Minute, key: a, refusedUntil: 21 * time.Minute},
		}},
		{"a render that succeeds forgets the stop", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: a, refresh: true, end: "ok"},
			{at: 2 * time.Minute, key: a, end: "time", stopUntil: 12 * time.Minute},
		}},
		{"a template error forgets the stop", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: a, refresh: true, end: "template"},
			{at: 2 * time.Minute, key: a, end: "ok"},
		}},
		{"a render cut short by the controller's stop keeps the stop", []step{
			{at: 0, key: a, end: "time", stopUntil: 10 * time.Minute},
			{at: time.Minute, key: a, refresh: true, end: "cancel"},
			{at: 2 * time.Minute, key: a, refusedUntil: 10 * time.Minute},
		}},
	}
	ends := map[string]error{
		"time":     &render.LimitError{Chart: "spin", Bound: "time", Timeout: 30 * time.Second},
		"memory":   &render.LimitError{Chart: "spin", Bound: "memory", Memory: 512 << 20},
		"template": &render.TemplateError{Stage: "execute", Template: "spin/templates/cm.yaml"},
		"cancel":   context.Canceled,
		"ok":       nil,
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b boundRenders
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				err := b.admit(addon, st.key, st.refresh, now)
				if st.refusedUntil > 0 {
					checkStop(t, fmt.Sprintf("step %d refused", i), err, t0.Add(st.refusedUntil))
					continue
				}
				if err != nil {
					t.Fatalf("step %d: refused (%v); want it rendered", i, err)
				}
				got := b.record(addon, st.key, ends[st.end], now)
				if st.stopUntil > 0 {
					checkStop(t, fmt.Sprintf("step %d stopped", i), got, t0.Add(st.stopUntil))
				} else if got != ends[st.end] {
					t.Fatalf("step %d: record returned %v; want the render's own %v", i, got, ends[st.end])
				}
			}
		})
	}
}

// checkStop checks a remembered stop: the sandbox's error, found as one,
// its message, and when its pause ends.
func checkStop(t *testing.T, what string, err error, until time.Time) {
	t.Helper()
	var stop *boundStop
	if !errors.As(err, &stop) {
		t.Fatalf("%s: %v; want a remembered stop", what, err)
	}
	if !stop.until.Equal(until) {
		t.Fatalf("%s: pause until %s; want %s", what, stop.until.Format(time.TimeOnly), until.Format(time.TimeOnly))
	}
	if le := (*render.LimitError)(nil); !errors.As(err, &le) {
		t.Errorf("%s: %v is not a *render.LimitError", what, err)
	}
	msg := err.Error()
	for _, want := range []string{"took longer than", until.Format(time.RFC3339), "capstan.dev/refresh", "change of the spec or the values"} {
		if want == "took longer than" && stop.Bound == "memory" {
			want = "needed more than"
		}
		if !strings.Contains(msg, want) {
			t.Errorf("%s: the message does not say %q: %s", what, want, msg)
		}
	}
}

// TestBoundRendersPause: the pause doubles from the first up to the most,
// and stays there.
func TestBoundRendersPause(t *testing.T) {
	var b boundRenders
	want := []time.Duration{10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 80 * time.Minute, 160 * time.Minute, 4 * time.Hour, 4 * time.Hour}
	for i, w := range want {
		if got := b.pause(i + 1); got != w {
			t.Errorf("pause after %d stops = %s; want %s", i+1, got, w)
		}
	}
	if got := b.pause(1000); got != maxBoundRetry {
		t.Errorf("pause after 1000 stops = %s; want %s", got, maxBoundRetry)
	}
}

// TestBoundRendersForget: an Addon that is gone leaves nothing behind, and
// one Addon's stop says nothing of another's.
func TestBoundRendersForget(t *testing.T) {
	now := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	var b boundRenders
	one, other := types.NamespacedName{Namespace: "team", Name: "one"}, types.NamespacedName{Namespace: "team", Name: "other"}
	key := boundKey{uid: "u1", generation: 1, hash: "sha256:aa"}
	_ = b.record(one, key, &render.LimitError{Chart: "spin", Bound: "time"}, now)
	if err := b.admit(other, boundKey{uid: "u2", generation: 1, hash: "sha256:aa"}, false, now); err != nil {
		t.Errorf("another Addon with the same chart and values was refused: %v", err)
	}
	if err := b.admit(one, key, false, now); err == nil {
		t.Fatal("the stopped render was admitted")
	}
	b.forget(one)
	if len(b.m) != 0 {
		t.Errorf("after forget, %d entries are left", len(b.m))
	}
	if err := b.admit(one, key, false, now); err != nil {
		t.Errorf("after forget, the render was refused: %v", err)
	}
}
