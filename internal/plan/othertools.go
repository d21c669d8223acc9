package plan

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// The marks by which other tools hold an object as their own.
const (
	// HelmReleaseNameAnnotation and HelmReleaseNamespaceAnnotation name the
	// Helm release an object belongs to; Helm 3 refuses to install over an
	// object without them, and uninstalls what its release's manifest
	// lists.
	HelmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	HelmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
	// ArgoTrackingAnnotation is Argo CD's annotation tracking,
	// "APP:GROUP/KIND:NAMESPACE/NAME".
	ArgoTrackingAnnotation = "argocd.argoproj.io/tracking-id"
	// InstanceLabel is the label Argo CD tracks by by default; charts set it
	// to their release's name too, so it counts only beside a field Argo
	// CD wrote.
	InstanceLabel = "app.kubernetes.io/instance"
	// The labels Flux's controllers put on what they apply.
	FluxKustomizeNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	FluxKustomizeNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
	FluxHelmNameLabel           = "helm.toolkit.fluxcd.io/name"
	FluxHelmNamespaceLabel      = "helm.toolkit.fluxcd.io/namespace"
)

// Claim is another tool's mark on a live object that it is its own: what
// an adoption leaves in place, so that the other tool may still delete or
// change the object.
type Claim struct {
	// Tool names the tool and what of it holds the object: "Helm release
	// apps/web", "Argo CD Application web".
	Tool string
	// Advice says how to let the tool go without it deleting the object.
	Advice string
}

// ClaimOf returns another tool's claim on a live object, and false when no
// other tool marks it as its own. Only one claim is returned, the one
// whose tool would delete the object first: Flux's helm-controller before
// the Helm release it made, whose record the advice covers too.
func ClaimOf(live metav1.Object) (Claim, bool) {
	labels, annotations := live.GetLabels(), live.GetAnnotations()
	release, releaseNS := annotations[HelmReleaseNameAnnotation], annotations[HelmReleaseNamespaceAnnotation]
	helmRecord := ""
	if release != "" && releaseNS != "" {
		helmRecord = fmt.Sprintf("the Secrets labelled owner=helm,name=%s in namespace %s (kubectl delete secret -n %s -l owner=helm,name=%s; ConfigMaps instead with Helm's configmap storage driver)",
			release, releaseNS, releaseNS, release)
	}
	switch {
	case labels[FluxHelmNameLabel] != "":
		hr := qualified(labels[FluxHelmNamespaceLabel], labels[FluxHelmNameLabel])
		advice := fmt.Sprintf("while it runs it undoes this add-on's changes, and deleting the HelmRelease uninstalls its Helm release, which deletes the adopted objects. Suspend it first (flux suspend helmrelease %s -n %s): a suspended HelmRelease is deleted with no uninstall; then delete it",
			labels[FluxHelmNameLabel], labels[FluxHelmNamespaceLabel])
		if helmRecord != "" {
			advice += ", and the record of its Helm release, " + helmRecord + ", so that no helm uninstall deletes them later"
		}
		return Claim{Tool: "Flux HelmRelease " + hr, Advice: advice}, true
	case annotations[ArgoTrackingAnnotation] != "":
		app, _, _ := strings.Cut(annotations[ArgoTrackingAnnotation], ":")
		return Claim{Tool: "Argo CD Application " + app, Advice: argoAdvice(app)}, true
	case labels[FluxKustomizeNameLabel] != "":
		ks := qualified(labels[FluxKustomizeNamespaceLabel], labels[FluxKustomizeNameLabel])
		return Claim{Tool: "Flux Kustomization " + ks, Advice: fmt.Sprintf(
			"while it runs it undoes this add-on's changes, and with spec.prune it deletes the adopted objects when it is deleted or they leave its source. Suspend it (flux suspend kustomization %s -n %s) or set its spec.prune: false, then delete it: a suspended Kustomization, or one that does not prune, is deleted with its objects kept",
			labels[FluxKustomizeNameLabel], labels[FluxKustomizeNamespaceLabel])}, true
	case helmRecord != "":
		return Claim{Tool: "Helm release " + qualified(releaseNS, release), Advice: fmt.Sprintf(
			"helm uninstall %s would delete the adopted objects, and an upgrade or a rollback of it would change them. Do not uninstall it: delete the release's record instead, %s", release, helmRecord)}, true
	case labels[InstanceLabel] != "" && writtenByArgo(live):
		app := labels[InstanceLabel]
		return Claim{Tool: "Argo CD Application " + app, Advice: argoAdvice(app)}, true
	}
	return Claim{}, false
}

func argoAdvice(app string) string {
	return fmt.Sprintf("a delete of that Application with its resources finalizer, or its prune, deletes the adopted objects, and its automated sync undoes this add-on's changes. Turn its automated sync off, then delete it without its resources: argocd app delete %s --cascade=false, or remove its metadata.finalizers before kubectl delete", app)
}

// writtenByArgo reports whether Argo CD's application controller wrote a
// field of the object: its client-side apply and its server-side apply
// both write under a manager whose name starts with "argocd".
func writtenByArgo(live metav1.Object) bool {
	for _, f := range live.GetManagedFields() {
		if strings.HasPrefix(f.Manager, "argocd") {
			return true
		}
	}
	return false
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// ClaimNotices returns one notice for each other tool's holder (a Helm
// release, an Argo CD Application, a Flux Kustomization or HelmRelease)
// that still marks an object the plan adopts as its own, in the order of
// the objects: the adoption takes the object over, but leaves the other
// tool's marks, so that tool may still delete it (helm uninstall, a
// cascading delete, a prune) or undo this add-on's changes. live holds
// the live objects by ObjectRef.Key. They block nothing: moving from Helm
// is what adoption is for, and the notice says how to let the other tool
// go without losing what runs.
func ClaimNotices(objs []ObjectResult, live map[string]*unstructured.Unstructured) []capstanv1.Notice {
	type held struct {
		claim Claim
		first capstanv1.ObjectRef
		n     int
	}
	var order []string
	by := map[string]*held{}
	for _, o := range objs {
		l := live[o.Ref.Key()]
		if !o.Adopted || l == nil {
			continue
		}
		c, ok := ClaimOf(l)
		if !ok {
			continue
		}
		if h := by[c.Tool]; h != nil {
			h.n++
			continue
		}
		by[c.Tool] = &held{claim: c, first: o.Ref, n: 1}
		order = append(order, c.Tool)
	}
	out := make([]capstanv1.Notice, 0, len(order))
	for _, tool := range order {
		h := by[tool]
		out = append(out, capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
			"%d adopted object(s) are still marked as its own by %s, first %s: %s", h.n, tool, h.first.Describe(), h.claim.Advice)})
	}
	return out
}
