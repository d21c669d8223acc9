package guard

import (
	"fmt"
	"strings"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// deniedAnnotation is an annotation that another controller of the
// platform acts on, beyond the tenant's own objects.
type deniedAnnotation struct {
	// key is the annotation's key; with prefix, every key that starts
	// with it.
	key    string
	prefix bool
	// allow is the one value that is allowed, if any: the one that asks
	// the controller for nothing the tenant should not have.
	allow string
	// effect says what the controller does for the annotation.
	effect string
}

// deniedPodAnnotations are the pod template annotations that hold the
// platform's nodes: the cluster autoscaler and Karpenter neither remove nor
// replace a node that runs a pod which asks not to be evicted, so one
// tenant's replica would keep the platform from scaling down and from
// rolling its nodes, as a PodDisruptionBudget would (not an allowed kind).
var deniedPodAnnotations = []deniedAnnotation{
	{key: "cluster-autoscaler.kubernetes.io/safe-to-evict", allow: "true",
		effect: "keeps the cluster autoscaler from removing the pod's node"},
	{key: "karpenter.sh/do-not-disrupt",
		effect: "keeps Karpenter from consolidating, expiring or replacing the pod's node"},
	{key: "karpenter.sh/do-not-evict",
		effect: "keeps older Karpenter releases from removing the pod's node"},
}

// deniedServiceAnnotations are the Service annotations that expose a
// ClusterIP Service beyond the cluster's network, as the refused Service
// types would: the Tailscale operator puts it on the tailnet (or points it
// at a tailnet host), Cilium's cluster mesh shares it with, and balances it
// over, the same-named Service of every cluster in the mesh (whoever runs
// it there), and ExternalDNS publishes its name in the platform's DNS
// zones, any name the chart picks.
var deniedServiceAnnotations = []deniedAnnotation{
	{key: "tailscale.com/", prefix: true,
		effect: "makes the Tailscale operator expose the Service on the tailnet, or point it at a tailnet host"},
	{key: "service.cilium.io/global",
		effect: "shares the Service over Cilium's cluster mesh with the same-named Services of other clusters"},
	{key: "service.cilium.io/shared",
		effect: "shares the Service's endpoints with the other clusters of Cilium's cluster mesh"},
	{key: "service.cilium.io/global-sync-endpoint-slices",
		effect: "syncs the Service's endpoints from the other clusters of Cilium's cluster mesh"},
	{key: "io.cilium/global-service",
		effect: "shares the Service over Cilium's cluster mesh with the same-named Services of other clusters"},
	{key: "io.cilium/shared-service",
		effect: "shares the Service's endpoints with the other clusters of Cilium's cluster mesh"},
	{key: "external-dns.alpha.kubernetes.io/", prefix: true,
		effect: "makes ExternalDNS publish a name the chart picks in the platform's DNS zones"},
}

// checkDeniedAnnotations refuses the annotations of ann at path that the
// denied list names, unless they have its allowed value.
func (ck *checker) checkDeniedAnnotations(ref capstanv1.ObjectRef, path string, ann map[string]string, denied []deniedAnnotation) {
	for _, k := range sortedKeys(ann) {
		for _, d := range denied {
			if k != d.key && (!d.prefix || !strings.HasPrefix(k, d.key)) {
				continue
			}
			if d.allow != "" && ann[k] == d.allow {
				break
			}
			fix := "remove it"
			if d.allow != "" {
				fix = fmt.Sprintf("remove it, or set it to %q", d.allow)
			}
			ck.add(ref, fmt.Sprintf("%s[%s]", path, k), RuleAnnotationNotAllowed,
				fmt.Sprintf("annotation %s %s, which a restricted Addon may not ask for; %s", k, d.effect, fix))
			break
		}
	}
}
