package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
)

// TestRestrictedPodsMayNotWearThePlatformsLabels: the platform runs a
// plain Service platform-api that selects app: platform-api in the
// namespace it shares with tenants. A tenant's chart whose Deployment
// gives its pods that label would have them receive the platform's
// traffic; the Addon is Blocked, naming the Service, and nothing of it is
// applied.
func TestRestrictedPodsMayNotWearThePlatformsLabels(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	platform := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-api"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "platform-api"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	if err := admin.Create(ctx, platform); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "impostor", version: "1.0.0", files: map[string]string{
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: impostor
spec:
  replicas: 1
  selector:
    matchLabels: {app: platform-api}
  template:
    metadata:
      labels: {app: platform-api}
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
		if v.Rule == guard.RulePodLabelsSelected && v.Object.Kind == "Deployment" && v.Object.Name == "impostor" &&
			strings.Contains(v.Message, `Service "platform-api"`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("want a %s violation of Deployment impostor naming Service platform-api; got %+v", guard.RulePodLabelsSelected, got.Status.Plan.Violations)
	}
	if live(t, "apps/v1", "Deployment", ns, "impostor") != nil {
		t.Error("the Deployment whose pods the platform's Service selects was applied")
	}
}
