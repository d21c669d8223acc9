package guard

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// checkMetadata applies the metadata rules: the Addon's namespace, a fixed
// name that is not reserved, no owner references of the chart's own, no
// finalizers, and not the platform's label.
func (ck *checker) checkMetadata(d *decodedObject) {
	m := d.meta
	if !ck.inNamespace(m.Namespace) {
		want := ck.c.Namespace
		if want == "" {
			want = "(unknown)"
		}
		ck.add(d.ref, "metadata.namespace", RuleNamespace,
			fmt.Sprintf("the object is in namespace %q but a restricted Addon creates objects only in its own namespace %q; remove metadata.namespace or set it to {{ .Release.Namespace }}", m.Namespace, want))
	}
	if m.Name == "" {
		ck.add(d.ref, "metadata.name", RuleNameInvalid,
			"the object has no metadata.name (generateName is not supported); render a fixed name so each sync applies the same object")
	}
	if (d.gvk == gvkSecret || d.gvk == gvkConfigMap) && m.Name != "" {
		if ck.c.ReservedNames.reserves(m.Name) {
			ck.add(d.ref, "metadata.name", RuleNameReserved,
				fmt.Sprintf("%s name %q is reserved for the Addon's values (%s); rename the object", d.gvk.Kind, m.Name, describeReserved(ck.c.ReservedNames)))
		} else if ck.isPlatform(d.gvk.Kind, m.Name) {
			ck.add(d.ref, "metadata.name", RuleNameReserved,
				fmt.Sprintf("%s %q is handed over by the platform; reference it from the platform values key instead of rendering it", d.gvk.Kind, m.Name))
		}
	}
	if d.gvk == gvkPVC && m.Name != "" && ck.isPlatform(d.gvk.Kind, m.Name) {
		ck.add(d.ref, "metadata.name", RuleNameReserved,
			fmt.Sprintf("PersistentVolumeClaim %q is handed over by the platform; reference it from the platform values key instead of rendering it", m.Name))
	}
	ck.checkFinalizers(d.ref, "metadata.finalizers", d.gvk, m.Finalizers)
	ck.checkPlatformLabel(d.ref, "metadata.labels", m.Labels)
	for i, or := range m.OwnerReferences {
		if ck.isThisAddon(or) {
			continue
		}
		ck.add(d.ref, fmt.Sprintf("metadata.ownerReferences[%d]", i), RuleOwnerReference,
			fmt.Sprintf("the chart sets an owner reference to %s %q; remove it: Capstan makes the Addon the owner of every object it applies", or.Kind, or.Name))
	}
}

// isThisAddon reports whether an owner reference points at the Addon being
// checked. That is the one owner reference Capstan sets itself, so it may be
// present when Check runs after the controller prepared the objects.
func (ck *checker) isThisAddon(or metav1.OwnerReference) bool {
	group, _, _ := strings.Cut(or.APIVersion, "/")
	return group == capstanv1.GroupVersion.Group && or.Kind == "Addon" && or.Name == ck.c.AddonName && ck.c.AddonName != ""
}

func describeReserved(r ReservedNames) string {
	s := ""
	for _, p := range r.Prefixes {
		if s != "" {
			s += ", "
		}
		s += p + "*"
	}
	for _, n := range r.Names {
		if s != "" {
			s += ", "
		}
		s += n
	}
	return s
}

// checkSecret refuses service-account token Secrets, which the token
// controller would fill with a token of an account of the namespace, and
// the names of other Addons' generated values.
func (ck *checker) checkSecret(ref capstanv1.ObjectRef, s *corev1.Secret) {
	ck.checkGeneratedName(ref, s.Name)
	if s.Type == corev1.SecretTypeServiceAccountToken {
		ck.add(ref, "type", RuleServiceAccountToken,
			"a Secret of type kubernetes.io/service-account-token would receive an API token of a service account; restricted Addons get no API access: remove the Secret")
	}
}

// checkServiceAccount refuses accounts that mount their token into pods, and
// Secrets the account names that the chart does not render.
func (ck *checker) checkServiceAccount(ref capstanv1.ObjectRef, sa *corev1.ServiceAccount) {
	if sa.AutomountServiceAccountToken != nil && *sa.AutomountServiceAccountToken {
		ck.add(ref, "automountServiceAccountToken", RuleServiceAccountToken,
			"automountServiceAccountToken: true gives pods an API token; remove it or set it to false")
	}
	for i, s := range sa.Secrets {
		path := fmt.Sprintf("secrets[%d]", i)
		if s.Namespace != "" && s.Namespace != ck.c.Namespace {
			ck.add(ref, path, RuleReferenceNotRendered,
				fmt.Sprintf("the service account names a Secret in namespace %q; name only Secrets the chart renders", s.Namespace))
			continue
		}
		ck.checkRef(ref, path, "Secret", s.Name)
	}
	for i, s := range sa.ImagePullSecrets {
		ck.checkRef(ref, fmt.Sprintf("imagePullSecrets[%d].name", i), "Secret", s.Name)
	}
}

// checkService allows only ClusterIP Services (headless included), without
// external IPs, node ports, or annotations that expose them beyond the
// cluster.
func (ck *checker) checkService(ref capstanv1.ObjectRef, s *corev1.Service) {
	ck.checkDeniedAnnotations(ref, "metadata.annotations", s.Annotations, deniedServiceAnnotations)
	switch s.Spec.Type {
	case "", corev1.ServiceTypeClusterIP:
	default:
		ck.add(ref, "spec.type", RuleServiceType,
			fmt.Sprintf("a Service of type %s exposes the add-on outside the cluster network; use type ClusterIP (the add-on's UI is reached through the platform's proxy)", s.Spec.Type))
	}
	if len(s.Spec.ExternalIPs) > 0 {
		ck.add(ref, "spec.externalIPs", RuleExternalIPs,
			"externalIPs make nodes accept traffic for addresses the chart chooses; remove spec.externalIPs")
	}
	if s.Spec.ExternalName != "" {
		ck.add(ref, "spec.externalName", RuleServiceType,
			"externalName makes the Service an alias of an outside name; remove spec.externalName")
	}
	for i, p := range s.Spec.Ports {
		if p.NodePort != 0 {
			ck.add(ref, fmt.Sprintf("spec.ports[%d].nodePort", i), RuleServiceType,
				fmt.Sprintf("port %q asks for a node port; remove nodePort and use type ClusterIP", p.Name))
		}
	}
}

// checkClaim refuses claims that bind to a volume that already exists: by
// volumeName, by a selector over existing volumes, by the empty storage
// class, or by a data source the chart does not render. A data source may
// only be another claim of the chart, which the provisioner clones.
func (ck *checker) checkClaim(ref capstanv1.ObjectRef, c *corev1.PersistentVolumeClaim) {
	if c.Spec.VolumeName != "" {
		ck.add(ref, "spec.volumeName", RuleClaimBinding,
			"volumeName binds the claim to an existing volume, with the data of whoever used it; remove it and let the storage class provision a new volume")
	}
	if c.Spec.Selector != nil {
		ck.add(ref, "spec.selector", RuleClaimBinding,
			"a selector binds the claim to existing volumes that match it; remove it and let the storage class provision a new volume")
	}
	// NOTE: the empty class turns dynamic provisioning off: the claim
	// binds to any Available volume that has no class, such as an
	// administrator's hostPath or NFS volume, with whatever it holds.
	const noClass = "the empty storage class turns provisioning off and binds the claim to any existing volume without a class, with the data of whoever used it; name a StorageClass, or leave the field unset for the cluster's default class"
	// NOTE: the annotation that came before spec.storageClassName; the
	// volume controller still reads it, and before the field.
	if class, ok := c.Annotations[corev1.BetaStorageClassAnnotation]; ok && class == "" {
		ck.add(ref, fmt.Sprintf("metadata.annotations[%s]", corev1.BetaStorageClassAnnotation), RuleClaimBinding, "annotation "+corev1.BetaStorageClassAnnotation+": "+noClass)
	}
	if c.Spec.StorageClassName != nil && *c.Spec.StorageClassName == "" {
		ck.add(ref, "spec.storageClassName", RuleClaimBinding, "storageClassName: \"\": "+noClass)
	}
	for _, k := range []string{"volume.kubernetes.io/selected-node", "volume.alpha.kubernetes.io/selected-node"} {
		// NOTE: the scheduler's to set, for a class that waits for the
		// first consumer: a provisioner makes the volume where the node
		// named here is, and every pod of the claim must then run there,
		// a node picked by its name as nodeName would.
		if node, ok := c.Annotations[k]; ok {
			ck.add(ref, fmt.Sprintf("metadata.annotations[%s]", k), RuleNodeName,
				fmt.Sprintf("annotation %s names node %q, where the provisioner makes the volume and every pod of the claim must run; remove it and let the scheduler pick the node", k, node))
		}
	}
	if ds := c.Spec.DataSource; ds != nil {
		ck.checkDataSource(ref, "spec.dataSource", ds.APIGroup, ds.Kind, ds.Name, nil)
	}
	if ds := c.Spec.DataSourceRef; ds != nil {
		ck.checkDataSource(ref, "spec.dataSourceRef", ds.APIGroup, ds.Kind, ds.Name, ds.Namespace)
	}
}

func (ck *checker) checkDataSource(ref capstanv1.ObjectRef, path string, group *string, kind, name string, namespace *string) {
	claim := (group == nil || *group == "") && kind == "PersistentVolumeClaim" &&
		(namespace == nil || *namespace == "" || *namespace == ck.c.Namespace)
	if claim && (ck.rendered[kindName{kind, name}] || ck.unreadRef(ref, path, kind, name)) {
		return
	}
	ck.add(ref, path, RuleClaimDataSource,
		fmt.Sprintf("the claim is filled from %s %q, which the chart does not render; a data source may only be another PersistentVolumeClaim of the chart: remove %s", kind, name, path))
}

// checkRef refuses a reference to an object of kind the chart does not render
// and the platform does not hand over.
func (ck *checker) checkRef(ref capstanv1.ObjectRef, path, kind, name string) {
	if name == "" {
		ck.add(ref, path, RuleReferenceNotRendered,
			fmt.Sprintf("the reference names no %s; name a %s the chart renders", kind, kind))
		return
	}
	if ck.isRendered(kind, name) || ck.unreadRef(ref, path, kind, name) {
		return
	}
	ck.add(ref, path, RuleReferenceNotRendered,
		fmt.Sprintf("%s %q is not rendered by the chart nor handed over by the platform; a restricted Addon may use only its own objects and the platform's: render it, or take its name from the platform values key", kind, name))
}
