package controller_test

import (
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
)

// TestRestrictedPodsMayNotWearThePlatformLabel: the platform selects its
// own workloads on capstan.dev/platform in the namespace it shares with
// tenants. A tenant's chart whose Deployment gives its pods that label
// would have them receive the traffic, network access or disruption
// budget the platform meant for its own; the Addon is Blocked with
// platform-label, and nothing of it is applied.
func TestRestrictedPodsMayNotWearThePlatformLabel(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "impostor", version: "1.0.0", files: map[string]string{
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: impostor
spec:
  replicas: 1
  selector:
    matchLabels: {app: impostor}
  template:
    metadata:
      labels: {app: impostor, capstan.dev/platform: api}
    spec:
      containers:
        - name: impostor
          image: nginx:1.27
`,
	}})
	a := create(t, newAddon(ns, "impostor", url))
	got := waitPhase(t, a, capstanv1.PhaseBlocked)
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("profile %s; want restricted", got.Status.Profile)
	}
	var found bool
	for _, v := range got.Status.Plan.Violations {
		if v.Rule == guard.RulePlatformLabel && v.Object.Kind == "Deployment" && v.Object.Name == "impostor" &&
			v.Path == "spec.template.metadata.labels["+guard.PlatformLabel+"]" && strings.Contains(v.Message, guard.PlatformLabel) {
			found = true
		}
	}
	if !found {
		t.Fatalf("want a %s violation of Deployment impostor's pod template; got %+v", guard.RulePlatformLabel, got.Status.Plan.Violations)
	}
	if live(t, "apps/v1", "Deployment", ns, "impostor") != nil {
		t.Error("the Deployment whose pods wear the platform's label was applied")
	}
}

// TestRestrictedPodsMayCarryLabelsAnotherTenantSelects: Capstan does not
// judge a chart's pod labels against the selectors in the namespace. One
// tenant's Service that selects app.kubernetes.io/managed-by: Helm, a
// label most charts give their pods, does not keep another tenant's chart
// that carries it from installing.
func TestRestrictedPodsMayCarryLabelsAnotherTenantSelects(t *testing.T) {
	ns := newNamespace(t)
	catchallURL, _ := charts.publish(t, chart{name: "catchall", version: "1.0.0", files: map[string]string{
		"templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: catchall
spec:
  selector: {app.kubernetes.io/managed-by: Helm}
  ports: [{port: 80}]
`,
	}})
	waitPhase(t, create(t, newAddon(ns, "catchall", catchallURL)), capstanv1.PhaseSynced)

	blogURL, _ := charts.publish(t, chart{name: "blog", version: "1.0.0", files: map[string]string{
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: blog
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/instance: blog}
  template:
    metadata:
      labels: {app.kubernetes.io/instance: blog, app.kubernetes.io/managed-by: Helm}
    spec:
      containers:
        - name: blog
          image: nginx:1.27
`,
	}})
	got := waitFor(t, create(t, newAddon(ns, "blog", blogURL)), 90*time.Second, "the second tenant's Deployment to be applied, or the add-on Blocked",
		func(cur *capstanv1.Addon) bool {
			return cur.Status.ObservedGeneration == cur.Generation &&
				(cur.Status.Phase == capstanv1.PhaseBlocked || live(t, "apps/v1", "Deployment", ns, "blog") != nil)
		})
	if got.Status.Phase == capstanv1.PhaseBlocked {
		t.Fatalf("another tenant's Service blocked the add-on: %s", describeStatus(got))
	}
}
