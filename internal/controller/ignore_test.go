package controller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestIgnoredFieldsAreLeftAsTheyRun: a Deployment's replicas, scaled by
// someone else as an autoscaler does, stay as they run through drift
// checks, a refresh and an upgrade, when spec.ignore names them; the
// plan says so. A rule that names what Capstan must set is refused, and
// nothing is applied.
func TestIgnoredFieldsAreLeftAsTheyRun(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	// NOTE: the greeting is on the Deployment too, so that each upgrade
	// applies it, replicas and all.
	web := webChart("1.0.0", nil)
	web.files["templates/deployment.yaml"] = strings.Replace(web.files["templates/deployment.yaml"],
		"  name: {{ .Release.Name }}\nspec:", "  name: {{ .Release.Name }}\n  annotations: {greeting: {{ .Values.greeting | quote }}}\nspec:", 1)
	url, _ := charts.publish(t, web)
	a := create(t, newAddon(controllerNS, "ignore-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"/spec/replicas"}, Target: capstanv1.IgnoreTarget{Kind: "Deployment"}}}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	replicas := func() int64 {
		r, _, _ := unstructured.NestedInt64(live(t, "apps/v1", "Deployment", ns, a.Name).Object, "spec", "replicas")
		return r
	}
	if r := replicas(); r != 1 {
		t.Fatalf("installed with %d replicas, want the chart's 1", r)
	}

	// Scaled as an autoscaler does: another field manager's update.
	dep := live(t, "apps/v1", "Deployment", ns, a.Name)
	if err := admin.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)), client.FieldOwner("autoscaler")); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, "after-scaling")
	got := waitFor(t, a, 60*time.Second, "the refresh handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "after-scaling" && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if r := replicas(); r != 3 {
		t.Fatalf("after a sync: %d replicas, want the 3 it was scaled to\n%s", r, describeStatus(got))
	}
	noticed := false
	for _, n := range got.Status.Plan.Notices {
		noticed = noticed || (strings.HasPrefix(n.Path, "spec.ignore/Deployment/") && strings.Contains(n.Message, "/spec/replicas"))
	}
	if !noticed {
		t.Errorf("the plan does not say the replicas were left as they run: %+v", got.Status.Plan.Notices)
	}
	// A rule that selects nothing the chart renders says so.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Ignore = append(cur.Spec.Ignore, capstanv1.IgnoreRule{Paths: []string{"/data"}, Target: capstanv1.IgnoreTarget{Kind: "configmap"}},
			capstanv1.IgnoreRule{Paths: []string{"/spec/replica"}, Target: capstanv1.IgnoreTarget{Kind: "Deployment"}})
	})
	got = waitFor(t, a, 60*time.Second, "the plan of the new rules", func(cur *capstanv1.Addon) bool {
		return cur.Status.Plan != nil && cur.Status.Plan.Generation == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	unmatched, misspelt := false, false
	for _, n := range got.Status.Plan.Notices {
		unmatched = unmatched || (n.Path == "spec.ignore[1]" && strings.Contains(n.Message, "selects none"))
		misspelt = misspelt || (strings.HasPrefix(n.Path, "spec.ignore/Deployment/") && strings.HasPrefix(n.Message, "/spec/replica is in neither"))
	}
	if !unmatched || !misspelt || replicas() != 3 {
		t.Errorf("a rule on kind configmap, and a path written wrong: notices %+v, %d replicas", got.Status.Plan.Notices, replicas())
	}

	// An upgrade changes what the chart sets, and not the replicas.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"greeting":"hi"}`) })
	waitFor(t, a, 60*time.Second, "the upgrade", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && len(cur.Status.History) == 2
	})
	cm := live(t, "v1", "ConfigMap", ns, a.Name+"-config")
	if g, _, _ := unstructured.NestedString(cm.Object, "data", "greeting"); g != "hi" || replicas() != 3 {
		t.Fatalf("after the upgrade: greeting %q, %d replicas; want hi and 3", g, replicas())
	}

	// Scaled again between the plan and the apply, as while pre hooks
	// run: the apply keeps what runs then, not what the plan read.
	var scaled sync.Once
	stepHooks.Store(controllerNS+"/"+a.Name, func(step string) error {
		if step == "apply" {
			scaled.Do(func() {
				dep := live(t, "apps/v1", "Deployment", ns, a.Name)
				if err := admin.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`)), client.FieldOwner("autoscaler")); err != nil {
					t.Error(err)
				}
			})
		}
		return nil
	})
	defer stepHooks.Delete(controllerNS + "/" + a.Name)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"greeting":"hey"}`) })
	waitFor(t, a, 60*time.Second, "the second upgrade", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && len(cur.Status.History) == 3
	})
	if r := replicas(); r != 5 {
		t.Fatalf("scaled to 5 just before the apply: %d replicas after it", r)
	}

	// A rule that names an object's identity is refused before anything
	// is applied; one that is not a JSON pointer, when it is written.
	bad := create(t, newAddon(controllerNS, "ignore-bad-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName = "bad"
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"/metadata/name"}}}
	})))
	failed := waitPhase(t, bad, capstanv1.PhaseFailed)
	if c := condition(failed, capstanv1.ConditionReady); c == nil || !strings.Contains(c.Message, "spec.ignore[0].paths[0]") || !strings.Contains(c.Message, "only one annotation or label") {
		t.Fatalf("a rule on metadata.name: %s", describeStatus(failed))
	}
	if live(t, "apps/v1", "Deployment", ns, "bad") != nil || len(failed.Status.Inventory) != 0 {
		t.Fatal("an add-on with a refused rule applied something")
	}
	err := admin.Create(ctx, newAddon(controllerNS, "ignore-worse-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"spec/replicas"}}}
	})))
	if err == nil || !strings.Contains(err.Error(), "spec.ignore[0].paths[0]") {
		t.Fatalf("a path that is not a JSON pointer: %v", err)
	}
}

// TestAnIgnoredIndexNamesTheSameItem: a container an injector puts before
// the chart's takes index 0, and the apply matches containers by name, so
// a rule on /spec/template/spec/containers/0/image must not give the
// chart's container the injected one's image. The plan names the path.
func TestAnIgnoredIndexNamesTheSameItem(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "ignore-index-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"/spec/template/spec/containers/0/image"}, Target: capstanv1.IgnoreTarget{Kind: "Deployment"}}}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)

	// Injected as a mutating webhook or a policy does: a container first.
	dep := live(t, "apps/v1", "Deployment", ns, a.Name)
	if err := admin.Patch(ctx, dep, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/spec/template/spec/containers/0","value":{"name":"istio-proxy","image":"proxy:1.0"}}]`)), client.FieldOwner("injector")); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, "after-injection")
	got := waitFor(t, a, 60*time.Second, "the refresh handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "after-injection" && cur.Status.Phase == capstanv1.PhaseSynced
	})
	images := map[string]string{}
	containers, _, _ := unstructured.NestedSlice(live(t, "apps/v1", "Deployment", ns, a.Name).Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		m := c.(map[string]any)
		images[m["name"].(string)], _ = m["image"].(string)
	}
	if images["web"] != "nginx:1.27" || images["istio-proxy"] != "proxy:1.0" {
		t.Errorf("images %v: want the chart's nginx:1.27 for web and the injected proxy:1.0 for istio-proxy\n%s", images, describeStatus(got))
	}
	noticed := false
	for _, n := range got.Status.Plan.Notices {
		noticed = noticed || (strings.HasPrefix(n.Path, "spec.ignore/Deployment/") && strings.HasPrefix(n.Message, "/spec/template/spec/containers/0/image names by its index"))
	}
	if !noticed {
		t.Errorf("the plan does not name the path whose index names another container: %+v", got.Status.Plan.Notices)
	}
}

// TestARestrictedRuleReadsOnlyWhatTheAddonApplied: the read for spec.ignore
// is the controller's own and comes before the guardrails, so a tenant's
// rule never reads an object its add-on has not applied: an object of the
// namespace that someone else made is not read, and the plan says nothing
// of it. What the add-on applied is kept as it runs.
func TestARestrictedRuleReadsOnlyWhatTheAddonApplied(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Data: map[string]string{"a": "runs"}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "tenant", version: "1.0.0", files: map[string]string{
		"templates/mine.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\ndata:\n  a: chart\n",
		"templates/theirs.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: theirs\ndata:\n  a: chart\n",
	}})
	a := create(t, newAddon(ns, "tenant", url, withSpec(func(s *capstanv1.AddonSpec) {
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"/data/a"}, Target: capstanv1.IgnoreTarget{Kind: "ConfigMap"}}}
	})))
	got := waitFor(t, a, 60*time.Second, "a plan", func(cur *capstanv1.Addon) bool { return cur.Status.Plan != nil })
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("profile %s, want restricted", got.Status.Profile)
	}
	for _, n := range got.Status.Plan.Notices {
		if strings.HasPrefix(n.Path, "spec.ignore/") {
			t.Fatalf("the rule read an object the add-on never applied: %+v", n)
		}
	}
	if cm := live(t, "v1", "ConfigMap", ns, "theirs"); cm.GetLabels()[capstanv1.AddonLabel] != "" {
		t.Fatalf("another's ConfigMap was taken: %v", cm.GetLabels())
	}
}

// TestARestrictedRuleSkipsWhatTheInventoryNamesButOthersMade: a tenant's
// install whose pre-install hook fails has saved its inventory, Secret x
// in it, and created nothing. Someone else then creates Secret x. A rule
// on its /data/k must not read it: the notice that the field is "left as
// the object runs" would tell the tenant whether the value its chart
// guesses is the one the Secret holds.
func TestARestrictedRuleSkipsWhatTheInventoryNamesButOthersMade(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "guesser", version: "1.0.0", files: map[string]string{
		"templates/x.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\ndata:\n  k: {{ .Values.guess | b64enc }}\n",
		"templates/hook.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: fail\n  annotations:\n    helm.sh/hook: pre-install\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    metadata:\n      labels:\n        capstan.dev/test-fail: \"true\"\n" +
			"    spec:\n      restartPolicy: Never\n      containers:\n        - name: fail\n          image: registry.example/tools:1.0\n",
	}})
	a := create(t, newAddon(ns, "guesser", url, withValues("guess: hunter2"), withSpec(func(s *capstanv1.AddonSpec) {
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"/data/k"}, Target: capstanv1.IgnoreTarget{Kind: "Secret"}}}
	})))
	got := failedWith(t, a, "the pre-install hook failed, so nothing was applied")
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("profile %s, want restricted", got.Status.Profile)
	}
	held := false
	for _, ref := range capstanv1.RefsOf(got.Status.Inventory) {
		held = held || ref.Kind == "Secret" && ref.Name == "x"
	}
	if !held || live(t, "v1", "Secret", ns, "x") != nil {
		t.Fatalf("want Secret x in the inventory and not created; inventory %v", got.Status.Inventory)
	}

	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}, Data: map[string][]byte{"k": []byte("the real one")}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("guess: hunter3") })
	got = waitFor(t, a, 90*time.Second, "a plan of the new guess", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Plan != nil && cur.Status.Phase == capstanv1.PhaseBlocked
	})
	for _, n := range got.Status.Plan.Notices {
		if strings.HasPrefix(n.Path, "spec.ignore/") {
			t.Errorf("the rule read a Secret the add-on never created: %+v", n)
		}
	}
}

// TestAnIgnoredSecretKeyIsLeftAsItRuns: a chart sets a Secret's password
// in stringData, and an operator rotates it in the running Secret. The API
// server stores no stringData: it writes each key into data, over what data
// holds. So a rule on /data/password must keep the rotated password through
// a sync and an upgrade, rather than let the chart's stringData write over
// it. A rule on /stringData/token, a key the chart generates and
// keepGenerated already moved into data, is no path "in neither" the
// object nor the chart.
func TestAnIgnoredSecretKeyIsLeftAsItRuns(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "db", version: "1.0.0", files: map[string]string{
		"values.yaml": "user: app\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  user: {{ .Values.user | quote }}\n" +
			"  password: from-chart\n  token: {{ randAlphaNum 16 | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "isecret-"+ns[strings.LastIndex(ns, "-")+1:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"/data/password", "/stringData/token"}, Target: capstanv1.IgnoreTarget{Kind: "Secret", Name: "db"}}}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	data := func(key string) string {
		v, _, _ := unstructured.NestedString(live(t, "v1", "Secret", ns, "db").Object, "data", key)
		return v
	}
	if p := data("password"); p != "ZnJvbS1jaGFydA==" {
		t.Fatalf("installed with data.password %q, want the chart's from-chart, base64", p)
	}

	// Rotated as an operator does: another field manager's update of data.
	const rotated = "cm90YXRlZA==" // "rotated"
	secret := live(t, "v1", "Secret", ns, "db")
	if err := admin.Patch(ctx, secret, client.RawPatch(types.MergePatchType, []byte(`{"data":{"password":"`+rotated+`"}}`)), client.FieldOwner("rotator")); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, "after-rotation")
	got := waitFor(t, a, 60*time.Second, "the refresh handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "after-rotation" && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if p := data("password"); p != rotated {
		t.Fatalf("after a sync: data.password %q, want the rotated %q\n%s", p, rotated, describeStatus(got))
	}
	noticed := false
	for _, n := range got.Status.Plan.Notices {
		noticed = noticed || (n.Path == "spec.ignore/Secret/"+ns+"/db" && strings.HasPrefix(n.Message, "/data/password left as the object runs"))
		if strings.Contains(n.Message, "in neither") {
			t.Errorf("a notice calls an ignored path absent: %+v", n)
		}
	}
	if !noticed {
		t.Errorf("the plan does not say the password was left as it runs: %+v", got.Status.Plan.Notices)
	}

	// An upgrade applies the Secret with the chart's new user, and the
	// rotated password.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"user":"admin"}`) })
	got = waitFor(t, a, 60*time.Second, "the upgrade", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && len(cur.Status.History) == 2
	})
	if u, p := data("user"), data("password"); u != "YWRtaW4=" || p != rotated {
		t.Fatalf("after the upgrade: data.user %q, data.password %q; want admin (YWRtaW4=) and the rotated %q\n%s", u, p, rotated, describeStatus(got))
	}
}
