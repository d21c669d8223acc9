package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func violationRule(rule string) func(*capstanv1.Addon) bool {
	return func(cur *capstanv1.Addon) bool {
		if cur.Status.Phase != capstanv1.PhaseBlocked || cur.Status.Plan == nil {
			return false
		}
		for _, v := range cur.Status.Plan.Violations {
			if v.Rule == rule {
				return true
			}
		}
		return false
	}
}

// TestRestrictedChartMustBeWrittenForCapstan installs, in the restricted
// profile, a chart whose Chart.yaml does not say it was written for
// Capstan, and an Addon that sets its own release name: both are Blocked
// with the rule that says what to fix, and nothing is applied.
func TestRestrictedChartMustBeWrittenForCapstan(t *testing.T) {
	ns := newNamespace(t)
	plain, _ := charts.publish(t, chart{name: "plain", version: "1.0.0", files: map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: plain\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata: {k: v}\n",
	}})
	a := create(t, newAddon(ns, "plain", plain))
	waitFor(t, a, 90*time.Second, "Blocked by chart-for-capstan", violationRule("chart-for-capstan"))
	if live(t, "v1", "ConfigMap", ns, "plain") != nil {
		t.Error("a Blocked add-on applied its ConfigMap")
	}

	url, _ := charts.publish(t, webChart("1.0.0", nil))
	named := create(t, newAddon(ns, "named", url, withSpec(func(s *capstanv1.AddonSpec) { s.ReleaseName = "other" })))
	waitFor(t, named, 90*time.Second, "Blocked by release-name", violationRule("release-name"))
}

// TestRestrictedAddonAlwaysPrunes upgrades a restricted add-on to a render
// without one of its ConfigMaps, with spec.prune unset: the ConfigMap goes.
func TestRestrictedAddonAlwaysPrunes(t *testing.T) {
	ns := newNamespace(t)
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata: {k: v}\n"
	}
	v1, _ := charts.publish(t, chart{name: "pair", version: "1.0.0", files: map[string]string{"templates/a.yaml": cm("keep"), "templates/b.yaml": cm("drop")}})
	a := create(t, newAddon(ns, "pair", v1))
	waitPhase(t, a, capstanv1.PhaseSynced)
	if live(t, "v1", "ConfigMap", ns, "drop") == nil {
		t.Fatal("the first render's ConfigMap was not applied")
	}
	v2, _ := charts.publish(t, chart{name: "pair", version: "2.0.0", files: map[string]string{"templates/a.yaml": cm("keep")}})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = v2 })
	waitPhase(t, a, capstanv1.PhaseSynced)
	eventually(t, 30*time.Second, "the dropped ConfigMap to be pruned", func() bool {
		return live(t, "v1", "ConfigMap", ns, "drop") == nil
	})
	if live(t, "v1", "ConfigMap", ns, "keep") == nil {
		t.Error("the ConfigMap the new render keeps was deleted")
	}
}

// TestRestrictedRandomValuesAreViolations installs, in the restricted
// profile, a chart that makes a password with randAlphaNum: the field is a
// violation that names the object and the path, and says to use
// x-capstan-generate.
func TestRestrictedRandomValuesAreViolations(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "random", version: "1.0.0", files: map[string]string{
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: {{ randAlphaNum 16 | quote }}\n",
	}})
	a := create(t, newAddon(ns, "random", url))
	got := waitFor(t, a, 90*time.Second, "Blocked by random-values", violationRule("random-values"))
	for _, v := range got.Status.Plan.Violations {
		if v.Rule == "random-values" && (v.Object.Kind != "Secret" || v.Object.Name != "db" || v.Path != "stringData.password" ||
			!strings.Contains(v.Message, "x-capstan-generate")) {
			t.Errorf("violation %+v; want Secret db, stringData.password, and the way out", v)
		}
	}
	if live(t, "v1", "Secret", ns, "db") != nil {
		t.Error("a Blocked add-on applied its Secret")
	}
}

// TestRestrictedRandomFieldsReadNothingOutside: a tenant's chart renders a
// Secret with a random token, named after a Secret of another namespace
// that exists and holds that key. The read that keeps random fields as
// they run is the controller's own and comes before the guardrails, so it
// must not happen: the plan's notice must not tell the tenant that the
// Secret exists, and the guardrails refuse the object.
func TestRestrictedRandomFieldsReadNothingOutside(t *testing.T) {
	ctx := context.Background()
	ns, other := newNamespace(t), newNamespace(t)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "bootstrap-token-abcdef"}, Data: map[string][]byte{"token": []byte("the real one")}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "prober", version: "1.0.0", files: map[string]string{
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-abcdef\n  namespace: " + other +
			"\ndata:\n  token: {{ randAlphaNum 8 | b64enc }}\n",
	}})
	a := create(t, newAddon(ns, "prober", url))
	got := waitFor(t, a, 90*time.Second, "Blocked by random-values", violationRule("random-values"))
	for _, n := range got.Status.Plan.Notices {
		if strings.Contains(n.Message, "kept as they run") {
			t.Errorf("the plan tells the tenant that another namespace's Secret exists: %+v", n)
		}
	}
	refused := false
	for _, v := range got.Status.Plan.Violations {
		refused = refused || v.Rule == "namespace-not-allowed" && v.Object.Name == "bootstrap-token-abcdef"
	}
	if !refused {
		t.Errorf("violations %+v; want the Secret of another namespace refused", got.Status.Plan.Violations)
	}
}

// TestRestrictedRandomNamesAndHooksAreViolations installs, in the
// restricted profile, a chart whose migration Job hook is named at random,
// whose ConfigMap is named at random, and whose hook Secret holds a random
// password: each would make a new object or run a new Job on every sync,
// so each is a random-values violation, and nothing runs.
func TestRestrictedRandomNamesAndHooksAreViolations(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "renamer", version: "1.0.0", files: map[string]string{
		"templates/migrate.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate-{{ randAlphaNum 5 | lower }}\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n" +
			"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: migrate\n          image: registry.example/tools:1.0\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf-{{ randAlphaNum 5 | lower }}\ndata: {k: v}\n",
		"templates/seed.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: seed\n  annotations:\n    helm.sh/hook: pre-install\nstringData:\n  password: {{ randAlphaNum 16 | quote }}\n",
	}})
	a := create(t, newAddon(ns, "renamer", url))
	got := waitFor(t, a, 90*time.Second, "Blocked by random-values", violationRule("random-values"))
	found := map[string]bool{}
	for _, v := range got.Status.Plan.Violations {
		if v.Rule == "random-values" {
			name := v.Object.Name
			if strings.HasPrefix(name, "migrate-") || strings.HasPrefix(name, "conf-") {
				name, _, _ = strings.Cut(name, "-")
			}
			found[v.Object.Kind+"/"+name+"@"+v.Path] = true
		}
	}
	for _, want := range []string{"Job/migrate@metadata.name", "ConfigMap/conf@metadata.name", "Secret/seed@stringData.password"} {
		if !found[want] {
			t.Errorf("no random-values violation %s; got %v", want, found)
		}
	}
	if live(t, "v1", "Secret", ns, "seed") != nil {
		t.Error("a Blocked add-on ran its hook")
	}
}

// TestRandomNameNotice: a cluster add-on whose
// chart names a ConfigMap at random is not refused, but its plan says so,
// rather than that the name is "set by this render, as the object is new".
func TestRandomNameNotice(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "renamed", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf-{{ randAlphaNum 5 | lower }}\ndata: {k: v}\n",
	}})
	a := create(t, newAddon(controllerNS, "renamed-"+ns, url, withTarget(ns)))
	got := waitFor(t, a, 90*time.Second, "a plan", func(cur *capstanv1.Addon) bool { return cur.Status.Plan != nil })
	if got.Status.Profile != capstanv1.ProfileCluster {
		t.Fatalf("profile %s, want cluster", got.Status.Profile)
	}
	named := false
	for _, n := range got.Status.Plan.Notices {
		if strings.HasPrefix(n.Path, "objects/ConfigMap/conf-") {
			named = strings.Contains(n.Message, "names this object at random")
			if !named {
				t.Errorf("notice %+v; want it to say the name is random", n)
			}
		}
	}
	if !named {
		t.Errorf("no notice of the random name in %+v", got.Status.Plan.Notices)
	}
}

// TestRestrictedChartCredentialsMustBeLabelled: a restricted add-on's
// spec.chart.secretRef names a Secret of its namespace that is not
// labelled for it: the controller does not send it to the chart's host,
// and says which label to add; once labelled, it is read at once.
func TestRestrictedChartCredentialsMustBeLabelled(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-registry"},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("the real one")}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(ns, "creds", url, withSpec(func(s *capstanv1.AddonSpec) {
		s.Chart.SecretRef = &capstanv1.LocalObjectReference{Name: "platform-registry"}
	})))
	got := waitFor(t, a, 90*time.Second, "a stop that names the label", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "is not labelled "+capstanv1.AddonLabel+"=creds")
	})
	if strings.Contains(readyMessage(got), "the real one") {
		t.Errorf("the message carries the Secret's value: %s", readyMessage(got))
	}

	// Labelled, the Secret is read at once, not at the resync (20 s in
	// the suite).
	theirs.Labels = map[string]string{capstanv1.AddonLabel: "creds"}
	if err := admin.Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	labelled := time.Now()
	got = waitFor(t, a, 60*time.Second, "the labelled credentials to be read", func(cur *capstanv1.Addon) bool {
		return !strings.Contains(readyMessage(cur), "is not labelled")
	})
	if took := time.Since(labelled); took > 12*time.Second {
		t.Errorf("the add-on read its labelled credentials %s after the label was set, as the resync would: %s", took.Round(time.Second), describeStatus(got))
	}
}

// TestMassPruneWaitsForApproval upgrades an add-on to a render that drops
// three of its four objects: the plan waits for an approval, nothing is
// deleted, and once exactly that plan is approved the three are pruned.
func TestMassPruneWaitsForApproval(t *testing.T) {
	ns := newNamespace(t)
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata: {k: v}\n"
	}
	v1, _ := charts.publish(t, chart{name: "four", version: "1.0.0", files: map[string]string{
		"templates/a.yaml": cm("a"), "templates/b.yaml": cm("b"), "templates/c.yaml": cm("c"), "templates/d.yaml": cm("d")}})
	a := create(t, newAddon(controllerNS, "four-"+ns, v1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	waitPhase(t, a, capstanv1.PhaseSynced)
	v2, _ := charts.publish(t, chart{name: "four", version: "2.0.0", files: map[string]string{"templates/a.yaml": cm("a")}})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = v2 })
	got := waitFor(t, a, 90*time.Second, "the mass prune held", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "PruneNeedsApproval"
	})
	if msg := readyMessage(got); got.Status.Phase != capstanv1.PhaseOutOfSync || !strings.Contains(msg, "deletes 3 of the 4") {
		t.Errorf("phase %s, message %q", got.Status.Phase, msg)
	}
	for _, name := range []string{"b", "c", "d"} {
		if live(t, "v1", "ConfigMap", ns, name) == nil {
			t.Fatalf("ConfigMap %s was pruned before the approval", name)
		}
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan, cur.Spec.SyncRequest = got.Status.Plan.Hash, cur.Spec.SyncRequest+1
	})
	waitPhase(t, a, capstanv1.PhaseSynced)
	eventually(t, 30*time.Second, "the approved prune", func() bool {
		return live(t, "v1", "ConfigMap", ns, "b") == nil && live(t, "v1", "ConfigMap", ns, "d") == nil
	})
}
