package integration_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/install"
)

// TestClientSelectorsOnTheAPIServer reads the selectors of a namespace the
// platform shares with Addon "blog", as the controller's own identity:
// those of the objects blog does not own, and none that is empty.
func TestClientSelectorsOnTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "guard-selectors"
	mustCreate(t, ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	blog := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: ns, UID: "00000000-0000-4000-8000-000000000002"}}
	ports := []corev1.ServicePort{{Port: 80}}
	blogLabels := map[string]string{capstanv1.AddonLabel: "blog", capstanv1.AddonNamespaceLabel: ns}

	// The platform's Service, and another Addon's: selected on.
	mustCreate(t, ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "platform-api", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "platform-api"}, Ports: ports}})
	mustCreate(t, ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "wiki", Namespace: ns, Labels: map[string]string{capstanv1.AddonLabel: "wiki", capstanv1.AddonNamespaceLabel: ns}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "wiki"}, Ports: ports}})
	// blog's own Service, and one with no selector: left out.
	mustCreate(t, ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: ns, Labels: blogLabels},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "blog"}, Ports: ports}})
	mustCreate(t, ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "external-db", Namespace: ns}, Spec: corev1.ServiceSpec{Ports: ports}})
	// A NetworkPolicy that grants the platform's database clients, and a
	// default deny that picks every pod alike.
	mustCreate(t, ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "db-clients", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"db-client"}},
		}}}})
	mustCreate(t, ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default-deny", Namespace: ns}})
	// The platform's budget.
	mustCreate(t, ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "platform-web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "platform-web"}}}})

	reader, err := client.New(cluster.ConfigFor(install.ControllerUser), client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	sels, err := guard.ClientSelectors(reader, blog)(ctx, ns)
	if err != nil {
		t.Fatalf("reading the selectors as the controller: %v", err)
	}
	var got []string
	for _, s := range sels {
		got = append(got, s.Kind+"/"+s.Name+" "+s.Selector.String())
	}
	sort.Strings(got)
	want := []string{
		"NetworkPolicy/db-clients tier in (db-client)",
		"PodDisruptionBudget/platform-web app=platform-web",
		"Service/platform-api app=platform-api",
		"Service/wiki app=wiki",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("selectors:\n got: %q\nwant: %q", got, want)
	}

	// A reader that may list nothing: the rule cannot judge, and says so.
	nobody, err := client.New(cluster.ConfigFor("guard-nobody"), client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := guard.ClientSelectors(nobody, blog)(ctx, ns); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("reading the selectors without access: %v; want the refusal", err)
	}
}
