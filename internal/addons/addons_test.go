package addons

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
)

func TestReplaceTargets(t *testing.T) {
	ref := func(name, path string) capstanv1.ValuesReference {
		return capstanv1.ValuesReference{Kind: "Secret", Name: name, TargetPath: path}
	}
	from := []capstanv1.ValuesReference{ref("base", ""), ref("old", "auth.password"), ref("cm", "other")}
	got := replaceTargets(from, []capstanv1.ValuesReference{ref("new", "auth.password"), ref("new", "auth.token")})
	want := []capstanv1.ValuesReference{ref("base", ""), ref("new", "auth.password"), ref("cm", "other"), ref("new", "auth.token")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replaceTargets = %v; want %v", got, want)
	}
	if from[1].Name != "old" {
		t.Error("replaceTargets changed its input")
	}
}

// TestReviewableSaysWhyNoPlanComes checks that an approval of an add-on
// that failed before its plan says why, rather than to wait.
func TestReviewableSaysWhyNoPlanComes(t *testing.T) {
	a := &capstanv1.Addon{}
	a.Name = "y"
	if _, err := Reviewable(a, ""); !errors.Is(err, ErrNoPlan) || !strings.Contains(err.Error(), "wait for the controller") {
		t.Errorf("a new add-on: %v; want to wait", err)
	}
	a.Status.Phase = capstanv1.PhaseFailed
	a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "RenderFailed", Message: "template: bad"}}
	_, err := Reviewable(a, "")
	if !errors.Is(err, ErrNoPlan) || !strings.Contains(err.Error(), "RenderFailed: template: bad") || strings.Contains(err.Error(), "wait for the controller") {
		t.Errorf("a failed add-on: %v; want the failure named", err)
	}
}

// TestPatchSpecRefusesWhatIsNoObject checks that a spec patch that is not a
// JSON object is refused, saying what to send, rather than replacing the
// whole spec: {"spec": null} once wiped it.
func TestPatchSpecRefusesWhatIsNoObject(t *testing.T) {
	a := &capstanv1.Addon{Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/a-1.0.0.tgz"}}}
	for patch, says := range map[string]string{"null": "null", " null\n": "null", "[]": "an array", `"x"`: "a string", "1": "a number", "true": "a boolean"} {
		_, err := PatchedSpec(a, []byte(patch))
		if !errors.Is(err, ErrBadPatch) || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "JSON object") {
			t.Errorf("PatchedSpec(%q) = %v; want ErrBadPatch that says it is %s and to send a JSON object", patch, err, says)
		}
	}
	got, err := PatchedSpec(a, []byte(`{"chart": {"url": null, "oci": "oci://registry.example/a"}}`))
	if err != nil || got.Spec.Chart.OCI != "oci://registry.example/a" || got.Spec.Chart.URL != "" || !got.Spec.Suspend {
		t.Errorf("an object patch: %v, %+v; want the chart changed and the rest kept", err, got)
	}
}

// TestRefuseSuspended checks the refusal that every surface (the CLI, the
// API, the page) gives an approval of a suspended add-on: it names the way
// to resume it, by an install or, for one git manages, by a commit; for a
// plan that no approval could apply, why, and that a resume lets the plan
// that follows the fix apply.
func TestRefuseSuspended(t *testing.T) {
	key := client.ObjectKey{Namespace: "apps", Name: "web"}
	for _, tc := range []struct {
		name   string
		change func(*capstanv1.Addon)
		says   string
	}{
		{"running", func(*capstanv1.Addon) {}, ""},
		{"suspended, no plan yet", func(a *capstanv1.Addon) { a.Spec.Suspend = true }, "`capstan addon get web -n apps --diff` shows its plan"},
		{"suspended, with its plan", func(a *capstanv1.Addon) {
			a.Spec.Suspend = true
			a.Generation = 2
			a.Status.Plan = &capstanv1.Plan{Generation: 2, Hash: "h2"}
		}, "`capstan addon install web -n apps --plan h2` resumes it"},
		{"suspended, its plan blocked", func(a *capstanv1.Addon) {
			a.Spec.Suspend = true
			a.Generation = 2
			a.Status.Plan = &capstanv1.Plan{Generation: 2, Hash: "h2", Objects: []capstanv1.PlannedObject{{
				ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "settings"},
				Action:    capstanv1.ActionCreate, Error: `admission webhook "policy.example" denied the request`}}}
		}, "its plan cannot be installed: the plan is blocked (DryRunFailed)"},
		{"suspended, in git", func(a *capstanv1.Addon) {
			a.Spec.Suspend = true
			a.Labels = map[string]string{gitops.ManagedByGitLabel: "ops"}
		}, "AddonRepository ops): resume it by a commit with `capstan addon resume web --gitops URL`"},
	} {
		a := &capstanv1.Addon{}
		tc.change(a)
		err := RefuseSuspended(a, key, "")
		if tc.says == "" {
			if err != nil {
				t.Errorf("%s: %v; want no refusal", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrSuspended) || !strings.Contains(err.Error(), "addon apps/web is suspended") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want ErrSuspended naming apps/web and saying %q", tc.name, err, tc.says)
		}
		if a.Status.Plan != nil && Blocked(a.Status.Plan) != nil {
			// NOTE: install refuses this plan, and get prints no command
			// for it: the refusal names the error and resume.
			for _, s := range []string{`admission webhook "policy.example" denied the request`, "`capstan addon resume web -n apps` lets the plan that follows apply"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: %q does not say %q", tc.name, err, s)
				}
			}
			if strings.Contains(err.Error(), "--plan") || strings.Contains(err.Error(), "--diff") {
				t.Errorf("%s: %q points to a command that refuses the plan or prints none", tc.name, err)
			}
		}
	}
}

// TestRefuseSuspendedOutsideGit: a suspended Addon that still carries the
// managed-by-git label of an AddonRepository that is gone is resumed in
// the cluster, so its refusal points to install with its plan's hash, not
// to a commit that no repository would take; a hold since the profile
// changed is still refused as such.
func TestRefuseSuspendedOutsideGit(t *testing.T) {
	key := client.ObjectKey{Namespace: "apps", Name: "web"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Generation: 2, Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
		Spec:   capstanv1.AddonSpec{Suspend: true},
		Status: capstanv1.AddonStatus{Plan: &capstanv1.Plan{Generation: 2, Hash: "h2"}}}
	err := RefuseSuspendedOutsideGit(a, key)
	if !errors.Is(err, ErrSuspended) {
		t.Fatalf("RefuseSuspendedOutsideGit = %v; want ErrSuspended", err)
	}
	for _, s := range []string{"`capstan addon install web -n apps --plan h2`", "AddonRepository ops is gone", "POST …/install"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "--gitops") || strings.Contains(err.Error(), "by a commit") {
		t.Errorf("%q points to a commit to a repository that is gone", err)
	}
	a.Status.Plan.ValuesErrors = []capstanv1.ValuesError{{Path: "/x", Rule: "schema", Message: "bad"}}
	if err := RefuseSuspendedOutsideGit(a, key); !errors.Is(err, ErrSuspended) || strings.Contains(err.Error(), "install it") || !strings.Contains(err.Error(), "POST …/resume") {
		t.Errorf("a blocked plan: %v; want resume, and no install, which refuses it", err)
	}
	a.Status.Plan = &capstanv1.Plan{Generation: 1, Hash: "h1"}
	if err := RefuseSuspendedOutsideGit(a, key); !errors.Is(err, ErrSuspended) || strings.Contains(err.Error(), "--diff") || !strings.Contains(err.Error(), "POST …/install") {
		t.Errorf("no plan of this generation: %v; want install once planned, and no get --diff, which prints no command for it", err)
	}
	a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: controller.ReasonProfileChanged, Message: "held"}}
	if err := RefuseSuspendedOutsideGit(a, key); !errors.Is(err, ErrProfileChanged) || strings.Contains(err.Error(), "install") {
		t.Errorf("a held Addon: %v; want ErrProfileChanged, offering no install", err)
	}
	a.Spec.Suspend = false
	if err := RefuseSuspendedOutsideGit(a, key); err != nil {
		t.Errorf("a running Addon: %v; want no refusal", err)
	}
}

// TestReviewableRefusesWhatTheControllerWouldNotApply checks that a plan
// the controller's gates stop whatever is approved is refused, saying why:
// above all one whose dry run failed, whose approval (the error is in its
// hash) would outlive the fix and hold the next plan as stale.
func TestReviewableRefusesWhatTheControllerWouldNotApply(t *testing.T) {
	cm := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "settings"}
	for _, tc := range []struct {
		name string
		plan capstanv1.Plan
		says []string // empty when the plan may be approved
	}{
		{"a plan that applies", capstanv1.Plan{Objects: []capstanv1.PlannedObject{{ObjectRef: cm, Action: capstanv1.ActionCreate}}}, nil},
		{"an object the dry run refused", capstanv1.Plan{Objects: []capstanv1.PlannedObject{{ObjectRef: cm, Action: capstanv1.ActionCreate,
			Error: `admission webhook "policy.example" denied the request`}}},
			[]string{"DryRunFailed", "ConfigMap apps/settings", `admission webhook "policy.example" denied the request`, "no approval of this plan could ever apply it"}},
		{"a guardrail violation", capstanv1.Plan{Violations: []capstanv1.Violation{{Object: cm, Rule: "kind", Message: "not allowed"}}},
			[]string{"GuardrailViolations", "not allowed"}},
		{"a values error", capstanv1.Plan{ValuesErrors: []capstanv1.ValuesError{{Path: "replicas", Message: "must be an integer"}}},
			[]string{"ValuesErrors", "replicas: must be an integer"}},
		{"another add-on's object", capstanv1.Plan{Objects: []capstanv1.PlannedObject{{ObjectRef: cm, Action: capstanv1.ActionUpdate, ManagedBy: "apps/other"}}},
			[]string{"ManagedByAnotherAddon", "Addon apps/other"}},
	} {
		a := &capstanv1.Addon{}
		a.Name, a.Generation = "web", 3
		p := tc.plan
		p.Hash, p.Generation = "sha256:h1", 3
		a.Status.Plan = &p
		got, err := Reviewable(a, "sha256:h1")
		if len(tc.says) == 0 {
			if err != nil || got == nil {
				t.Errorf("%s: %v; want it approvable", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrPlanBlocked) {
			t.Errorf("%s: %v; want ErrPlanBlocked", tc.name, err)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.name, err, s)
			}
		}
	}
}
