// Package guard holds the guardrails of the restricted profile: what an
// untrusted chart may create in its Addon's namespace, and the defaults its
// pods get where they say nothing.
//
// Check refuses every object that breaks a rule of the restricted profile
// ("any image may run; its pods may not do anything") and reports each break as a
// capstanv1.Violation. Harden sets the pod defaults. The controller runs
// Harden, then Check, on every rendered object, hooks included, before any
// preview or apply. docs/guardrails.md lists every rule with an example.
package guard

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// The rules a Violation can name. They are stable: the web page, the CLI and
// chart authors' CI match on them.
const (
	RuleMalformedObject      = "malformed-object"
	RuleUnknownField         = "unknown-field"
	RuleKindNotAllowed       = "kind-not-allowed"
	RuleNamespace            = "namespace-not-allowed"
	RuleNameInvalid          = "name-invalid"
	RuleNameReserved         = "name-reserved"
	RuleDuplicateObject      = "duplicate-object"
	RuleOwnerReference       = "owner-reference"
	RuleFinalizers           = "finalizers"
	RuleAnnotationNotAllowed = "annotation-not-allowed"
	// RulePlatformLabel refuses the label PlatformLabel, on an object or a
	// pod template.
	RulePlatformLabel = "platform-label"

	RuleServiceAccountToken = "service-account-token"
	RuleServiceType         = "service-type"
	RuleExternalIPs         = "external-ips"
	RuleClaimBinding        = "claim-binding"
	RuleClaimDataSource     = "claim-data-source"

	RuleHostPath             = "host-path"
	RuleHostPort             = "host-port"
	RuleHostNamespace        = "host-namespace"
	RuleHostProcess          = "host-process"
	RuleProbeHost            = "probe-host"
	RulePrivileged           = "privileged"
	RuleRunAsRoot            = "run-as-root"
	RulePrivilegeEscalation  = "privilege-escalation"
	RuleCapabilitiesAdded    = "capabilities-added"
	RuleSeccompUnconfined    = "seccomp-unconfined"
	RuleAppArmorUnconfined   = "apparmor-unconfined"
	RuleSELinuxOptions       = "selinux-options"
	RuleProcMount            = "proc-mount"
	RuleSysctls              = "sysctls"
	RuleControlPlane         = "control-plane-placement"
	RuleNodeName             = "node-name"
	RulePodAffinityNamespace = "pod-affinity-namespace"
	RuleVolumeTypeNotAllowed = "volume-type-not-allowed"
	RuleResourceClaims       = "resource-claims"
	RulePriorityClass        = "priority-class"
	RuleSchedulerName        = "scheduler-name"
	RuleJobManagedBy         = "job-managed-by"
	RuleRuntimeClass         = "runtime-class"
	RuleTerminationGrace     = "termination-grace-period"
	// RuleSubdomainNotRendered refuses a pod subdomain that names no
	// Service of the chart's.
	RuleSubdomainNotRendered = "subdomain-not-rendered"

	RuleReferenceNotRendered = "reference-not-rendered"
	RuleNotOwned             = "not-owned"
	// RuleOwnershipUnknown means the live state could not be read. It blocks
	// like every violation, but the next reconcile may clear it: the
	// controller may treat it as transient and retry.
	RuleOwnershipUnknown = "ownership-unknown"
)

// Context is what Check needs to know about the Addon whose render it checks.
type Context struct {
	// Namespace is the Addon's namespace. Every object must be in it; an
	// object with no namespace is applied into it.
	Namespace string
	// AddonName is the Addon's name.
	AddonName string
	// ReservedNames are the Secret and ConfigMap names Capstan keeps for the
	// Addon's values. The zero value means DefaultReservedNames(AddonName).
	ReservedNames ReservedNames
	// Platform names the objects the platform hands over in the platform
	// values key; pods may reference them although the chart does not render
	// them, and the chart may not render objects of these names.
	Platform PlatformRefs
	// Lookup reads the live state for the ownership rule. Nil skips the rule;
	// the controller always sets it.
	Lookup LookupFunc
}

// ReservedNames are the names a chart may not give a Secret or ConfigMap,
// because Capstan keeps the Addon's values objects under them.
type ReservedNames struct {
	// Prefixes reserve every name that starts with one of them.
	Prefixes []string
	// Names reserve exact names.
	Names []string
}

// DefaultReservedNames reserves "<addon>-values-*", where the API puts the
// secret inputs of every write, and "<addon>-generated", where the
// controller keeps the generated values.
func DefaultReservedNames(addon string) ReservedNames {
	return ReservedNames{
		Prefixes: []string{addon + "-values-"},
		Names:    []string{addon + generatedSuffix},
	}
}

func (r ReservedNames) isZero() bool { return len(r.Prefixes) == 0 && len(r.Names) == 0 }

// reserves reports whether name is reserved.
func (r ReservedNames) reserves(name string) bool {
	for _, n := range r.Names {
		if name == n {
			return true
		}
	}
	for _, p := range r.Prefixes {
		if p != "" && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// PlatformRefs are the objects in the Addon's namespace that the platform
// hands over in the platform values key: the image pull secrets, the event
// bus TLS Secret, and the like.
type PlatformRefs struct {
	Secrets                []string
	ConfigMaps             []string
	PersistentVolumeClaims []string
}

// LookupFunc reads one live object: whether it exists, and whether the Addon
// being checked owns it. An error means the answer is unknown.
type LookupFunc func(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (exists, ownedByThisAddon bool, err error)

// The kinds a restricted chart may create, each in its own API version.
var (
	gvkDeployment = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	gvkJob        = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	gvkService    = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	gvkConfigMap  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvkSecret     = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	gvkSA         = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
	gvkPVC        = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}
)

// AllowedKinds lists the kinds a restricted chart may create.
func AllowedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{gvkDeployment, gvkService, gvkConfigMap, gvkSecret, gvkSA, gvkJob, gvkPVC}
}

// IsAllowedKind reports whether a restricted chart may create objects of gvk.
func IsAllowedKind(gvk schema.GroupVersionKind) bool {
	for _, k := range AllowedKinds() {
		if k == gvk {
			return true
		}
	}
	return false
}

// Check returns every guardrail that objs break, in the order of objs. Hooks
// are checked like every other object, so pass them in objs too. It never
// panics on malformed objects: they are violations. Check does not change
// objs; run Harden first so the pod defaults are in place.
func Check(ctx context.Context, objs []*unstructured.Unstructured, c Context) []capstanv1.Violation {
	return check(ctx, objs, c, nil)
}

// CheckWithout returns what objs break once the objects that refused
// names are left out of the render: a reference to one of them no longer
// counts as rendered. The objects that break a rule for that are left out
// too, and so on until none more is. refused are the violations found in
// objs so far, Check's among them: the objects left in broke no rule
// there, so their owners are not read again, and nothing Check found is
// returned again.
//
// A sync needs only Check: it applies nothing while any object breaks a
// rule. A caller that runs some of objs while others break rules needs
// CheckWithout: an uninstall runs its delete hooks alone, and a Secret of
// the platform's that the chart renders too (not-owned) is no Secret of
// the chart's for a hook to read.
//
// A reference to an object left out only because its live state could not
// be read is ownership-unknown, not reference-not-rendered: the next read
// may find it the Addon's.
func CheckWithout(ctx context.Context, objs []*unstructured.Unstructured, refused []capstanv1.Violation, c Context) []capstanv1.Violation {
	c.Lookup = nil
	// unread holds the objects left out: true for one whose every
	// violation is ownership-unknown.
	unread := map[kindName]bool{}
	leave := func(vs []capstanv1.Violation) {
		for _, v := range vs {
			key := kindName{v.Object.Kind, v.Object.Name}
			was, ok := unread[key]
			unread[key] = v.Rule == RuleOwnershipUnknown && (!ok || was)
		}
	}
	leave(refused)
	var out []capstanv1.Violation
	for {
		kept := make([]*unstructured.Unstructured, 0, len(objs))
		for _, u := range objs {
			if u == nil || u.Object == nil {
				continue
			}
			if _, left := unread[kindName{u.GetKind(), u.GetName()}]; !left {
				kept = append(kept, u)
			}
		}
		if len(kept) == len(objs) {
			return out
		}
		vs := check(ctx, kept, c, unread)
		if len(vs) == 0 {
			return out
		}
		out = append(out, vs...)
		leave(vs)
		objs = kept
	}
}

// check is Check. unread names the objects CheckWithout left out (true:
// only as their live state could not be read).
func check(ctx context.Context, objs []*unstructured.Unstructured, c Context, unread map[kindName]bool) []capstanv1.Violation {
	if c.ReservedNames.isZero() {
		c.ReservedNames = DefaultReservedNames(c.AddonName)
	}
	ck := &checker{c: c, rendered: map[kindName]bool{}, unread: unread}
	decoded := make([]*decodedObject, len(objs))
	seen := map[kindName]int{}

	// First pass: decode every object and learn what the chart renders, so
	// references can be checked against the whole render.
	for i, u := range objs {
		d := ck.decode(i, u)
		decoded[i] = d
		if d == nil || d.ref.Name == "" || !IsAllowedKind(d.gvk) || !ck.inNamespace(d.ref.Namespace) {
			continue
		}
		key := kindName{d.gvk.Kind, d.ref.Name}
		if first, dup := seen[key]; dup {
			ck.add(d.ref, "metadata.name", RuleDuplicateObject,
				fmt.Sprintf("the render holds two %s objects named %q (objects %d and %d); give each object its own name", d.gvk.Kind, d.ref.Name, first+1, i+1))
			continue
		}
		seen[key] = i
		ck.rendered[key] = true
	}

	// Second pass: the rules, on every object that decoded.
	for _, d := range decoded {
		if d == nil || d.obj == nil {
			continue
		}
		ck.checkMetadata(d)
		switch o := d.obj.(type) {
		case *appsv1.Deployment:
			ck.checkPodTemplate(d.ref, "spec.template", &o.Spec.Template)
		case *batchv1.Job:
			ck.checkPodTemplate(d.ref, "spec.template", &o.Spec.Template)
			ck.checkJob(d.ref, o)
		case *corev1.Service:
			ck.checkService(d.ref, o)
		case *corev1.Secret:
			ck.checkSecret(d.ref, o)
		case *corev1.ServiceAccount:
			ck.checkServiceAccount(d.ref, o)
		case *corev1.PersistentVolumeClaim:
			ck.checkClaim(d.ref, o)
		}
	}

	ck.checkOwnership(ctx, decoded)
	return ck.out
}

// kindName identifies an object within the Addon's namespace.
type kindName struct{ kind, name string }

// checker collects the violations of one Check.
type checker struct {
	c        Context
	rendered map[kindName]bool
	// unread are the objects CheckWithout left out; a reference to one
	// that is true there is ownership-unknown.
	unread map[kindName]bool
	out    []capstanv1.Violation
}

func (ck *checker) add(ref capstanv1.ObjectRef, path, rule, msg string) {
	ck.out = append(ck.out, capstanv1.Violation{Object: ref, Path: path, Rule: rule, Message: msg})
}

// inNamespace reports whether an object with namespace ns lands in the
// Addon's namespace. No namespace means the Addon's.
func (ck *checker) inNamespace(ns string) bool {
	return ns == "" || ns == ck.c.Namespace
}

// isRendered reports whether the chart renders an object of kind and name,
// or the platform hands it over.
func (ck *checker) isRendered(kind, name string) bool {
	return ck.rendered[kindName{kind, name}] || ck.isPlatform(kind, name)
}

// unreadRef reports whether kind and name were left out of the render only
// because their live state could not be read, and if so refuses the
// reference at path as ownership-unknown.
func (ck *checker) unreadRef(ref capstanv1.ObjectRef, path, kind, name string) bool {
	if !ck.unread[kindName{kind, name}] {
		return false
	}
	ck.add(ref, path, RuleOwnershipUnknown,
		fmt.Sprintf("%s %q could not be read to tell whether this Addon owns it, so the reference to it cannot be judged; the next check retries", kind, name))
	return true
}

// isPlatform reports whether the platform hands over an object of kind and name.
func (ck *checker) isPlatform(kind, name string) bool {
	var platform []string
	switch kind {
	case "Secret":
		platform = ck.c.Platform.Secrets
	case "ConfigMap":
		platform = ck.c.Platform.ConfigMaps
	case "PersistentVolumeClaim":
		platform = ck.c.Platform.PersistentVolumeClaims
	}
	for _, p := range platform {
		if p == name {
			return true
		}
	}
	return false
}

// sortedKeys returns m's keys in order, so violations come out the same way
// every time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
