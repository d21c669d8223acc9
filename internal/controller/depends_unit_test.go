package controller

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
)

// TestNotReady: what a dependency's status says to the add-ons that depend
// on it. A Degraded one counts as Ready for its generation: it is applied
// and was healthy, and holding its dependents would spread its trouble. So
// does one a gate holds (OutOfSync, Suspended) once its latest change is
// applied and its objects are Healthy for it; one whose latest change the
// gate holds, or whose objects are not Healthy, or that is Blocked or
// Failed, still holds its dependents.
func TestNotReady(t *testing.T) {
	addon := func(gen int64, phase capstanv1.Phase, ready metav1.ConditionStatus, observed int64) *capstanv1.Addon {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		a.Status.Phase = phase
		if ready != "" {
			a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: ready, Reason: string(phase), ObservedGeneration: observed}}
		}
		return a
	}
	// held is an add-on with Ready False for reason at gen, whose render
	// of generation applied is applied and whose Healthy condition is
	// healthy, observed at healthyAt ("" for none).
	held := func(gen int64, phase capstanv1.Phase, reason string, applied int64, healthy metav1.ConditionStatus, healthyAt int64) *capstanv1.Addon {
		a := addon(gen, phase, metav1.ConditionFalse, gen)
		a.Status.Conditions[0].Reason = reason
		a.Status.AppliedGeneration = applied
		if healthy != "" {
			a.Status.Conditions = append(a.Status.Conditions, metav1.Condition{Type: capstanv1.ConditionHealthy, Status: healthy, ObservedGeneration: healthyAt})
		}
		return a
	}
	hookFailed := held(3, capstanv1.PhaseSuspended, "Suspended", 3, metav1.ConditionTrue, 3)
	hookFailed.Status.PendingHook = &capstanv1.PendingHook{Event: "post-upgrade", Hash: "h"}
	// upgrading is an add-on Ready at gen whose render was applied at
	// applied, with no new generation since when applied is 0 (a sync
	// applies a new render of it).
	upgrading := func(gen int64, phase capstanv1.Phase, ready metav1.ConditionStatus, applied int64) *capstanv1.Addon {
		a := addon(gen, phase, ready, gen)
		a.Status.AppliedHash, a.Status.AppliedGeneration = "h", applied
		return a
	}
	// pausedDegraded was found healthy after its apply, and Degraded
	// since: the last look before the pause left Healthy False.
	pausedDegraded := held(3, capstanv1.PhasePaused, "Paused", 3, metav1.ConditionFalse, 3)
	pausedDegraded.Status.FirstHealthyTime = &metav1.Time{Time: time.Now()}
	removed := addon(1, capstanv1.PhaseSynced, metav1.ConditionTrue, 1)
	removed.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := []struct {
		name string
		a    *capstanv1.Addon
		want string
	}{
		{"Synced", addon(2, capstanv1.PhaseSynced, metav1.ConditionTrue, 2), ""},
		{"Degraded", addon(2, capstanv1.PhaseDegraded, metav1.ConditionFalse, 2), ""},
		{"Synced, its render applied", upgrading(3, capstanv1.PhaseSynced, metav1.ConditionTrue, 3), ""},
		{"Synced, a new render of it being applied", upgrading(3, capstanv1.PhaseSynced, metav1.ConditionTrue, 0),
			"Synced: Synced, with its latest change being applied"},
		{"Degraded, a new render of it being applied", upgrading(3, capstanv1.PhaseDegraded, metav1.ConditionFalse, 0),
			"Degraded: Degraded, with its latest change being applied"},
		{"Degraded at an older generation", addon(3, capstanv1.PhaseDegraded, metav1.ConditionFalse, 2), "its latest change is not synced yet"},
		{"rolling out", addon(2, capstanv1.PhaseProgressing, metav1.ConditionFalse, 2), "Progressing: Progressing"},
		{"Failed", addon(2, capstanv1.PhaseFailed, metav1.ConditionFalse, 2), "Failed: Failed"},
		{"not reconciled", addon(1, "", "", 0), "not reconciled yet"},
		{"being removed", removed, "being removed"},
		{"held by a gate, its latest change applied and Healthy", held(3, capstanv1.PhaseOutOfSync, "AwaitingApproval", 3, metav1.ConditionTrue, 3), ""},
		{"its drift repair outside a sync window", held(3, capstanv1.PhaseOutOfSync, "SyncWindowClosed", 3, metav1.ConditionTrue, 3), ""},
		{"fighting a drift", held(3, capstanv1.PhaseOutOfSync, "DriftFought", 3, metav1.ConditionTrue, 3), ""},
		{"a prune held for a confirmation", held(3, capstanv1.PhaseOutOfSync, "PruneNeedsApproval", 3, metav1.ConditionTrue, 3), ""},
		{"suspended after its apply", held(4, capstanv1.PhaseSuspended, "Suspended", 4, metav1.ConditionTrue, 4), ""},
		{"its latest change awaits an approval", held(3, capstanv1.PhaseOutOfSync, "AwaitingApproval", 2, metav1.ConditionTrue, 3),
			"OutOfSync: AwaitingApproval, with its latest change not applied yet"},
		{"suspended before its first apply", held(1, capstanv1.PhaseSuspended, "Suspended", 0, "", 0), "Suspended: Suspended, with its latest change not applied yet"},
		{"held, and not Healthy", held(3, capstanv1.PhaseOutOfSync, "SyncWindowClosed", 3, metav1.ConditionFalse, 3),
			"OutOfSync: SyncWindowClosed, with its objects not all Healthy"},
		{"held, Healthy at an older generation", held(3, capstanv1.PhaseOutOfSync, "AwaitingApproval", 3, metav1.ConditionTrue, 2),
			"OutOfSync: AwaitingApproval, with its objects not all Healthy"},
		{"held, its post hooks failed", hookFailed, "Suspended: Suspended, with its post-upgrade hooks not done"},
		{"paused after its apply", held(3, capstanv1.PhasePaused, "Paused", 3, metav1.ConditionTrue, 3), ""},
		{"paused before its latest change was applied", held(3, capstanv1.PhasePaused, "Paused", 2, metav1.ConditionTrue, 2),
			"Paused: Paused, with its latest change not applied yet"},
		{"paused, and not Healthy", held(3, capstanv1.PhasePaused, "Paused", 3, metav1.ConditionFalse, 3),
			"Paused: Paused, with its objects not all Healthy"},
		{"paused while Degraded", pausedDegraded, ""},
		{"paused before its first healthy look", held(3, capstanv1.PhasePaused, "Paused", 3, metav1.ConditionFalse, 3),
			"Paused: Paused, with its objects not all Healthy"},
		{"Blocked, its latest change applied and Healthy", held(3, capstanv1.PhaseBlocked, "ObjectsExist", 3, metav1.ConditionTrue, 3), "Blocked: ObjectsExist"},
	}
	for _, c := range cases {
		if got := notReady(c.a); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, got, c.want)
		}
	}
}

// TestMarkApplied: status.appliedGeneration names the current generation
// only while the render the generation makes now is the one applied. A
// render changed with no new generation (a values ConfigMap edited, a new
// chart version in a range) clears it, and applying that render, or the
// inputs coming back to it, records it again.
func TestMarkApplied(t *testing.T) {
	cases := []struct {
		name          string
		appliedHash   string
		applied, want int64
		hash          string
	}{
		{"the applied render, found again", "h1", 3, 3, "h1"},
		{"a new spec that renders what runs", "h1", 2, 3, "h1"},
		{"its values edited since its apply", "h1", 3, 0, "h2"},
		{"a new spec whose render is not applied", "h1", 2, 2, "h2"},
		{"never applied", "", 0, 0, "h1"},
	}
	for _, c := range cases {
		st := capstanv1.AddonStatus{AppliedHash: c.appliedHash, AppliedGeneration: c.applied}
		markApplied(&st, c.hash, 3)
		if st.AppliedGeneration != c.want {
			t.Errorf("%s: appliedGeneration %d; want %d", c.name, st.AppliedGeneration, c.want)
		}
		if st.AppliedHash != c.appliedHash {
			t.Errorf("%s: appliedHash %q changed", c.name, st.AppliedHash)
		}
	}
}

// TestAppliesNothing: a render that is not the one applied still counts
// as applied when its sync would change no object and run no hook,
// whatever its source: a git folder's of a commit anywhere in its
// repository, or a chart's whose values changed where the chart does not
// read them (a platform fact, a shared valuesFrom key). One that creates,
// updates or prunes an object does not, nor one that runs hooks: a
// chart's upgrade hooks, its tests when spec.test.enable runs them after
// the sync, pre-upgrade hooks of this render that ran before a stop, or a
// folder's post hooks still pending; nor an add-on never applied.
func TestAppliesNothing(t *testing.T) {
	unchanged := []plan.ObjectResult{{Comparison: plan.Comparison{Action: capstanv1.ActionUnchanged}}}
	updated := []plan.ObjectResult{{Comparison: plan.Comparison{Action: capstanv1.ActionUpdate}}}
	gone := []capstanv1.ObjectRef{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "gone"}}
	hook := func(event string) render.Hook {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("batch/v1")
		o.SetKind("Job")
		o.SetName(event)
		return render.Hook{Object: o, Events: []string{event}}
	}
	testsOn := &capstanv1.TestPolicy{Enable: true}
	cases := []struct {
		name        string
		folder      bool
		appliedHash string
		previews    []plan.ObjectResult
		prune       []capstanv1.ObjectRef
		lifecycle   Lifecycle
		hooks       []render.Hook
		test        *capstanv1.TestPolicy
		preDone     *capstanv1.PendingHook
		want        bool
	}{
		{"a commit outside the folder", true, "h1", unchanged, nil, LifecycleNone, nil, nil, nil, true},
		{"a commit that edits an object", true, "h1", updated, nil, LifecycleNone, nil, nil, nil, false},
		{"a commit that removes an object the add-on prunes", true, "h1", unchanged, gone, LifecycleNone, nil, nil, nil, false},
		{"post hooks still to run", true, "h1", unchanged, nil, LifecycleRetryPost, nil, nil, nil, false},
		{"a folder never applied", true, "", unchanged, nil, LifecycleNone, nil, nil, nil, false},
		{"a chart's values changed where it does not read them", false, "h1", unchanged, nil, LifecycleUpgrade, nil, nil, nil, true},
		{"a chart's values changed where it reads them", false, "h1", updated, nil, LifecycleUpgrade, nil, nil, nil, false},
		{"a chart's render that drops an object it prunes", false, "h1", unchanged, gone, LifecycleUpgrade, nil, nil, nil, false},
		{"a chart with a pre-upgrade hook", false, "h1", unchanged, nil, LifecycleUpgrade, []render.Hook{hook("pre-upgrade")}, nil, nil, false},
		{"a chart with a post-upgrade hook", false, "h1", unchanged, nil, LifecycleUpgrade, []render.Hook{hook("post-upgrade")}, nil, nil, false},
		{"a chart with install hooks only", false, "h1", unchanged, nil, LifecycleUpgrade, []render.Hook{hook("pre-install"), hook("post-install")}, nil, nil, true},
		{"a chart with tests it runs after each sync", false, "h1", unchanged, nil, LifecycleUpgrade, []render.Hook{hook("test")}, testsOn, nil, false},
		{"a chart with tests it runs only on request", false, "h1", unchanged, nil, LifecycleUpgrade, []render.Hook{hook("test")}, nil, nil, true},
		{"a chart whose pre-upgrade hooks ran before a stop", false, "h1", unchanged, nil, LifecycleUpgrade, []render.Hook{hook("pre-upgrade")}, nil,
			&capstanv1.PendingHook{Event: "pre-upgrade", Hash: "h2"}, false},
		{"a chart with an earlier render's hook objects left", false, "h1", unchanged, nil, LifecycleUpgrade, nil, nil,
			&capstanv1.PendingHook{Event: "pre-upgrade", Hash: "h1"}, true},
		{"a chart never applied", false, "", unchanged, nil, LifecycleInstall, nil, nil, nil, false},
	}
	for _, c := range cases {
		s := &scope{addon: &capstanv1.Addon{Spec: capstanv1.AddonSpec{Test: c.test}, Status: capstanv1.AddonStatus{AppliedHash: c.appliedHash, PreHooksDone: c.preDone}},
			render: &render.Result{Hash: "h2", Folder: c.folder}, previews: c.previews, prune: c.prune, lifecycle: c.lifecycle, hooks: c.hooks}
		if got := s.appliesNothing(); got != c.want {
			t.Errorf("%s: appliesNothing = %v; want %v", c.name, got, c.want)
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

// TestCycleGoesFirst: add-ons uninstalled together that depend on each
// other in a cycle would each wait for the others. The first of the cycle
// by namespace/name goes first, not held by the rest of it; the others,
// and whatever is not in the cycle or not uninstalled, still hold.
func TestCycleGoesFirst(t *testing.T) {
	key := func(s string) types.NamespacedName { return types.NamespacedName{Namespace: "shop", Name: s} }
	cases := []struct {
		name string
		// uninstalling maps each add-on being uninstalled to its
		// dependencies; one that is not uninstalled is absent.
		uninstalling map[string][]string
		self         string
		want         []string // nil: self is not the first of a cycle
	}{
		{"itself alone", map[string][]string{"app": {"app"}}, "app", []string{}},
		{"no cycle", map[string][]string{"app": {"db"}, "db": nil}, "db", []string{}},
		{"a pair, the first", map[string][]string{"a": {"b"}, "b": {"a"}}, "a", []string{"b"}},
		{"a pair, the second", map[string][]string{"a": {"b"}, "b": {"a"}}, "b", nil},
		{"a pair, one kept", map[string][]string{"a": {"b"}}, "a", []string{}},
		{"three, the first", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a", []string{"b", "c"}},
		{"three, another", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}}, "c", nil},
		{"three, one kept", map[string][]string{"a": {"b"}, "c": {"a"}}, "a", []string{}},
		{"a dependent outside the cycle", map[string][]string{"a": {"b"}, "b": {"a"}, "x": {"a"}}, "a", []string{"b"}},
		{"a dependency outside the cycle", map[string][]string{"a": {"b", "z"}, "b": {"a"}, "z": nil}, "a", []string{"b"}},
		{"two cycles through self", map[string][]string{"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}, "a", []string{"b", "c"}},
		{"two cycles, one with a first", map[string][]string{"b": {"a", "c"}, "a": {"b"}, "c": {"b"}}, "c", nil},
	}
	for _, c := range cases {
		got := cycleGoesFirst(key(c.self), func(k types.NamespacedName) ([]types.NamespacedName, bool) {
			deps, ok := c.uninstalling[k.Name]
			var out []types.NamespacedName
			for _, d := range deps {
				out = append(out, key(d))
			}
			return out, ok
		})
		if c.want == nil {
			if got != nil {
				t.Errorf("%s: %s goes first, ahead of %v; want it to wait", c.name, c.self, got)
			}
			continue
		}
		var names []string
		for k := range got {
			names = append(names, k.Name)
		}
		slices.Sort(names)
		if got == nil || !slices.Equal(names, c.want) {
			t.Errorf("%s: %s goes first ahead of %v (nil: waits); want %v", c.name, c.self, names, c.want)
		}
	}
}
