package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/values"
)

// TestPlanWritesNothing computes a restricted add-on's plan on demand, as
// `capstan plan` does (through the operations layer), with a generated value that was never kept and a
// values Secret that was never adopted. The API server's audit log must
// show no write by the planning user, only its dry runs.
func TestPlanWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	name := "readonly"
	const planUser = "capstan-plan-auditor"

	url, _ := charts.publish(t, chart{name: "readonly", version: "1.0.0", files: map[string]string{
		"values.schema.json": `{"type":"object","properties":{
  "token": {"type":"string","writeOnly":true,"x-capstan-generate":{"length":24}},
  "greeting": {"type":"string"}},"required":["greeting"]}`,
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-token
stringData:
  token: {{ .Values.token | quote }}
`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-greeting
data:
  greeting: {{ .Values.greeting | quote }}
`,
	}})
	valuesSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: values.ValuesPrefix(name) + "1",
			Labels: map[string]string{capstanv1.AddonLabel: name}},
		StringData: map[string]string{"values.yaml": "greeting: hello\n"},
	}
	if err := admin.Create(ctx, valuesSecret); err != nil {
		t.Fatal(err)
	}
	// Paused, so that the running controller leaves it alone: what changes
	// can only come from the plan.
	a := newAddon(ns, name, url, withSpec(func(s *capstanv1.AddonSpec) {
		s.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: valuesSecret.Name}}
	}))
	a.Annotations = map[string]string{capstanv1.PausedAnnotation: "true"}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}

	cfg := cluster.ConfigFor(planUser, "system:masters")
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	fetcher, err := addons.NewFetcher(cfg, addons.FetcherOptions{Guard: netguard.Config{Allow: []string{charts.addr}, LoopbackOnly: true}, CABundle: charts.caPEM})
	if err != nil {
		t.Fatal(err)
	}
	planner := addons.Planner{Client: c, RestConfig: cfg, Fetcher: fetcher, Config: controller.Config{Namespace: controllerNS}}
	_, p, err := planner.Plan(ctx, client.ObjectKeyFromObject(a))
	if err != nil {
		t.Fatalf("planning: %v", err)
	}
	if len(p.ValuesErrors) > 0 || len(p.Violations) > 0 || p.Summary.Create != 2 {
		t.Fatalf("the plan should create the Secret and the ConfigMap with no problem; it has %d creates, values errors %v, violations %v",
			p.Summary.Create, p.ValuesErrors, p.Violations)
	}

	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: values.GeneratedName(name)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the generated values Secret: %v; a plan must not create it", err)
	}
	got := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(valuesSecret), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) > 0 || got.ResourceVersion != valuesSecret.ResourceVersion {
		t.Errorf("the values Secret was changed by the plan (owners %v, resourceVersion %s, was %s)",
			got.OwnerReferences, got.ResourceVersion, valuesSecret.ResourceVersion)
	}

	var writes, dryRuns []string
	entries, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.User.Username != planUser {
			continue
		}
		if strings.Contains(e.RequestURI, "dryRun=All") {
			dryRuns = append(dryRuns, e.Verb+" "+e.RequestURI)
			continue
		}
		writes = append(writes, e.Verb+" "+e.RequestURI)
	}
	if len(writes) > 0 {
		t.Errorf("the plan made %d writes; want none:\n%s", len(writes), strings.Join(writes, "\n"))
	}
	// The audit log records the planning user's requests; without its dry
	// runs there, finding no write would prove nothing.
	if len(dryRuns) < 2 {
		t.Errorf("the audit log holds %d dry runs by %s; want one per object", len(dryRuns), planUser)
	}
}

// TestPlanOnDemandIsTheControllers plans a suspended add-on whose chart
// reads the platform's facts, on demand, with the controller's
// configuration: the hash is the one in its status. Without the platform
// ConfigMap, as a `capstan plan` not told of it would plan, the chart
// renders otherwise and the hash differs.
func TestPlanOnDemandIsTheControllers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "ondemand", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: facts\ndata:\n  host: {{ .Values.capstan.hostname | default \"none\" | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "ondemand-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true })))
	a = waitFor(t, a, 30*time.Second, "the suspended add-on's plan", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSuspended && cur.Status.Plan != nil && cur.Status.Plan.Generation == cur.Generation
	})

	fetcher, err := addons.NewFetcher(cluster.Config, addons.FetcherOptions{Guard: netguard.Config{Allow: []string{charts.addr}, LoopbackOnly: true}, CABundle: charts.caPEM})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		platform string
		same     bool
	}{{platformConfigMap, true}, {"", false}} {
		planner := addons.Planner{Client: admin, RestConfig: cluster.Config, Fetcher: fetcher,
			Config: controller.Config{Namespace: controllerNS, PlatformConfigMap: tc.platform}}
		_, p, err := planner.Plan(ctx, client.ObjectKeyFromObject(a))
		if err != nil {
			t.Fatalf("planning with platform ConfigMap %q: %v", tc.platform, err)
		}
		if same := p.Hash == a.Status.Plan.Hash; same != tc.same {
			t.Errorf("planned with platform ConfigMap %q: hash %s, the controller's %s; want them the same: %v", tc.platform, p.Hash, a.Status.Plan.Hash, tc.same)
		}
	}
}
