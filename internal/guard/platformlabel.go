package guard

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// PlatformLabel is the label no restricted chart may set, on an object or
// on a pod template, so that the platform can select its own workloads on
// it: a Service, NetworkPolicy or PodDisruptionBudget of the platform's
// whose selector requires it never picks a tenant's pod, nor does a tool
// that selects the platform's Services or Deployments by it pick a
// tenant's, whenever either was made.
const PlatformLabel = "capstan.dev/platform"

// checkPlatformLabel refuses PlatformLabel in lbls, the labels at path:
// an object's metadata.labels or a pod template's.
//
// NOTE: restricted add-ons share the platform's namespace, and Services,
// NetworkPolicies and PodDisruptionBudgets pick pods by label, not by who
// made them. Capstan does not read the namespace's selectors to judge a
// chart's labels against them: one tenant's broad selector would then
// refuse every other tenant, and the platform's own policies for tenants
// would refuse every chart. It keeps one label for the platform instead.
func (ck *checker) checkPlatformLabel(ref capstanv1.ObjectRef, path string, lbls map[string]string) {
	if _, set := lbls[PlatformLabel]; !set {
		return
	}
	ck.add(ref, path+"["+PlatformLabel+"]", RulePlatformLabel,
		fmt.Sprintf("the chart sets the label %s at %s, which Capstan keeps for the platform to select its own workloads on; remove it", PlatformLabel, path))
}

// checkSubdomain refuses a pod subdomain, in the pod template at path
// base, that names no Service the chart renders: a pod with a subdomain
// answers the DNS names <hostname>.<subdomain> under a headless Service
// of that name in the namespace, the platform's or one made later. The
// chart's own headless Service is its own.
func (ck *checker) checkSubdomain(ref capstanv1.ObjectRef, base string, t *corev1.PodTemplateSpec) {
	sub := t.Spec.Subdomain
	if sub == "" || ck.rendered[kindName{"Service", sub}] {
		return
	}
	ck.add(ref, base+".spec.subdomain", RuleSubdomainNotRendered,
		fmt.Sprintf("subdomain %q names no Service the chart renders: a headless Service of that name in the namespace, the platform's or one made later, would give this pod its DNS names; render a headless Service %q in the chart, or remove subdomain", sub, sub))
}
