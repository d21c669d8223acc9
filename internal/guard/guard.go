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
	RuleMalformedObject = "malformed-object"
	RuleUnknownField    = "unknown-field"
	RuleKindNotAllowed  = "kind-not-allowed"
	RuleNamespace       = "namespace-not-allowed"
	RuleNameInvalid     = "name-invalid"
	RuleNameReserved    = "name-reserved"
	RuleDuplicateObject = "duplicate-object"
	RuleOwnerReference  = "owner-reference"

	RuleServiceAccountToken = "service-account-token"
	RuleServiceType         = "service-type"
	RuleExternalIPs         = "external-ips"
	RuleClaimBinding        = "claim-binding"
	RuleClaimDataSource     = "claim-data-source"

	RuleHostPath             = "host-path"
	RuleHostPort             = "host-port"
	RuleHostNamespace        = "host-namespace"
	RuleHostProcess          = "host-process"
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
	RuleVolumeTypeNotAllowed = "volume-type-not-allowed"
	RuleResourceClaims       = "resource-claims"
	RulePriorityClass        = "priority-class"
	RuleSchedulerName        = "scheduler-name"
	RuleRuntimeClass         = "runtime-class"
	RuleTerminationGrace     = "termination-grace-period"

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
		Names:    []string{addon + "-generated"},
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
	if c.ReservedNames.isZero() {
		c.ReservedNames = DefaultReservedNames(c.AddonName)
	}
	ck := &checker{c: c, rendered: map[kindName]bool{}}
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
	out      []capstanv1.Violation
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
