package cli

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// TestPlanTakesTheControllersConfiguration plans an Addon of a second
// trusted namespace whose chart reads the platform's facts under another
// key than the default. With the default flags the plan is of the
// restricted profile and without the facts; with --trusted-namespaces,
// --platform-configmap and --platform-key as the controller would run, it
// is the controller's: the cluster profile, the facts under their key.
func TestPlanTakesTheControllersConfiguration(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	platform := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: ns + "-platform"},
		Data: map[string]string{"hostname": "apps.example.com"}}
	if err := c.Create(t.Context(), platform); err != nil {
		t.Fatal(err)
	}

	archive, err := testcontroller.ChartArchive("facts", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: facts\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: facts\ndata:\n  host: {{ (.Values.platform).hostname | default \"none\" | quote }}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	charts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(charts.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: charts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "facts"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: charts.URL + "/facts-1.0.0.tgz"}}}
	if err := c.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}

	// The plan's diff of the chart's ConfigMap: a restricted add-on's
	// objects carry an owner reference to the Addon, a cluster-profile
	// add-on's none.
	diff := func(flags ...string) string {
		t.Helper()
		args := append([]string{"plan", "facts", "-n", ns, "-o", "json", "--fetch-allow", "127.0.0.1/32", "--ca-file", caFile}, flags...)
		out, err := capstan(t, cluster, args...)
		if err != nil {
			t.Fatalf("capstan plan %s: %v\n%s", strings.Join(flags, " "), err, out)
		}
		var p capstanv1.Plan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("capstan plan %s printed no plan: %v\n%s", strings.Join(flags, " "), err, out)
		}
		for _, o := range p.Objects {
			if o.Kind == "ConfigMap" && o.Name == "facts" {
				return o.Diff
			}
		}
		t.Fatalf("capstan plan %s: no ConfigMap in the plan\n%s", strings.Join(flags, " "), out)
		return ""
	}

	if d := diff(); !strings.Contains(d, "ownerReferences") || !strings.Contains(d, "host: none") {
		t.Errorf("with the default flags, the diff is\n%s\nwant the restricted profile's owner reference and no facts", d)
	}
	d := diff("--trusted-namespaces", install.Namespace+","+ns, "--platform-configmap", platform.Name, "--platform-key", "platform")
	if strings.Contains(d, "ownerReferences") || !strings.Contains(d, "host: apps.example.com") {
		t.Errorf("with the controller's flags, the diff is\n%s\nwant the cluster profile, with no owner reference, and the platform's hostname", d)
	}
	// The controller trims its --trusted-namespaces, and so does plan.
	if d := diff("--trusted-namespaces", install.Namespace+", "+ns+",", "--platform-configmap", platform.Name, "--platform-key", "platform"); strings.Contains(d, "ownerReferences") {
		t.Errorf("with --trusted-namespaces %q, the diff is\n%s\nwant the cluster profile, as the controller reads the flag", install.Namespace+", "+ns+",", d)
	}
}

// servedAddon serves a chart of files over https on loopback and creates a
// suspended Addon name of it in ns; it returns the flags with which
// capstan plan fetches it.
func servedAddon(t *testing.T, c client.Client, ns, name string, files map[string]string) []string {
	t.Helper()
	url, fetch := servedChart(t, name, files)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: url}}}
	if err := c.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return fetch
}

// servedChart serves a chart of files (version 1.0.0) over https on
// loopback; it returns the chart's URL and the flags with which a command
// fetches it through the fetch guard.
func servedChart(t *testing.T, name string, files map[string]string) (url string, fetch []string) {
	t.Helper()
	archive, err := testcontroller.ChartArchive(name, files)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(server.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return server.URL + "/" + name + "-1.0.0.tgz", []string{"--fetch-allow", "127.0.0.1/32", "--ca-file", caFile}
}

// TestPlanRendersInTheSandbox: capstan plan renders a chart that whoever
// wrote the Addon chose, a tenant's perhaps, in a worker bounded as the
// controller's: a template that loops for ever fails the plan after
// --render-timeout instead of holding the person's machine.
func TestPlanRendersInTheSandbox(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	fetch := servedAddon(t, c, ns, "endless", map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: endless\nversion: 1.0.0\n",
		"templates/loop.yaml": endlessTemplate,
	})
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := capstan(t, cluster, append([]string{"plan", "endless", "-n", ns, "--render-timeout", "2s"}, fetch...)...)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if r.err == nil || !strings.Contains(r.err.Error(), "took longer than 2s to render") {
			t.Errorf("plan of a chart that loops for ever: %v; want the render stopped at --render-timeout\n%s", r.err, r.out)
		}
		if took := time.Since(start); took > 45*time.Second {
			t.Errorf("the plan took %s", took)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the plan of a chart that loops for ever still runs after 60s: it renders unbounded")
	}
}

// TestPlanExitsNonZeroWhenTheControllerWouldRefuseIt: a plan with
// guardrail violations is printed whole, and the command exits 2, naming
// the verdict, so that a script does not approve it; a clean one exits 0.
func TestPlanExitsNonZeroWhenTheControllerWouldRefuseIt(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	fetch := servedAddon(t, c, ns, "hostnet", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: hostnet\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hostnet\nspec:\n  hostNetwork: true\n" +
			"  containers:\n  - name: app\n    image: registry.example/app@sha256:" + strings.Repeat("a", 64) + "\n",
	})
	out, err := capstan(t, cluster, append([]string{"plan", "hostnet", "-n", ns}, fetch...)...)
	var exit exitError
	if !errors.As(err, &exit) || exit.code != exitPlanRefused || !strings.Contains(out, "would be Blocked (GuardrailViolations)") || !strings.Contains(out, "Pod/hostnet") {
		t.Errorf("plan with a violation: %v; want exit code %d after the plan, naming the verdict\n%s", err, exitPlanRefused, out)
	}

	fetch = servedAddon(t, c, ns, "plain", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: plain\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n",
	})
	if out, err := capstan(t, cluster, append([]string{"plan", "plain", "-n", ns}, fetch...)...); err != nil {
		t.Errorf("plan of a ConfigMap: %v; want exit code 0\n%s", err, out)
	}
}

// TestPlanVerdict: capstan plan fails the plans the controller's gates
// would make Blocked or Failed, and only those.
func TestPlanVerdict(t *testing.T) {
	clean := func() *capstanv1.Plan {
		return &capstanv1.Plan{Hash: "sha256:1", Summary: capstanv1.PlanSummary{Create: 1}, Objects: []capstanv1.PlannedObject{{ObjectRef: capstanv1.ObjectRef{Kind: "ConfigMap", Name: "a"}, Action: capstanv1.ActionCreate}}}
	}
	for _, tc := range []struct {
		name  string
		addon func(*capstanv1.Addon)
		plan  func(*capstanv1.Plan)
		phase capstanv1.Phase
	}{
		{"clean", nil, nil, ""},
		{"clean, suspended", func(a *capstanv1.Addon) { a.Spec.Suspend = true }, nil, capstanv1.PhaseSuspended},
		{"clean, manual sync", func(a *capstanv1.Addon) { a.Spec.ManualSync = true }, nil, capstanv1.PhaseOutOfSync},
		{"a violation", nil, func(p *capstanv1.Plan) { p.Violations = []capstanv1.Violation{{Rule: "hostNetwork"}} }, capstanv1.PhaseBlocked},
		{"a violation, suspended", func(a *capstanv1.Addon) { a.Spec.Suspend = true }, func(p *capstanv1.Plan) { p.Violations = []capstanv1.Violation{{Rule: "hostNetwork"}} }, capstanv1.PhaseBlocked},
		{"a values error", nil, func(p *capstanv1.Plan) { p.ValuesErrors = []capstanv1.ValuesError{{Path: "replicas"}} }, capstanv1.PhaseBlocked},
		{"a dry run refused", nil, func(p *capstanv1.Plan) { p.Objects[0].Error = "invalid" }, capstanv1.PhaseFailed},
		{"another add-on's object", nil, func(p *capstanv1.Plan) { p.Objects[0].ManagedBy = "ns/other" }, capstanv1.PhaseBlocked},
		{"an object to adopt", nil, func(p *capstanv1.Plan) { p.Objects[0].Adopted = true }, capstanv1.PhaseBlocked},
		{"an object to adopt, allowed", func(a *capstanv1.Addon) { a.Spec.Adopt = true }, func(p *capstanv1.Plan) {
			p.Objects[0].Adopted, p.Objects[0].Action = true, capstanv1.ActionUnchanged
		}, ""},
	} {
		a, p := &capstanv1.Addon{}, clean()
		if tc.addon != nil {
			tc.addon(a)
		}
		if tc.plan != nil {
			tc.plan(p)
		}
		if v := planVerdict(a, p); v.Phase != tc.phase {
			t.Errorf("%s: %s (%s), want %q", tc.name, v.Phase, v.Reason, tc.phase)
		}
	}
}

// TestPlanRefusesRenderBoundsOfZero: the sandbox reads 0 as its default
// bounds, so a --render-timeout or --render-memory-limit of 0 meant as "no
// bound" is refused, before any cluster is called, as the controller
// refuses it.
func TestPlanRefusesRenderBoundsOfZero(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--render-timeout", "0"}, "--render-timeout 0s: give a positive duration"},
		{[]string{"--render-timeout", "-1s"}, "--render-timeout -1s: give a positive duration"},
		{[]string{"--render-memory-limit", "0"}, "--render-memory-limit 0 is too small"},
		{[]string{"--render-memory-limit", "lots"}, "--render-memory-limit \"lots\" is not a quantity"},
		{nil, "cannot use --kubeconfig /nonexistent"},
	} {
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"plan", "x", "-n", "tenant", "--kubeconfig", "/nonexistent"}, c.args...))
		if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan %v: %v; want %q", c.args, err, c.want)
		}
	}
}

// TestPlanShowsTheAPIServersWarnings: a dry run of the plan that the API
// server answers with a warning shows
// it on stderr, once, as kubectl would: here a node selector of a label
// deprecated since Kubernetes 1.14.
func TestPlanShowsTheAPIServersWarnings(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	fetch := servedAddon(t, c, ns, "arch", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: arch\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: arch\nspec:\n  selector:\n    matchLabels: {app: arch}\n" +
			"  template:\n    metadata:\n      labels: {app: arch}\n    spec:\n      nodeSelector: {beta.kubernetes.io/arch: amd64}\n      containers:\n      - name: app\n" +
			"        image: registry.example/app@sha256:" + strings.Repeat("a", 64) + "\n",
	})
	out, _ := capstan(t, cluster, append([]string{"plan", "arch", "-n", ns}, fetch...)...)
	if n := strings.Count(out, "Warning: "); n != 1 || !strings.Contains(out, "beta.kubernetes.io/arch") {
		t.Errorf("plan of a Deployment with a deprecated node selector printed %d warnings; want the API server's one\n%s", n, out)
	}
}

// TestPlanRefusesFlagsThatPlaceTheAddonElsewhere: a Synced add-on that a
// controller of another namespace installed under the cluster profile is
// not planned with the default flags, which place it in the restricted
// profile: that plan would say the sync is held (ProfileChanged) and
// advise deleting the Addon. The error names the flags to give instead;
// with them, the plan is computed.
func TestPlanRefusesFlagsThatPlaceTheAddonElsewhere(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	fetch := servedAddon(t, c, ns, "shard", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: shard\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shard\n",
	})
	a := getAddon(t, c, ns, "shard")
	a.Status.ObservedGeneration = a.Generation
	a.Status.Phase = capstanv1.PhaseSynced
	a.Status.Profile = capstanv1.ProfileCluster
	a.Status.Inventory = []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "shard"}}}
	if err := c.Status().Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}

	out, err := capstan(t, cluster, append([]string{"plan", "shard", "-n", ns}, fetch...)...)
	var exit exitError
	if err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "--trusted-namespaces") || !strings.Contains(err.Error(), "--controller-namespace") ||
		strings.Contains(err.Error(), "ProfileChanged") || strings.Contains(err.Error(), "delete the Addon") {
		t.Errorf("plan with the default flags: %v; want exit code 1, naming the flags to give\n%s", err, out)
	}
	if out, err := capstan(t, cluster, append([]string{"plan", "shard", "-n", ns, "--trusted-namespaces", ns}, fetch...)...); err != nil {
		t.Errorf("plan with the controller's --trusted-namespaces: %v\n%s", err, out)
	}
}

// TestSameProfile: the flags are refused only where status.profile tells
// the controller's placement: while the inventory is empty, and for a
// cluster install that is not held. A real hold is left to the plan, which
// says so; a restricted install that is trusted now is planned.
func TestSameProfile(t *testing.T) {
	config := controller.Config{Namespace: "capstan-system", TrustedNamespaces: []string{"capstan-system"}}
	held := metav1.Condition{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: controller.ReasonProfileChanged}
	inventory := []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}}}
	for _, tc := range []struct {
		name       string
		namespace  string
		recorded   capstanv1.Profile
		inventory  []capstanv1.ObjectID
		conditions []metav1.Condition
		refused    bool
	}{
		{"never reconciled", "tenant", "", nil, nil, false},
		{"the same profile", "tenant", capstanv1.ProfileRestricted, inventory, nil, false},
		{"a cluster install, restricted by the flags", "tenant", capstanv1.ProfileCluster, inventory, nil, true},
		{"a cluster install, held by the controller", "tenant", capstanv1.ProfileCluster, inventory, []metav1.Condition{held}, false},
		{"no inventory, cluster", "tenant", capstanv1.ProfileCluster, nil, nil, true},
		{"no inventory, restricted", "capstan-system", capstanv1.ProfileRestricted, nil, nil, true},
		{"a restricted install, trusted now", "capstan-system", capstanv1.ProfileRestricted, inventory, nil, false},
	} {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: "a"},
			Status: capstanv1.AddonStatus{Profile: tc.recorded, Inventory: tc.inventory, Conditions: tc.conditions}}
		if err := sameProfile(a, config); (err != nil) != tc.refused {
			t.Errorf("%s: %v; want refused %v", tc.name, err, tc.refused)
		}
	}
}

// TestPlanOnAnUnreachableCluster: a cluster out of reach is said as the
// connection problem first, not as a read of the fetch guard's endpoints
// that "is read again": the command reads nothing again.
func TestPlanOnAnUnreachableCluster(t *testing.T) {
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"plan", "x", "--kubeconfig", closedKubeconfig(t)})
	err := root.ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "read again") || strings.Contains(err.Error(), "fetch guard") {
		t.Errorf("plan on an unreachable cluster: %v; want the connection problem, without the fetch guard or \"read again\"\n%s", err, out.String())
	}
}
