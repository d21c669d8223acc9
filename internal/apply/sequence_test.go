package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestSequenceOrder checks the order of a sequence's steps and callbacks,
// and where a failed hook stops it, with nothing to apply: what the API
// server does with each object is the controller suite's business.
func TestSequenceOrder(t *testing.T) {
	kept := []capstanv1.ObjectRef{{APIVersion: "v1", Kind: "Namespace", Name: "apps"}}
	for _, tc := range []struct {
		name      string
		preErr    error
		postErr   error
		want      []string
		wantError string
	}{
		{name: "all steps", want: []string{"step pre-hooks", "pre", "step apply", "step prune", "step post-hooks", "applied", "post"}},
		{name: "a failed pre hook stops before the apply", preErr: errors.New("exit 1"),
			want: []string{"step pre-hooks", "pre"}, wantError: "the pre-install hook failed, so nothing was applied: exit 1"},
		{name: "a failed post hook leaves the apply recorded", postErr: errors.New("exit 2"),
			want:      []string{"step pre-hooks", "pre", "step apply", "step prune", "step post-hooks", "applied", "post"},
			wantError: "the post-install hook failed; the objects are applied, and the next sync runs the post-install hooks again: exit 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			q := Sequence{
				Applier: &Applier{}, Inventory: kept, Install: true,
				// A Namespace is never pruned, so the prune asks nothing of
				// the API server.
				Prune:    kept,
				PreEvent: "pre-install", PostEvent: "post-install",
				PreHooks:  func(context.Context) error { got = append(got, "pre"); return tc.preErr },
				PostHooks: func(context.Context) error { got = append(got, "post"); return tc.postErr },
				SaveInventory: func(context.Context, []capstanv1.ObjectRef) error {
					got = append(got, "inventory")
					return nil
				},
				Applied: func(_ context.Context, r Result) error {
					got = append(got, "applied")
					if !slices.Equal(r.Inventory, kept) {
						t.Errorf("the recorded inventory is %v; want %v", r.Inventory, kept)
					}
					return nil
				},
				Step: func(_ context.Context, name string) error { got = append(got, "step "+name); return nil },
			}
			res, err := q.Run(context.Background())
			if !slices.Equal(got, tc.want) {
				t.Errorf("order = %v; want %v", got, tc.want)
			}
			if tc.wantError == "" && err != nil || tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)) {
				t.Errorf("Run = %v; want %q", err, tc.wantError)
			}
			if res.Applied != 0 || len(res.Pruned) != 0 || !slices.Equal(res.Inventory, kept) {
				t.Errorf("result = %+v; want nothing applied or pruned, and the inventory kept", res)
			}
		})
	}
}

func TestSequenceStepStops(t *testing.T) {
	stop := errors.New("stopped by the test")
	ran := false
	q := Sequence{Applier: &Applier{},
		PreHooks: func(context.Context) error { ran = true; return nil },
		Step: func(_ context.Context, name string) error {
			if name == "pre-hooks" {
				return stop
			}
			return nil
		},
	}
	if _, err := q.Run(context.Background()); !errors.Is(err, stop) || ran {
		t.Errorf("Run = %v (pre hooks ran: %v); want it stopped before the pre hooks", err, ran)
	}
}
