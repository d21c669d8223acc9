package controller

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestNotReady: what a dependency's status says to the add-ons that depend
// on it. A Degraded one counts as Ready for its generation: it is applied
// and was healthy, and holding its dependents would spread its trouble.
func TestNotReady(t *testing.T) {
	addon := func(gen int64, phase capstanv1.Phase, ready metav1.ConditionStatus, observed int64) *capstanv1.Addon {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		a.Status.Phase = phase
		if ready != "" {
			a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: ready, Reason: string(phase), ObservedGeneration: observed}}
		}
		return a
	}
	removed := addon(1, capstanv1.PhaseSynced, metav1.ConditionTrue, 1)
	removed.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := []struct {
		name string
		a    *capstanv1.Addon
		want string
	}{
		{"Synced", addon(2, capstanv1.PhaseSynced, metav1.ConditionTrue, 2), ""},
		{"Degraded", addon(2, capstanv1.PhaseDegraded, metav1.ConditionFalse, 2), ""},
		{"Degraded at an older generation", addon(3, capstanv1.PhaseDegraded, metav1.ConditionFalse, 2), "its latest change is not synced yet"},
		{"rolling out", addon(2, capstanv1.PhaseProgressing, metav1.ConditionFalse, 2), "Progressing: Progressing"},
		{"Failed", addon(2, capstanv1.PhaseFailed, metav1.ConditionFalse, 2), "Failed: Failed"},
		{"not reconciled", addon(1, "", "", 0), "not reconciled yet"},
		{"being removed", removed, "being removed"},
	}
	for _, c := range cases {
		if got := notReady(c.a); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, got, c.want)
		}
	}
}

// TestDependencies: the add-ons the controller reads as an Addon's
// dependencies, and indexes it under. A cluster-profile Addon keeps every
// namespace it names; a restricted one only its own, so another
// namespace's add-on is never read for it nor held by it.
func TestDependencies(t *testing.T) {
	cfg := Config{Namespace: "capstan-system"}.WithDefaults()
	deps := []capstanv1.DependencyReference{{Name: "db"}, {Name: "cert-manager", Namespace: "capstan-system"}, {Name: "cache", Namespace: "tenant-b"}, {Name: "queue", Namespace: "tenant-a"}}
	cases := []struct {
		namespace string
		want      []string
	}{
		{"capstan-system", []string{"capstan-system/db", "capstan-system/cert-manager", "tenant-b/cache", "tenant-a/queue"}},
		{"tenant-a", []string{"tenant-a/db", "tenant-a/queue"}},
	}
	for _, c := range cases {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "app"}}
		a.Spec.DependsOn = deps
		var got []string
		for _, k := range cfg.dependencies(a) {
			got = append(got, k.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("an Addon of %s depends on %v; want %v", c.namespace, got, c.want)
		}
		if keys := cfg.dependencyKeys(a); !slices.Equal(keys, c.want) {
			t.Errorf("an Addon of %s is indexed under %v; want %v", c.namespace, keys, c.want)
		}
	}
}
