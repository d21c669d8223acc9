package guard

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// controlPlaneLabels are the node labels that mark the control plane.
// node-role.kubernetes.io/etcd is the label k3s and RKE2 give the servers
// that run embedded etcd, which hold the cluster's state; an etcd-only
// server carries it without the control-plane label.
var controlPlaneLabels = map[string]bool{
	"node-role.kubernetes.io/control-plane": true,
	"node-role.kubernetes.io/master":        true,
	"node-role.kubernetes.io/etcd":          true,
	// RKE1's, with no hyphen.
	"node-role.kubernetes.io/controlplane": true,
}

// nodeLabels are the node labels whose value names one node: the
// hostname the kubelet labels every node with (kubernetes.io/hostname),
// and the hostname and addresses k3s's cloud provider reads a node's
// addresses from (k3s.io/hostname, k3s.io/internal-ip,
// k3s.io/external-ip), which k3s set as labels before it moved them to
// annotations, and still reads from labels. A selector on any of them
// picks a node by its name or address, a control-plane node's as readily
// as any other, as nodeName does.
var nodeLabels = map[string]bool{
	corev1.LabelHostname: true,
	"k3s.io/hostname":    true,
	"k3s.io/internal-ip": true,
	"k3s.io/external-ip": true,
}

// controlPlaneTaints are the taints that keep tenants' pods off the control
// plane and the nodes kept for the cluster's own add-ons, each with the
// nodes a toleration of it lets a pod onto. node-role.kubernetes.io/etcd is
// the taint etcd-only nodes carry (RKE2's and Rancher's), which hold the
// cluster's state. CriticalAddonsOnly is the taint k3s documents for
// keeping its servers, and AKS for keeping its system node pools, to the
// cluster's own add-ons.
var controlPlaneTaints = map[string]string{
	"node-role.kubernetes.io/control-plane": "the control plane",
	"node-role.kubernetes.io/master":        "the control plane",
	"node-role.kubernetes.io/etcd":          "the etcd nodes, which hold the cluster's state",
	"node-role.kubernetes.io/controlplane":  "the control plane (RKE1)",
	"CriticalAddonsOnly":                    "the nodes kept for the cluster's own add-ons (k3s servers, AKS system node pools)",
}

// allowedVolumeSources are the volume types a restricted pod may mount, by
// their JSON names.
var allowedVolumeSources = map[string]bool{
	"configMap": true, "secret": true, "emptyDir": true,
	"projected": true, "downwardAPI": true, "persistentVolumeClaim": true,
}

// allowedProjections are the sources a projected volume may combine.
var allowedProjections = map[string]bool{"configMap": true, "secret": true, "downwardAPI": true}

// allowedSELinuxTypes are the SELinux types that keep a container confined,
// as in the baseline Pod Security Standard.
var allowedSELinuxTypes = map[string]bool{
	"": true, "container_t": true, "container_init_t": true, "container_kvm_t": true, "container_engine_t": true,
}

// maxTerminationGraceSeconds is the longest terminationGracePeriodSeconds
// a restricted pod may ask for. A node drain, a rollout and a namespace's
// deletion wait that long for the pod, and a preStop hook may sleep through
// all of it; five minutes lets a database flush and close its connections,
// and keeps a tenant from holding the platform's node maintenance for hours.
const maxTerminationGraceSeconds = 300

// Legacy annotations that set security profiles before the fields existed.
const (
	seccompPodAnnotation       = "seccomp.security.alpha.kubernetes.io/pod"
	seccompContainerAnnotation = "container.seccomp.security.alpha.kubernetes.io/"
	appArmorAnnotation         = "container.apparmor.security.beta.kubernetes.io/"
)

// checkPodTemplate applies the pod rules to a pod template at path base.
func (ck *checker) checkPodTemplate(ref capstanv1.ObjectRef, base string, t *corev1.PodTemplateSpec) {
	for i, or := range t.OwnerReferences {
		ck.add(ref, fmt.Sprintf("%s.metadata.ownerReferences[%d]", base, i), RuleOwnerReference,
			fmt.Sprintf("the pod template sets an owner reference to %s %q; remove it", or.Kind, or.Name))
	}
	// The controllers copy a pod template's finalizers onto every pod.
	ck.checkFinalizers(ref, base+".metadata.finalizers", schema.GroupVersionKind{}, t.Finalizers)
	ck.checkPlatformLabel(ref, base+".metadata.labels", t.Labels)
	ck.checkSubdomain(ref, base, t)
	ck.checkLegacyAnnotations(ref, base+".metadata.annotations", t.Annotations)
	ck.checkDeniedAnnotations(ref, base+".metadata.annotations", t.Annotations, deniedPodAnnotations)
	ck.checkPodSpec(ref, base+".spec", &t.Spec)
}

// checkLegacyAnnotations refuses the seccomp and AppArmor annotations unless
// they name the runtime's default or a profile on the node.
func (ck *checker) checkLegacyAnnotations(ref capstanv1.ObjectRef, path string, ann map[string]string) {
	for _, k := range sortedKeys(ann) {
		v := strings.ToLower(strings.TrimSpace(ann[k]))
		p := fmt.Sprintf("%s[%s]", path, k)
		switch {
		case k == seccompPodAnnotation || strings.HasPrefix(k, seccompContainerAnnotation):
			if v != "runtime/default" && v != "docker/default" && !strings.HasPrefix(v, "localhost/") {
				ck.add(ref, p, RuleSeccompUnconfined,
					fmt.Sprintf("annotation %s: %q leaves the container without the runtime's seccomp filter; remove the annotation (Capstan sets seccompProfile RuntimeDefault)", k, ann[k]))
			}
		case strings.HasPrefix(k, appArmorAnnotation):
			if v != "runtime/default" && !strings.HasPrefix(v, "localhost/") {
				ck.add(ref, p, RuleAppArmorUnconfined,
					fmt.Sprintf("annotation %s: %q runs the container without the runtime's AppArmor profile; remove the annotation", k, ann[k]))
			}
		}
	}
}

// checkPodSpec applies the pod rules to one pod spec at path spec.
func (ck *checker) checkPodSpec(ref capstanv1.ObjectRef, spec string, ps *corev1.PodSpec) {
	for _, h := range []struct {
		on   bool
		name string
	}{{ps.HostNetwork, "hostNetwork"}, {ps.HostPID, "hostPID"}, {ps.HostIPC, "hostIPC"}} {
		if h.on {
			ck.add(ref, spec+"."+h.name, RuleHostNamespace,
				fmt.Sprintf("%s: true shares the node's namespace with the pod; remove it", h.name))
		}
	}
	if ps.AutomountServiceAccountToken != nil && *ps.AutomountServiceAccountToken {
		ck.add(ref, spec+".automountServiceAccountToken", RuleServiceAccountToken,
			"automountServiceAccountToken: true mounts an API token into the pod; remove it (Capstan sets it to false)")
	}
	if ps.NodeName != "" {
		ck.add(ref, spec+".nodeName", RuleNodeName,
			"nodeName places the pod on a node of the chart's choice past the scheduler and its taints, the control plane's included; remove it")
	}
	ck.checkScheduling(ref, spec, ps)
	if psc := ps.SecurityContext; psc != nil {
		ck.checkIdentity(ref, spec+".securityContext", "the pod", psc.RunAsUser, psc.RunAsNonRoot)
		ck.checkProfiles(ref, spec+".securityContext", psc.SeccompProfile, psc.AppArmorProfile, psc.SELinuxOptions, psc.WindowsOptions)
		if len(psc.Sysctls) > 0 {
			ck.add(ref, spec+".securityContext.sysctls", RuleSysctls,
				"sysctls change kernel settings for the pod; remove spec.securityContext.sysctls")
		}
	}
	if len(ps.Containers) == 0 {
		ck.add(ref, spec+".containers", RuleMalformedObject,
			"the pod template has no containers, or they are not where a pod spec keeps them; render spec.template.spec.containers")
	}
	ck.checkPlacement(ref, spec, ps)
	for i := range ps.Volumes {
		ck.checkVolume(ref, fmt.Sprintf("%s.volumes[%d]", spec, i), &ps.Volumes[i])
	}
	if len(ps.ResourceClaims) > 0 {
		ck.add(ref, spec+".resourceClaims", RuleResourceClaims,
			"resourceClaims give the pod devices through claims the chart cannot render; remove them")
	}
	for _, f := range []struct{ path, name string }{
		{spec + ".serviceAccountName", ps.ServiceAccountName},
		{spec + ".serviceAccount", ps.DeprecatedServiceAccount},
	} {
		// NOTE: the namespace's "default" account is allowed: it exists in
		// every namespace, the pod mounts no token, and a chart that renders a
		// ServiceAccount named default is refused by the ownership rule.
		if f.name != "" && f.name != "default" && !ck.rendered[kindName{"ServiceAccount", f.name}] && !ck.unreadRef(ref, f.path, "ServiceAccount", f.name) {
			ck.add(ref, f.path, RuleReferenceNotRendered,
				fmt.Sprintf("ServiceAccount %q is not rendered by the chart; render it, or leave the field empty to use the namespace's default account", f.name))
		}
	}
	for i, s := range ps.ImagePullSecrets {
		ck.checkRef(ref, fmt.Sprintf("%s.imagePullSecrets[%d].name", spec, i), "Secret", s.Name)
	}
	for _, c := range containersOf(spec, ps) {
		ck.checkContainer(ref, c)
	}
}

// checkScheduling refuses the pod fields that reach past the tenant's own
// pods: a priority class that preempts the platform's pods, a scheduler
// or a runtime other than the cluster's default, and a grace period that
// holds node drains.
func (ck *checker) checkScheduling(ref capstanv1.ObjectRef, spec string, ps *corev1.PodSpec) {
	// NOTE: there is no list of allowed priority classes yet; the system-
	// prefix is the one Kubernetes reserves for its own critical classes,
	// which preempt every other pod. A platform that creates other high
	// classes must keep tenants from them with a ResourceQuota's
	// scopeSelector on PriorityClass.
	if strings.HasPrefix(ps.PriorityClassName, "system-") {
		ck.add(ref, spec+".priorityClassName", RulePriorityClass,
			fmt.Sprintf("priorityClassName %q is kept for the cluster's own critical pods, and would preempt other tenants' and the platform's pods; remove it or name a class of the platform's", ps.PriorityClassName))
	}
	if ps.SchedulerName != "" && ps.SchedulerName != corev1.DefaultSchedulerName {
		ck.add(ref, spec+".schedulerName", RuleSchedulerName,
			fmt.Sprintf("schedulerName %q hands the pod to a scheduler other than the cluster's, which may place it past the taints and rules the default scheduler keeps; remove it", ps.SchedulerName))
	}
	if ps.RuntimeClassName != nil {
		ck.add(ref, spec+".runtimeClassName", RuleRuntimeClass,
			fmt.Sprintf("runtimeClassName %q picks the container runtime, and could leave the sandbox the platform runs tenants in; remove it", *ps.RuntimeClassName))
	}
	if g := ps.TerminationGracePeriodSeconds; g != nil && *g > maxTerminationGraceSeconds {
		ck.add(ref, spec+".terminationGracePeriodSeconds", RuleTerminationGrace,
			fmt.Sprintf("terminationGracePeriodSeconds %d holds node drains and rollouts that long; use at most %d", *g, maxTerminationGraceSeconds))
	}
}

// checkIdentity refuses running as root: user 0, or runAsNonRoot: false.
func (ck *checker) checkIdentity(ref capstanv1.ObjectRef, path, who string, user *int64, nonRoot *bool) {
	if user != nil && *user == 0 {
		ck.add(ref, path+".runAsUser", RuleRunAsRoot,
			fmt.Sprintf("runAsUser: 0 runs %s as root; use a non-zero user, such as 1000", who))
	}
	if nonRoot != nil && !*nonRoot {
		ck.add(ref, path+".runAsNonRoot", RuleRunAsRoot,
			fmt.Sprintf("runAsNonRoot: false lets %s run as root; remove it (Capstan sets runAsNonRoot: true)", who))
	}
}

// checkProfiles refuses unconfined seccomp, AppArmor and SELinux settings, and
// Windows host processes.
func (ck *checker) checkProfiles(ref capstanv1.ObjectRef, path string, sp *corev1.SeccompProfile, ap *corev1.AppArmorProfile, se *corev1.SELinuxOptions, win *corev1.WindowsSecurityContextOptions) {
	if sp != nil && sp.Type != corev1.SeccompProfileTypeRuntimeDefault && sp.Type != corev1.SeccompProfileTypeLocalhost {
		ck.add(ref, path+".seccompProfile.type", RuleSeccompUnconfined,
			fmt.Sprintf("seccompProfile type %q leaves the container without a seccomp filter; use RuntimeDefault or remove it", sp.Type))
	}
	if ap != nil && ap.Type != corev1.AppArmorProfileTypeRuntimeDefault && ap.Type != corev1.AppArmorProfileTypeLocalhost {
		ck.add(ref, path+".appArmorProfile.type", RuleAppArmorUnconfined,
			fmt.Sprintf("appArmorProfile type %q runs the container without AppArmor; use RuntimeDefault or remove it", ap.Type))
	}
	if se != nil && (!allowedSELinuxTypes[se.Type] || se.User != "" || se.Role != "") {
		ck.add(ref, path+".seLinuxOptions", RuleSELinuxOptions,
			"seLinuxOptions may set only level, and type to container_t, container_init_t, container_kvm_t or container_engine_t; other types and any user or role can lift the container's confinement")
	}
	if win != nil && win.HostProcess != nil && *win.HostProcess {
		ck.add(ref, path+".windowsOptions.hostProcess", RuleHostProcess,
			"hostProcess: true runs the container as a process on the Windows node; remove it")
	}
}

// checkPlacement refuses placing pods on the control plane: by nodeSelector,
// by node affinity, or by tolerating its taints; picking a node by its
// name, which picks a control-plane node as readily as any other; and pod
// affinity to pods of other namespaces, which picks the nodes those pods
// run on.
func (ck *checker) checkPlacement(ref capstanv1.ObjectRef, spec string, ps *corev1.PodSpec) {
	for _, k := range sortedKeys(ps.NodeSelector) {
		path := fmt.Sprintf("%s.nodeSelector[%s]", spec, k)
		switch {
		case controlPlaneLabels[k]:
			ck.add(ref, path, RuleControlPlane,
				fmt.Sprintf("nodeSelector %s places the pod on the control plane; remove it", k))
		case nodeLabels[k]:
			ck.add(ref, path, RuleNodeName,
				fmt.Sprintf("nodeSelector %s picks a node by its name or address, the control plane's included; remove it", k))
		}
	}
	if a := ps.Affinity; a != nil && a.NodeAffinity != nil {
		na := a.NodeAffinity
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			for i, t := range r.NodeSelectorTerms {
				ck.checkNodeTerm(ref, fmt.Sprintf("%s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d]", spec, i), t)
			}
		}
		for i, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			ck.checkNodeTerm(ref, fmt.Sprintf("%s.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d].preference", spec, i), p.Preference)
		}
	}
	if a := ps.Affinity; a != nil && a.PodAffinity != nil {
		pa := a.PodAffinity
		for i, t := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			ck.checkPodAffinityTerm(ref, fmt.Sprintf("%s.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[%d]", spec, i), t, false)
		}
		for i, w := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			ck.checkPodAffinityTerm(ref, fmt.Sprintf("%s.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm", spec, i), w.PodAffinityTerm, false)
		}
	}
	if a := ps.Affinity; a != nil && a.PodAntiAffinity != nil {
		// NOTE: only the required terms: the scheduler holds every pod a
		// running pod's required anti-affinity matches off the nodes of
		// its topology, so such a term reaching other namespaces keeps
		// their pods off nodes (a topologyKey of kubernetes.io/os, all of
		// them); a preferred term only weighs in.
		for i, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			ck.checkPodAffinityTerm(ref, fmt.Sprintf("%s.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[%d]", spec, i), t, true)
		}
	}
	for i, t := range ps.Tolerations {
		path := fmt.Sprintf("%s.tolerations[%d]", spec, i)
		where, tainted := controlPlaneTaints[t.Key]
		switch {
		case tainted:
			ck.add(ref, path, RuleControlPlane,
				fmt.Sprintf("a toleration of %s lets the pod onto %s; remove it", t.Key, where))
		case t.Key == "" && t.Operator == corev1.TolerationOpExists:
			ck.add(ref, path, RuleControlPlane,
				"a toleration with no key and operator Exists tolerates every taint, the control plane's included; name the taint it is for")
		}
	}
}

// checkPodAffinityTerm refuses a pod affinity term that matches pods
// outside the Addon's namespace: one that names another namespace, or that
// sets a namespaceSelector ({} selects every namespace, and any other
// selector may match namespaces the tenant does not own). Such a term
// places the pod on the nodes where other namespaces' pods run: beside
// kube-system's on a control-plane server that has no taint, or beside
// another tenant's.
// A term with neither matches pods of the pod's own namespace, and is
// allowed. A required pod anti-affinity term (anti) is refused alike: the
// scheduler keeps every pod it matches off the nodes where the pod runs,
// so one reaching other namespaces keeps their pods, the platform's
// included, off those nodes.
func (ck *checker) checkPodAffinityTerm(ref capstanv1.ObjectRef, path string, t corev1.PodAffinityTerm, anti bool) {
	what, does := "pod affinity", "places the pod on the nodes where another namespace's pods run, the control plane's included"
	if anti {
		what, does = "required pod anti-affinity", "keeps another namespace's pods off the nodes where this pod runs (the scheduler holds to a running pod's required anti-affinity for every pod it matches)"
	}
	for j, ns := range t.Namespaces {
		if ns == ck.c.Namespace && ns != "" {
			continue
		}
		ck.add(ref, fmt.Sprintf("%s.namespaces[%d]", path, j), RulePodAffinityNamespace,
			fmt.Sprintf("%s to pods of namespace %q %s; remove the namespace (a term with no namespaces matches pods of the Addon's own namespace)", what, ns, does))
	}
	if t.NamespaceSelector != nil {
		ck.add(ref, path+".namespaceSelector", RulePodAffinityNamespace,
			fmt.Sprintf("%s with a namespaceSelector matches pods of other namespaces ({} matches every namespace) and %s; remove namespaceSelector (a term without it matches pods of the Addon's own namespace)", what, does))
	}
}

// checkNodeTerm refuses a node selector term that selects control-plane
// nodes, or nodes by name (a label that names one node, nodeLabels, or
// matchFields on metadata.name, which pick a control-plane node as
// nodeName does). NotIn and DoesNotExist on the control-plane labels keep
// pods off those nodes, and are allowed. NotIn node names is refused as In
// is: a tenant reads its nodes' names from its own pods, and NotIn every
// other node's name picks the one left, an untainted server's. Exists and
// DoesNotExist on a label that names one node are allowed: every node
// that carries it (or none) matches, so they name no node.
func (ck *checker) checkNodeTerm(ref capstanv1.ObjectRef, path string, t corev1.NodeSelectorTerm) {
	for j, e := range t.MatchExpressions {
		switch {
		case controlPlaneLabels[e.Key] && e.Operator != corev1.NodeSelectorOpNotIn && e.Operator != corev1.NodeSelectorOpDoesNotExist:
			ck.add(ref, fmt.Sprintf("%s.matchExpressions[%d]", path, j), RuleControlPlane,
				fmt.Sprintf("node affinity %s %s places the pod on the control plane; remove it (NotIn and DoesNotExist are allowed)", e.Key, e.Operator))
		case nodeLabels[e.Key] && e.Operator != corev1.NodeSelectorOpExists && e.Operator != corev1.NodeSelectorOpDoesNotExist:
			ck.add(ref, fmt.Sprintf("%s.matchExpressions[%d]", path, j), RuleNodeName,
				fmt.Sprintf("node affinity %s %s picks nodes by name or address, the control plane's included (NotIn the other nodes' names picks the ones left); remove it (Exists and DoesNotExist are allowed; to keep pods off the control plane, use NotIn or DoesNotExist on node-role.kubernetes.io/control-plane)", e.Key, e.Operator))
		}
	}
	for j, f := range t.MatchFields {
		// NOTE: metadata.name is the one field the API server accepts
		// here today, with In and NotIn; any other is refused too, rather
		// than let a field a later release adds select nodes unchecked.
		ck.add(ref, fmt.Sprintf("%s.matchFields[%d]", path, j), RuleNodeName,
			fmt.Sprintf("node affinity on the field %s %s picks nodes by name, the control plane's included (NotIn the other nodes' names picks the ones left); remove it", f.Key, f.Operator))
	}
}

// checkVolume allows only the listed volume types, refuses service-account
// token projections, and checks what the volume references.
func (ck *checker) checkVolume(ref capstanv1.ObjectRef, path string, v *corev1.Volume) {
	for _, src := range setPointerFields(&v.VolumeSource) {
		switch {
		case src == "hostPath":
			ck.add(ref, path+".hostPath", RuleHostPath,
				fmt.Sprintf("volume %q mounts a path of the node; use an emptyDir, a configMap or a persistentVolumeClaim instead", v.Name))
		case !allowedVolumeSources[src]:
			ck.add(ref, path+"."+src, RuleVolumeTypeNotAllowed,
				fmt.Sprintf("volume %q is of type %s; a restricted pod may mount only configMap, secret, emptyDir, projected, downwardAPI and persistentVolumeClaim volumes (ephemeral inline volumes included)", v.Name, src))
		}
	}
	if s := v.Secret; s != nil {
		ck.checkRef(ref, path+".secret.secretName", "Secret", s.SecretName)
	}
	if c := v.ConfigMap; c != nil {
		ck.checkRef(ref, path+".configMap.name", "ConfigMap", c.Name)
	}
	if c := v.PersistentVolumeClaim; c != nil {
		ck.checkRef(ref, path+".persistentVolumeClaim.claimName", "PersistentVolumeClaim", c.ClaimName)
	}
	if p := v.Projected; p != nil {
		for i := range p.Sources {
			sp := fmt.Sprintf("%s.projected.sources[%d]", path, i)
			s := &p.Sources[i]
			for _, src := range setPointerFields(s) {
				switch {
				case src == "serviceAccountToken":
					ck.add(ref, sp+".serviceAccountToken", RuleServiceAccountToken,
						fmt.Sprintf("volume %q projects a service-account token into the pod; restricted Addons get no API access: remove the source", v.Name))
				case !allowedProjections[src]:
					ck.add(ref, sp+"."+src, RuleVolumeTypeNotAllowed,
						fmt.Sprintf("volume %q projects a %s source; a projected volume may combine only configMap, secret and downwardAPI sources", v.Name, src))
				}
			}
			if s.Secret != nil {
				ck.checkRef(ref, sp+".secret.name", "Secret", s.Secret.Name)
			}
			if s.ConfigMap != nil {
				ck.checkRef(ref, sp+".configMap.name", "ConfigMap", s.ConfigMap.Name)
			}
		}
	}
}

// setPointerFields returns the JSON names of the pointer fields that are set
// in the struct p points to. A volume source is one such field, so a type
// k8s.io/api adds later is refused until it is listed as allowed.
func setPointerFields(p any) []string {
	v := reflect.ValueOf(p).Elem()
	t := v.Type()
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// containerView is what the rules read of a container, init container or
// ephemeral container.
type containerView struct {
	path    string
	name    string
	sc      *corev1.SecurityContext
	ports   []corev1.ContainerPort
	env     []corev1.EnvVar
	envFrom []corev1.EnvFromSource
	actions []kubeletAction
}

// kubeletAction is a probe or lifecycle handler of a container that the
// kubelet runs over the network: an httpGet or a tcpSocket.
type kubeletAction struct {
	path      string
	name      string
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
}

func containersOf(spec string, ps *corev1.PodSpec) []containerView {
	var out []containerView
	for i, c := range ps.InitContainers {
		path := fmt.Sprintf("%s.initContainers[%d]", spec, i)
		out = append(out, containerView{path: path, name: c.Name, sc: c.SecurityContext, ports: c.Ports, env: c.Env, envFrom: c.EnvFrom,
			actions: kubeletActions(path, c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle)})
	}
	for i, c := range ps.Containers {
		path := fmt.Sprintf("%s.containers[%d]", spec, i)
		out = append(out, containerView{path: path, name: c.Name, sc: c.SecurityContext, ports: c.Ports, env: c.Env, envFrom: c.EnvFrom,
			actions: kubeletActions(path, c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle)})
	}
	for i, c := range ps.EphemeralContainers {
		path := fmt.Sprintf("%s.ephemeralContainers[%d]", spec, i)
		out = append(out, containerView{path: path, name: c.Name, sc: c.SecurityContext, ports: c.Ports, env: c.Env, envFrom: c.EnvFrom,
			actions: kubeletActions(path, c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle)})
	}
	return out
}

// kubeletActions lists a container's probes and lifecycle handlers, at
// their paths under the container's path.
func kubeletActions(path string, liveness, readiness, startup *corev1.Probe, lc *corev1.Lifecycle) []kubeletAction {
	var out []kubeletAction
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", liveness}, {"readinessProbe", readiness}, {"startupProbe", startup}} {
		if p.probe != nil {
			out = append(out, kubeletAction{path + "." + p.name, p.name, p.probe.HTTPGet, p.probe.TCPSocket})
		}
	}
	if lc == nil {
		return out
	}
	for _, h := range []struct {
		name    string
		handler *corev1.LifecycleHandler
	}{{"lifecycle.postStart", lc.PostStart}, {"lifecycle.preStop", lc.PreStop}} {
		if h.handler != nil {
			out = append(out, kubeletAction{path + "." + h.name, h.name, h.handler.HTTPGet, h.handler.TCPSocket})
		}
	}
	return out
}

// checkKubeletAction refuses a probe or lifecycle handler that names the
// host the kubelet connects to. The kubelet connects from the node's
// network, so a host lets the chart reach what the node reaches and the
// pod does not: the node's own loopback, the cloud's metadata address
// (169.254.169.254), services bound to the node. With no host the kubelet
// connects to the pod's own IP, as the baseline Pod Security Standard
// requires since Kubernetes 1.34.
//
// NOTE: a Host header is allowed: it does not move where the kubelet
// connects, and charts probe a virtual host with it.
func (ck *checker) checkKubeletAction(ref capstanv1.ObjectRef, who string, a kubeletAction) {
	const fix = "remove host: the kubelet then connects to the pod's own IP"
	if g := a.httpGet; g != nil {
		if g.Host != "" {
			ck.add(ref, a.path+".httpGet.host", RuleProbeHost,
				fmt.Sprintf("%s's %s sets httpGet.host, so the kubelet sends the request from the node's network to a host the chart names (the node itself, the cloud's metadata address); %s", who, a.name, fix))
		}
	}
	if t := a.tcpSocket; t != nil && t.Host != "" {
		ck.add(ref, a.path+".tcpSocket.host", RuleProbeHost,
			fmt.Sprintf("%s's %s sets tcpSocket.host, so the kubelet connects from the node's network to a host the chart names (the node itself, the cloud's metadata address); %s", who, a.name, fix))
	}
}

// checkContainer applies the container rules.
func (ck *checker) checkContainer(ref capstanv1.ObjectRef, c containerView) {
	who := fmt.Sprintf("container %q", c.name)
	for _, a := range c.actions {
		ck.checkKubeletAction(ref, who, a)
	}
	for i, p := range c.ports {
		if p.HostPort != 0 {
			ck.add(ref, fmt.Sprintf("%s.ports[%d].hostPort", c.path, i), RuleHostPort,
				fmt.Sprintf("%s opens port %d on the node; remove hostPort and reach the pod through a ClusterIP Service", who, p.HostPort))
		}
	}
	if sc := c.sc; sc != nil {
		path := c.path + ".securityContext"
		if sc.Privileged != nil && *sc.Privileged {
			ck.add(ref, path+".privileged", RulePrivileged,
				fmt.Sprintf("%s is privileged, with full access to the node; remove privileged: true", who))
		}
		ck.checkIdentity(ref, path, who, sc.RunAsUser, sc.RunAsNonRoot)
		if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
			ck.add(ref, path+".allowPrivilegeEscalation", RulePrivilegeEscalation,
				fmt.Sprintf("%s allows privilege escalation; remove allowPrivilegeEscalation: true (Capstan sets it to false)", who))
		}
		if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			caps := make([]string, len(sc.Capabilities.Add))
			for i, cp := range sc.Capabilities.Add {
				caps[i] = string(cp)
			}
			sort.Strings(caps)
			ck.add(ref, path+".capabilities.add", RuleCapabilitiesAdded,
				fmt.Sprintf("%s adds capabilities %s; remove capabilities.add (Capstan drops ALL)", who, strings.Join(caps, ", ")))
		}
		ck.checkProfiles(ref, path, sc.SeccompProfile, sc.AppArmorProfile, sc.SELinuxOptions, sc.WindowsOptions)
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			ck.add(ref, path+".procMount", RuleProcMount,
				fmt.Sprintf("%s asks for an unmasked /proc; remove procMount", who))
		}
	}
	for i, e := range c.env {
		if e.ValueFrom == nil {
			continue
		}
		p := fmt.Sprintf("%s.env[%d].valueFrom", c.path, i)
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			ck.checkRef(ref, p+".secretKeyRef.name", "Secret", r.Name)
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			ck.checkRef(ref, p+".configMapKeyRef.name", "ConfigMap", r.Name)
		}
	}
	for i, e := range c.envFrom {
		p := fmt.Sprintf("%s.envFrom[%d]", c.path, i)
		if r := e.SecretRef; r != nil {
			ck.checkRef(ref, p+".secretRef.name", "Secret", r.Name)
		}
		if r := e.ConfigMapRef; r != nil {
			ck.checkRef(ref, p+".configMapRef.name", "ConfigMap", r.Name)
		}
	}
}
