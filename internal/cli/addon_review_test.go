package cli

import (
	"errors"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
)

// TestInstallAndSyncNameThePlan: a plan can change without the Addon's
// generation changing, so install and sync approve only the plan the
// person names with --plan, or with --yes whichever is in status. Without
// either they are refused before anything is written, naming the command
// with the plan's hash; get prints that command after the plan.
func TestInstallAndSyncNameThePlan(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	blog := newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) { a.Spec.Suspend = true })
	web := newAddon(t, c, ns, "web", func(a *capstanv1.Addon) { a.Spec.ManualSync = true })
	hash := blog.Status.Plan.Hash

	for _, tc := range []struct {
		verb, name string
		next       string
	}{
		// The helper gives --kubeconfig, and every printed command names
		// it, so that a pasted command acts on this cluster.
		{"install", "blog", "capstan addon install blog -n " + ns + " --plan " + hash + " --kubeconfig " + cluster.Kubeconfig},
		{"sync", "web", "capstan addon sync web -n " + ns + " --plan " + hash + " --kubeconfig " + cluster.Kubeconfig},
	} {
		out, err := capstan(t, cluster, "addon", tc.verb, tc.name, "-n", ns, "--wait=false")
		if err == nil || !strings.Contains(err.Error(), "`"+tc.next+"`") || !strings.Contains(err.Error(), "capstan addon get "+tc.name+" -n "+ns+" --diff --kubeconfig "+cluster.Kubeconfig) {
			t.Errorf("%s without --plan: %v; want it refused, naming the review and %q\n%s", tc.verb, err, tc.next, out)
		}
		if a := getAddon(t, c, ns, tc.name); a.Spec.ApprovedPlan != "" || a.Spec.SyncRequest != 0 || a.Spec.Suspend != (tc.name == "blog") {
			t.Errorf("the refused %s wrote: approvedPlan %q, syncRequest %d, suspend %v", tc.verb, a.Spec.ApprovedPlan, a.Spec.SyncRequest, a.Spec.Suspend)
		}
		out, err = capstan(t, cluster, "addon", "get", tc.name, "-n", ns)
		if err != nil || !strings.Contains(out, "To apply exactly this plan: "+tc.next+"\n") {
			t.Errorf("get %s: %v; want it to print %q\n%s", tc.name, err, tc.next, out)
		}
	}

	if out, err := capstan(t, cluster, "addon", "install", "blog", "-n", ns, "--plan", hash, "--wait=false"); err != nil {
		t.Fatalf("install --plan: %v\n%s", err, out)
	}
	if a := getAddon(t, c, ns, "blog"); a.Spec.ApprovedPlan != hash || a.Spec.Suspend {
		t.Errorf("install --plan: approvedPlan %q, suspend %v", a.Spec.ApprovedPlan, a.Spec.Suspend)
	}
	if out, err := capstan(t, cluster, "addon", "sync", "web", "-n", ns, "--yes", "--wait=false"); err != nil {
		t.Fatalf("sync --yes: %v\n%s", err, out)
	}
	if a := getAddon(t, c, ns, "web"); a.Spec.ApprovedPlan != web.Status.Plan.Hash || a.Spec.SyncRequest != 1 {
		t.Errorf("sync --yes: approvedPlan %q, syncRequest %d", a.Spec.ApprovedPlan, a.Spec.SyncRequest)
	}
	if out, err := capstan(t, cluster, "addon", "sync", "web", "-n", ns, "--yes", "--plan", hash); err == nil {
		t.Errorf("sync --yes --plan was taken; want them refused together\n%s", out)
	}
}

// TestNextCommand decides which command get prints to apply the plan.
func TestNextCommand(t *testing.T) {
	hash := "sha256:" + strings.Repeat("c", 64)
	addon := func(change func(*capstanv1.Addon)) *capstanv1.Addon {
		a := &capstanv1.Addon{}
		a.Namespace, a.Name, a.Generation = "apps", "web", 3
		a.Status.Plan = &capstanv1.Plan{Hash: hash, Generation: 3}
		change(a)
		return a
	}
	for _, tc := range []struct {
		name string
		a    *capstanv1.Addon
		want string
	}{
		{"suspended", addon(func(a *capstanv1.Addon) { a.Spec.Suspend = true }), "capstan addon install web -n apps --plan " + hash},
		{"waiting for a sync", addon(func(a *capstanv1.Addon) { a.Status.Phase = capstanv1.PhaseOutOfSync }), "capstan addon sync web -n apps --plan " + hash},
		{"synced", addon(func(a *capstanv1.Addon) { a.Status.Phase = capstanv1.PhaseSynced }), ""},
		{"a plan of an older generation", addon(func(a *capstanv1.Addon) { a.Spec.Suspend, a.Status.Plan.Generation = true, 2 }), ""},
		{"no plan", addon(func(a *capstanv1.Addon) { a.Spec.Suspend, a.Status.Plan = true, nil }), ""},
		{"blocked", addon(func(a *capstanv1.Addon) {
			a.Spec.Suspend, a.Status.Plan.Violations = true, []capstanv1.Violation{{Rule: "no-host-path"}}
		}), ""},
		{"suspended by git", addon(func(a *capstanv1.Addon) {
			a.Spec.Suspend, a.Labels = true, map[string]string{gitops.ManagedByGitLabel: "ops"}
		}), ""},
		{"held since its profile changed", addon(func(a *capstanv1.Addon) { heldSinceItsProfileChanged(a) }), ""},
		{"suspended, held since its profile changed", addon(func(a *capstanv1.Addon) {
			a.Spec.Suspend = true
			heldSinceItsProfileChanged(a)
		}), ""},
	} {
		if got := nextCommand(tc.a, ""); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestRequireReviewOfABlockedPlan: install and sync without --plan of a
// plan that no approval could apply (an object its dry run refused) say
// why, and suggest no --plan, which would be refused too.
func TestRequireReviewOfABlockedPlan(t *testing.T) {
	hash := "sha256:" + strings.Repeat("d", 64)
	for _, verb := range []string{"install", "sync"} {
		a := &capstanv1.Addon{}
		a.Namespace, a.Name, a.Generation = "apps", "web", 3
		a.Spec.Suspend = verb == "install"
		a.Status.Plan = &capstanv1.Plan{Hash: hash, Generation: 3, Objects: []capstanv1.PlannedObject{{
			ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "settings"},
			Action:    capstanv1.ActionCreate, Error: `admission webhook "policy.example" denied the request`}}}
		err := requireReview(a, verb, "", false, "")
		if !errors.Is(err, addons.ErrPlanBlocked) || !strings.Contains(err.Error(), `admission webhook "policy.example" denied the request`) {
			t.Errorf("%s of a blocked plan: %v; want ErrPlanBlocked naming the dry run's error", verb, err)
		}
		if err != nil && strings.Contains(err.Error(), "--plan") {
			t.Errorf("%s of a blocked plan: %q suggests --plan, which is refused", verb, err)
		}
	}
}

// heldSinceItsProfileChanged marks a as the controller does when it holds
// the sync of an add-on installed under the cluster profile whose
// namespace it no longer trusts.
func heldSinceItsProfileChanged(a *capstanv1.Addon) {
	a.Status.Phase = capstanv1.PhaseBlocked
	apimeta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: controller.ReasonProfileChanged, Message: "Installed under the cluster profile, but … Trust apps again."})
}

// TestRequireReviewOfAHeldAddon: install and sync without --plan of an
// add-on held since its profile changed say why, with the hold's message,
// and suggest no --plan, which would be refused too.
func TestRequireReviewOfAHeldAddon(t *testing.T) {
	hash := "sha256:" + strings.Repeat("e", 64)
	for _, verb := range []string{"install", "sync"} {
		a := &capstanv1.Addon{}
		a.Namespace, a.Name, a.Generation = "apps", "web", 3
		a.Spec.Suspend = verb == "install"
		a.Status.Plan = &capstanv1.Plan{Hash: hash, Generation: 3}
		heldSinceItsProfileChanged(a)
		err := requireReview(a, verb, "", false, "")
		if !errors.Is(err, addons.ErrProfileChanged) || !strings.Contains(err.Error(), "Trust apps again") {
			t.Errorf("%s of a held add-on: %v; want ErrProfileChanged with the hold's message", verb, err)
		}
		if err != nil && strings.Contains(err.Error(), "--plan") {
			t.Errorf("%s of a held add-on: %q suggests --plan, which is refused", verb, err)
		}
	}
}

// TestPrintedCommandsNameTheCluster: the commands the CLI prints for a
// person to run next carry the --kubeconfig and --context it was given,
// shell-quoted when they must be, so that a pasted command acts on the
// same cluster and not in whatever context is current by then.
func TestPrintedCommandsNameTheCluster(t *testing.T) {
	for _, tc := range []struct {
		f    clusterFlags
		want string
	}{
		{clusterFlags{}, ""},
		{clusterFlags{kubeContext: "prod"}, " --context prod"},
		{clusterFlags{kubeconfig: "/home/ada/.kube/prod.yaml", kubeContext: "admin@prod-eu"}, " --kubeconfig /home/ada/.kube/prod.yaml --context admin@prod-eu"},
		{clusterFlags{kubeconfig: "/home/ada/my clusters/k", kubeContext: "it's; rm -rf ~"}, ` --kubeconfig '/home/ada/my clusters/k' --context 'it'\''s; rm -rf ~'`},
		{clusterFlags{kubeContext: "$(id)"}, ` --context '$(id)'`},
	} {
		if got := tc.f.suffix(); got != tc.want {
			t.Errorf("%+v: %q; want %q", tc.f, got, tc.want)
		}
	}

	hash := "sha256:" + strings.Repeat("e", 64)
	a := &capstanv1.Addon{}
	a.Namespace, a.Name, a.Generation = "tenant", "blog", 2
	a.Spec.Suspend = true
	a.Status.Plan = &capstanv1.Plan{Hash: hash, Generation: 2}
	f := clusterFlags{kubeContext: "prod"}
	if got, want := nextCommand(a, f.suffix()), "capstan addon install blog -n tenant --plan "+hash+" --context prod"; got != want {
		t.Errorf("get's next command: %q; want %q", got, want)
	}
	if err := requireReview(a, "install", "", false, f.suffix()); err == nil ||
		!strings.Contains(err.Error(), "`capstan addon get blog -n tenant --diff --context prod`") ||
		!strings.Contains(err.Error(), "`capstan addon install blog -n tenant --plan "+hash+" --context prod`") {
		t.Errorf("install without --plan: %v; want both commands with --context prod", err)
	}
	if _, err := syncOutcome(a, client.ObjectKey{Namespace: "tenant", Name: "blog"}, f.suffix()); err == nil ||
		!strings.Contains(err.Error(), "`capstan addon install blog -n tenant --plan "+hash+" --context prod`") {
		t.Errorf("a wait on a suspended add-on: %v; want the install command with --context prod", err)
	}
}
