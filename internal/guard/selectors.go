package guard

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// The rules of the selectors in the Addon's namespace.
const (
	// RulePodLabelsSelected refuses a pod template whose labels a selector
	// of an object this Addon does not own matches.
	RulePodLabelsSelected = "pod-labels-selected"
	// RuleSubdomainNotRendered refuses a pod subdomain that names no
	// Service of the chart's.
	RuleSubdomainNotRendered = "subdomain-not-rendered"
)

// PlatformLabel is the pod label no restricted chart may set, so that the
// platform can select its own pods on it: a Service, NetworkPolicy or
// PodDisruptionBudget of the platform's that selects on it never picks a
// tenant's pod, the one created after the tenant's too.
const PlatformLabel = "capstan.dev/platform"

// Selector is the label selector of a live object in the Addon's
// namespace that the Addon does not own: a Service's spec.selector, a
// NetworkPolicy's spec.podSelector or a PodDisruptionBudget's
// spec.selector. Whatever pod it matches, whoever made the pod, gets that
// object's traffic, network rights or disruption budget.
type Selector struct {
	// Kind and Name name the selecting object.
	Kind, Name string
	// Selector is its selector; an empty one is left out by the reader.
	Selector labels.Selector
}

// SelectorsFunc reads the selectors in namespace of the objects the Addon
// does not own. An error means they are unknown.
type SelectorsFunc func(ctx context.Context, namespace string) ([]Selector, error)

// maxSelectorObjects caps how many objects of each kind ClientSelectors
// reads, and selectorPage is how many it asks for at once.
const (
	maxSelectorObjects = 2000
	selectorPage       = 500
)

// checkSelected refuses every pod template of the render whose labels a
// selector of an object this Addon does not own matches, and every pod
// subdomain that names no Service the chart renders. The selectors are
// read once, and only when the render holds a pod template.
//
// NOTE: restricted add-ons share the platform's namespace, and a Service,
// NetworkPolicy or PodDisruptionBudget picks pods by label, not by owner:
// a tenant's pod labelled as the platform's would receive the platform's
// traffic (and the credentials in it), its network rights, or count as one
// of its replicas for a drain. A subdomain gives the pod a DNS name under
// the headless Service of that name; one the chart renders is its own.
func (ck *checker) checkSelected(ctx context.Context, decoded []*decodedObject) {
	type template struct {
		ref  capstanv1.ObjectRef
		tmpl *corev1.PodTemplateSpec
	}
	var templates []template
	for _, d := range decoded {
		if d == nil || d.obj == nil || !ck.inNamespace(d.ref.Namespace) {
			continue
		}
		switch o := d.obj.(type) {
		case *appsv1.Deployment:
			templates = append(templates, template{d.ref, &o.Spec.Template})
		case *batchv1.Job:
			templates = append(templates, template{d.ref, &o.Spec.Template})
		}
	}
	for _, t := range templates {
		if _, set := t.tmpl.Labels[PlatformLabel]; set {
			ck.add(t.ref, "spec.template.metadata.labels["+PlatformLabel+"]", RulePodLabelsSelected,
				fmt.Sprintf("the pod template sets the label %s, which Capstan keeps for the platform's own pods to be selected on; remove it", PlatformLabel))
		}
		if sub := t.tmpl.Spec.Subdomain; sub != "" && !ck.rendered[kindName{"Service", sub}] {
			ck.add(t.ref, "spec.template.spec.subdomain", RuleSubdomainNotRendered,
				fmt.Sprintf("subdomain %q names no Service the chart renders: a headless Service of that name in the namespace, the platform's or one made later, would give this pod its DNS names; render a headless Service %q in the chart, or remove subdomain", sub, sub))
		}
	}
	if ck.c.Selectors == nil || len(templates) == 0 {
		return
	}
	selectors, err := ck.c.Selectors(ctx, ck.c.Namespace)
	if err != nil {
		for _, t := range templates {
			ck.add(t.ref, "spec.template.metadata.labels", RuleOwnershipUnknown,
				fmt.Sprintf("could not read the selectors of the Services, NetworkPolicies and PodDisruptionBudgets in namespace %q to check that none picks this pod (%v); the next sync retries", ck.c.Namespace, err))
		}
		return
	}
	for _, t := range templates {
		set := labels.Set(t.tmpl.Labels)
		for _, s := range selectors {
			if s.Selector == nil || s.Selector.Empty() || !s.Selector.Matches(set) {
				continue
			}
			ck.add(t.ref, "spec.template.metadata.labels", RulePodLabelsSelected,
				fmt.Sprintf("the pod template's labels match the selector (%s) of %s %q, which this Addon does not own: its pods would %s; give the pods labels of the chart's own, such as app.kubernetes.io/instance: %s",
					s.Selector, s.Kind, s.Name, selectedEffect(s.Kind), ck.c.AddonName))
		}
	}
}

// selectedEffect says what a pod a selector of kind matches gets.
func selectedEffect(kind string) string {
	switch kind {
	case "Service":
		return "receive that Service's traffic and answer its DNS name"
	case "NetworkPolicy":
		return "get the network access that policy grants"
	case "PodDisruptionBudget":
		return "count as that budget's healthy pods, so a drain could evict the pods it protects"
	}
	return "be picked by it"
}

// ClientSelectors reads, through r, the selectors of the Services,
// NetworkPolicies and PodDisruptionBudgets in the namespace that addon
// does not own, for the pod-labels-selected rule. It leaves out empty
// selectors: a Service without one selects no pod, and an empty
// NetworkPolicy podSelector or PDB selector picks every pod of the
// namespace alike, so no label of the chart's gets more from it. It reads
// in pages, at most maxSelectorObjects objects of each kind: a namespace
// that holds more is an error, so the rule refuses rather than judges on
// part of them. Pass an uncached reader, such as the manager's APIReader,
// so that no cache of these kinds is started for it.
func ClientSelectors(r client.Reader, addon *capstanv1.Addon) SelectorsFunc {
	return func(ctx context.Context, namespace string) ([]Selector, error) {
		var out []Selector
		add := func(kind string, obj metav1.Object, sel labels.Selector) {
			if sel != nil && !sel.Empty() && !OwnedBy(obj, addon) {
				out = append(out, Selector{Kind: kind, Name: obj.GetName(), Selector: sel})
			}
		}
		var services corev1.ServiceList
		if err := listAll(ctx, r, namespace, "Services", &services, func() int {
			for i := range services.Items {
				s := &services.Items[i]
				add("Service", s, labels.SelectorFromValidatedSet(s.Spec.Selector))
			}
			return len(services.Items)
		}); err != nil {
			return nil, err
		}
		var policies networkingv1.NetworkPolicyList
		if err := listAll(ctx, r, namespace, "NetworkPolicies", &policies, func() int {
			for i := range policies.Items {
				p := &policies.Items[i]
				sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
				if err != nil {
					sel = nil
				}
				add("NetworkPolicy", p, sel)
			}
			return len(policies.Items)
		}); err != nil {
			return nil, err
		}
		var budgets policyv1.PodDisruptionBudgetList
		if err := listAll(ctx, r, namespace, "PodDisruptionBudgets", &budgets, func() int {
			for i := range budgets.Items {
				b := &budgets.Items[i]
				var sel labels.Selector
				if b.Spec.Selector != nil {
					if s, err := metav1.LabelSelectorAsSelector(b.Spec.Selector); err == nil {
						sel = s
					}
				}
				add("PodDisruptionBudget", b, sel)
			}
			return len(budgets.Items)
		}); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// listAll lists list in namespace page by page, calling each after every
// page; each returns how many items the page held. It fails past
// maxSelectorObjects items.
func listAll(ctx context.Context, r client.Reader, namespace, what string, list client.ObjectList, each func() int) error {
	seen := 0
	cont := ""
	for {
		if err := r.List(ctx, list, client.InNamespace(namespace), client.Limit(selectorPage), client.Continue(cont)); err != nil {
			return fmt.Errorf("list %s: %w", what, err)
		}
		seen += each()
		lm, ok := list.(metav1.ListInterface)
		if !ok {
			return nil
		}
		cont = lm.GetContinue()
		if cont == "" {
			return nil
		}
		if seen >= maxSelectorObjects {
			return fmt.Errorf("the namespace holds more than %d %s, more than the guard reads to find the selectors that could pick the chart's pods", maxSelectorObjects, what)
		}
	}
}
