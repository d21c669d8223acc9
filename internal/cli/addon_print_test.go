package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
)

// TestPrintAddonShowsHooksAndNotices checks that `capstan addon get` shows
// the hooks in their order, a pending post hook and the plan's notices.
func TestPrintAddonShowsHooksAndNotices(t *testing.T) {
	a := &capstanv1.Addon{}
	a.Namespace, a.Name = "team", "db"
	a.Status.Phase = capstanv1.PhaseFailed
	a.Status.PendingHook = &capstanv1.PendingHook{Event: "post-install", Hash: "h1",
		Failed: &capstanv1.HookObject{ObjectRef: capstanv1.ObjectRef{Kind: "Job", Name: "db-seed"}, Run: "r1"}}
	p := &capstanv1.Plan{
		Hash: "p1",
		Hooks: []capstanv1.PlannedHook{
			{ObjectRef: capstanv1.ObjectRef{Kind: "Job", Name: "db-initdb"}, Events: []string{"pre-install"}, Weight: -10},
			{ObjectRef: capstanv1.ObjectRef{Kind: "Job", Name: "db-seed"}, Events: []string{"post-install"}},
		},
		Notices: []capstanv1.Notice{{Path: "hooks/ConfigMap/db-typo", Message: "never runs"}},
	}
	var b bytes.Buffer
	printAddon(&b, a, p, false, false)
	out := b.String()
	for _, want := range []string{
		"the post-install hooks stopped at Job/db-seed after the apply; the next sync of this render runs them again from it",
		"hook pre-install Job/db-initdb weight -10\n  hook post-install Job/db-seed weight 0",
		"note hooks/ConfigMap/db-typo: never runs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// While a post hook runs, its event is pending but nothing failed.
	a.Status.PendingHook.Failed = nil
	a.Status.Hook = &capstanv1.HookProgress{ObjectRef: capstanv1.ObjectRef{Kind: "Job", Name: "db-seed"}, Event: "post-install"}
	b.Reset()
	printAddon(&b, a, p, false, false)
	if out := b.String(); strings.Contains(out, "hooks stopped") || strings.Contains(out, "have not all succeeded") {
		t.Errorf("a post hook that runs is shown as failed:\n%s", out)
	}
}

// TestPrintAddonSaysWhenNothingIsApplied checks the inventory line before
// the first apply, when there is no applied render to name, and after it.
func TestPrintAddonSaysWhenNothingIsApplied(t *testing.T) {
	a := &capstanv1.Addon{}
	a.Namespace, a.Name = "capstan-system", "hello-kustomize"
	var b bytes.Buffer
	printAddon(&b, a, nil, false, false)
	if want := "Inventory: 0 objects; nothing applied yet\nNo plan yet: "; !strings.Contains(b.String(), want) {
		t.Errorf("before the first apply, output lacks %q:\n%s", want, b.String())
	}
	a.Status.AppliedHash = "sha256:93bf"
	a.Status.Inventory = make([]capstanv1.ObjectID, 2)
	b.Reset()
	printAddon(&b, a, nil, false, false)
	if want := "Inventory: 2 objects; applied sha256:93bf\nNo pending plan: "; !strings.Contains(b.String(), want) {
		t.Errorf("after an apply, output lacks %q:\n%s", want, b.String())
	}
}

// TestPrintAddonListSaysWhenEmpty checks that an empty list is said, not
// shown as a bare header.
func TestPrintAddonListSaysWhenEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := printAddonList(&b, nil, ""); err != nil {
		t.Fatal(err)
	}
	if b.String() != "No Addons found.\n" {
		t.Errorf("printed %q", b.String())
	}
}

// TestPrintAddonMarksWhatIsCreatedAnew checks that `capstan addon get`
// tells an update in place from one that deletes the object first.
func TestPrintAddonMarksWhatIsCreatedAnew(t *testing.T) {
	a := &capstanv1.Addon{}
	a.Namespace, a.Name = "apps", "web"
	p := &capstanv1.Plan{Hash: "p1", Objects: []capstanv1.PlannedObject{
		{ObjectRef: capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web"}, Action: capstanv1.ActionUpdate, Recreate: true},
		{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "web"}, Action: capstanv1.ActionUpdate},
	}}
	var b bytes.Buffer
	printAddon(&b, a, p, false, false)
	out := b.String()
	if !strings.Contains(out, "apps/v1/Deployment apps/web (deleted and created anew)\n") || strings.Contains(out, "ConfigMap apps/web (deleted") {
		t.Errorf("the output should mark the Deployment alone:\n%s", out)
	}
}

func TestPrintAddonShowsWaves(t *testing.T) {
	a := &capstanv1.Addon{}
	a.Namespace, a.Name = "apps", "db"
	a.Status.Wave = &capstanv1.WaveProgress{Wave: 1, Waiting: "waiting for Deployment apps/operator: 0 of 1 replicas available",
		Since: metav1.NewTime(time.Date(2026, 12, 4, 11, 30, 5, 0, time.UTC))}
	p := &capstanv1.Plan{Hash: "p1", Objects: []capstanv1.PlannedObject{
		{ObjectRef: capstanv1.ObjectRef{APIVersion: "example.com/v1", Kind: "Database", Namespace: "apps", Name: "main"}, Action: capstanv1.ActionCreate, Wave: 1},
		{ObjectRef: capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "operator"}, Action: capstanv1.ActionCreate},
	}}
	var b bytes.Buffer
	printAddon(&b, a, p, false, false)
	out := b.String()
	for _, want := range []string{
		"example.com/v1/Database apps/main (wave 1)\n",
		"apps/v1/Deployment apps/operator\n",
		"wave 1 waits since " + a.Status.Wave.Since.Format("15:04:05") + " for the waves before it: waiting for Deployment apps/operator",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if got := progressLine(a); !strings.Contains(got, ", wave 1 waits") {
		t.Errorf("progress line %q does not say the wave waits", got)
	}

	// A prune or an uninstall waits for the waves after it to be gone.
	a.Status.Wave = &capstanv1.WaveProgress{Wave: 0, Deleting: true, Waiting: "Database apps/main is being deleted (finalizers: example.com/db)",
		Since: a.Status.Wave.Since}
	b.Reset()
	printAddon(&b, a, p, false, false)
	if want := "wave 0 waits since " + a.Status.Wave.Since.Format("15:04:05") + " to be deleted, until the waves after it are gone: Database apps/main is being deleted"; !strings.Contains(b.String(), want) {
		t.Errorf("the output lacks %q:\n%s", want, b.String())
	}
	if got := progressLine(a); !strings.Contains(got, ", wave 0 waits to be deleted") {
		t.Errorf("progress line %q does not say the wave waits to be deleted", got)
	}
}

// TestAddonGetOutputCanBeAppliedAgain: the typed client leaves apiVersion
// and kind empty, and an apply refuses managedFields; addon get -o prints
// what kubectl get -o prints.
func TestAddonGetOutputCanBeAppliedAgain(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	newAddon(t, c, ns, "blog", nil)
	for _, format := range []string{"yaml", "json"} {
		out, err := capstan(t, cluster, "addon", "get", "blog", "-n", ns, "-o", format)
		if err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		var got map[string]any
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		meta, _ := got["metadata"].(map[string]any)
		if got["apiVersion"] != "capstan.dev/v1alpha1" || got["kind"] != "Addon" || meta["managedFields"] != nil || meta["name"] != "blog" {
			t.Errorf("-o %s: apiVersion %v, kind %v, managedFields %v; want the type and no managed fields\n%s", format, got["apiVersion"], got["kind"], meta["managedFields"], out)
		}
	}
}

// TestAddonListKeepsEachAddonOnOneLine: a long Ready message is cut on a
// character, never within one, and a message of several lines stays in
// its row.
func TestAddonListKeepsEachAddonOnOneLine(t *testing.T) {
	long := strings.Repeat("é", 76) + "…and more"
	for _, msg := range []string{long, "first line\nsecond line"} {
		a := capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}
		a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "X", Message: msg}}
		var out bytes.Buffer
		if err := printAddonList(&out, []capstanv1.Addon{a}, ""); err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(out.String(), "\n"); lines != 2 || !utf8.ValidString(out.String()) {
			t.Errorf("the list of an Addon whose message is %q:\n%s\nwant a header and one row of valid UTF-8", msg, out.String())
		}
	}
}

// TestBoolFlagsTakeNoValueName: pflag reads back-quoted words in a flag's
// usage as its value's name, so a bool flag with them looks as if it took
// an argument in --help.
func TestBoolFlagsTakeNoValueName(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() == "bool" && strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: its usage %q has back-quotes", c.CommandPath(), f.Name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand())
}

// TestNoPlanNamesTheAddonsCluster: the command a refusal for want of a
// plan prints names the Addon's namespace and the command's cluster
// flags, so that pasted as is it reads this Addon.
func TestNoPlanNamesTheAddonsCluster(t *testing.T) {
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}
	_, err := addons.Reviewable(a, "")
	err = phaseHint(err, client.ObjectKeyFromObject(a), " --kubeconfig kc.yaml")
	if !errors.Is(err, addons.ErrNoPlan) || !strings.Contains(err.Error(), "`capstan addon get web -n demo --kubeconfig kc.yaml`") {
		t.Errorf("no plan: %v; want the get command with -n and --kubeconfig", err)
	}
}

// TestPrintWholePlanSaysWhereDiffsWereCut: a plan in status whose diffs
// were cut points to `capstan plan`; the whole plan that `capstan plan`
// prints, whose diffs are cut only past plan.MaxFullDiffBytes, does not
// point to itself, and says the bound.
func TestPrintWholePlanSaysWhereDiffsWereCut(t *testing.T) {
	a := &capstanv1.Addon{}
	a.Namespace, a.Name = "apps", "big"
	p := &capstanv1.Plan{Hash: "p1", DiffsTruncated: true, Objects: []capstanv1.PlannedObject{
		{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "big"}, Action: capstanv1.ActionCreate, DiffTruncated: true},
	}}
	var status, whole bytes.Buffer
	printAddon(&status, a, p, true, false)
	printAddon(&whole, a, p, true, true)
	if !strings.Contains(status.String(), "`capstan plan NAME` computes the whole plan, with each diff up to 128 KiB.") {
		t.Errorf("the status's plan does not point to capstan plan:\n%s", status.String())
	}
	if strings.Contains(whole.String(), "`capstan plan NAME`") || !strings.Contains(whole.String(), "cut at 128 KiB each") {
		t.Errorf("the whole plan should say its diffs' bound, not point to itself:\n%s", whole.String())
	}
}
