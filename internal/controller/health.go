package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
)

// An add-on is Ready when every object it applied is Current by kstatus:
// Deployments, StatefulSets and DaemonSets rolled out, claims bound,
// Services as soon as they exist (a LoadBalancer Service too, before its
// load balancer has an address: kstatus, Flux and Helm 4 wait for no
// address, and spec.healthChecks can), CRDs established, custom
// resources whose conditions say Ready, and every kind without a status as
// soon as it exists. It is the same judgement as helm install --wait and
// Flux's health checks make, with Capstan's own rules where kstatus is too
// quick (health_rules.go): Jobs complete, failed Pods failed, OnDelete
// StatefulSets ready, APIServices Available, and conditions of the latest
// generation; and where it would wait for ever: OnDelete DaemonSets ready
// with pods of the old template, Jobs the chart creates suspended
// (createdSuspended), and claims that wait for their first consumer
// (claimWaitsForConsumer).

// maxNotCurrent is how many objects that are not Current the status names,
// and maxReason how long each one's reason may be: a reason quotes the
// object's own condition message, which its controller may make as long
// as the API server takes (32 KiB), and five of them would make the
// Healthy condition's message longer than that.
const (
	maxNotCurrent = 5
	maxReason     = 1 << 10
)

// objectHealth computes an object's health with kstatus and Capstan's
// rules (computeHealth) from its live object, nil when it does not exist:
// Current, or why not, and whether it failed (kstatus's Failed, a rule's,
// or a check's failed expression).
//
// A kind that spec.healthChecks names is judged by its check alone.
//
// A Job the chart creates suspended (createdSuspended) is Current. A
// claim that waits for its first consumer (claimWaitsForConsumer) is
// Current: bindingMode reads its StorageClass's volumeBindingMode, and a
// nil bindingMode reads none. One whose StorageClass cannot be read
// (bindingMode's error, a storageClassUnread) is judged as kstatus judges
// it, and its reason ends with why the class was not read and what to do.
//
// An object whose status kstatus cannot read (status.conditions a map, a
// condition's status a bool, status.observedGeneration a string) is not
// Current, and the reason says so: it is one object's fault, and an error
// would end the whole look, so that no other object would be judged, the
// add-on would never be Ready and no later wave would be applied.
func objectHealth(obj, live *unstructured.Unstructured, checks *health.Checks, bindingMode func(class string) (string, error)) (current, failed bool, why string) {
	ref := capstanv1.RefOf(obj)
	if live == nil {
		return false, false, ref.Describe() + ": does not exist yet"
	}
	if checks.Judges(live) {
		switch st, msg := checks.Evaluate(live); st {
		case health.Current:
			return true, false, ""
		case health.Failed:
			return false, true, fmt.Sprintf("%s: failed: %s", ref.Describe(), msg)
		default:
			return false, false, fmt.Sprintf("%s: %s", ref.Describe(), msg)
		}
	}
	if createdSuspended(obj, live) {
		return true, false, ""
	}
	res, err := computeHealth(live)
	if err != nil {
		return false, false, fmt.Sprintf("%s: its status cannot be read: %v; set spec.healthChecks for this kind", ref.Describe(), err)
	}
	var unread error
	if class, ok := claimWaitsForConsumer(live); ok && bindingMode != nil {
		mode, err := bindingMode(class)
		if mode == string(storagev1.VolumeBindingWaitForFirstConsumer) {
			return true, false, ""
		}
		unread = err
	}
	switch res.Status {
	case status.CurrentStatus:
		return true, false, ""
	case status.FailedStatus:
		return false, true, fmt.Sprintf("%s: failed: %s", ref.Describe(), res.Message)
	}
	msg := res.Message
	if msg == "" {
		msg = string(res.Status)
	}
	if unread != nil {
		msg += "; " + unread.Error()
	}
	return false, false, fmt.Sprintf("%s: %s", ref.Describe(), msg)
}

// health judges obj as objectHealth does, with the reason masked
// (s.mask) before anything cuts it: a reason quotes the object's own
// status message, which may quote a secret value, and a reason cut to
// maxReason or a status field's length would end with a part of that
// value, which no mask finds once it is cut.
func (s *scope) health(ctx context.Context, obj, live *unstructured.Unstructured, checks *health.Checks) (current, failed bool, why string) {
	current, failed, why = objectHealth(obj, live, checks, s.bindingMode(ctx))
	return current, failed, s.mask().String(why)
}

// judge is s.health with what the add-on's health check found before:
// an object that a check found Current, and that has not changed since,
// is Current with no evaluation (verifiedObjects.checkedCurrent), and one
// it finds Current now is remembered so.
func (r *AddonReconciler) judge(ctx context.Context, s *scope, obj, live *unstructured.Unstructured, checks *health.Checks) (current, failed bool, why string) {
	judged := live != nil && checks.Judges(live)
	key := capstanv1.RefOf(obj).Key()
	if judged && r.verified.checkedCurrent(s.addon, key, live.GetResourceVersion()) {
		return true, false, ""
	}
	current, failed, why = s.health(ctx, obj, live, checks)
	if judged && current {
		r.verified.markChecked(s.addon, key, live.GetResourceVersion())
	}
	return current, failed, why
}

// judgement is one look at the health of an add-on's objects, for the
// Healthy condition and the phase.
type judgement struct {
	// nothing: nothing the add-on runs was there to judge (nothing is
	// applied yet).
	nothing bool
	// notCurrent says why each object that is not Current is not, and
	// kinds are their kinds; failed is true when one of them failed, and
	// failures says why each that failed did.
	notCurrent []string
	kinds      []schema.GroupVersionKind
	failed     bool
	failures   []string
}

// The reasons of the Healthy condition.
const (
	reasonHealthCurrent    = "Current"
	reasonHealthNotCurrent = "NotCurrent"
	reasonHealthFailed     = "Failed"
	reasonHealthNothing    = "NothingApplied"
)

// condition is the Healthy condition a judgement gives.
func (j *judgement) condition(generation int64) metav1.Condition {
	c := metav1.Condition{Type: capstanv1.ConditionHealthy, ObservedGeneration: generation}
	switch {
	case j.nothing:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, reasonHealthNothing, "Nothing is applied yet."
	case len(j.notCurrent) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, reasonHealthCurrent, "Every object the add-on runs is Current."
	case j.failed:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reasonHealthFailed, notCurrentList(j.notCurrent)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reasonHealthNotCurrent, notCurrentList(j.notCurrent)
	}
	return c
}

// notCurrentList is a short list of the objects that are not Current,
// each reason cut to maxReason; the reasons are masked already (health).
func notCurrentList(why []string) string {
	n := min(len(why), maxNotCurrent)
	cut := make([]string, n)
	for i, w := range why[:n] {
		cut[i] = truncate(w, maxReason)
	}
	if len(why) <= maxNotCurrent {
		return strings.Join(cut, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(cut, "; "), len(why)-maxNotCurrent)
}

// claimWaitsForConsumer reports whether live is a PersistentVolumeClaim
// that is Pending, and whose volume no scheduler has asked for yet (no
// volume.kubernetes.io/selected-node annotation), and the StorageClass it
// names. Such a claim is Current when that class binds a volume only for
// its first consumer (volumeBindingMode WaitForFirstConsumer): it binds
// once a Pod that mounts it is scheduled, and waiting for it would hold
// the Deployment of a later wave that is that Pod for ever.
//
// NOTE: a claim without spec.storageClassName is not: the API server
// writes the default class into a claim created without one, so a claim
// that still names none binds only to a volume of no class, at once.
func claimWaitsForConsumer(live *unstructured.Unstructured) (class string, ok bool) {
	gvk := live.GroupVersionKind()
	if gvk.Group != "" || gvk.Kind != "PersistentVolumeClaim" {
		return "", false
	}
	if phase, _, _ := unstructured.NestedString(live.Object, "status", "phase"); phase != "Pending" {
		return "", false
	}
	if _, selected := live.GetAnnotations()[selectedNodeAnnotation]; selected {
		return "", false
	}
	class, _, _ = unstructured.NestedString(live.Object, "spec", "storageClassName")
	return class, class != ""
}

// selectedNodeAnnotation is what the scheduler writes on a claim that
// waits for its first consumer once it has placed that consumer: the
// volume is being provisioned, and the claim is in progress again.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// bindingMode reads the volumeBindingMode of a StorageClass as the
// applying identity, once per reconcile (the field cannot change, and a
// read that failed is tried again at the next look). A class that is
// gone, or that the identity may not read, or a read that failed, is a
// storageClassUnread: the claim is then judged as kstatus judges it, and
// its reason says which class and what to do.
func (s *scope) bindingMode(ctx context.Context) func(class string) (string, error) {
	return func(class string) (string, error) {
		if read, ok := s.bindingModes[class]; ok {
			return read.mode, read.err
		}
		var read classRead
		sc, err := s.applier.Get(ctx, capstanv1.ObjectRef{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: class})
		switch {
		case err != nil:
			read.err = &storageClassUnread{class: class, who: s.storageClassReader(), err: err}
		case sc == nil:
			read.err = &storageClassUnread{class: class, who: s.storageClassReader()}
		default:
			read.mode, _, _ = unstructured.NestedString(sc.Object, "volumeBindingMode")
		}
		if s.bindingModes == nil {
			s.bindingModes = map[string]classRead{}
		}
		s.bindingModes[class] = read
		return read.mode, read.err
	}
}

// classRead is what bindingMode read of one StorageClass: its
// volumeBindingMode, or why it has none.
type classRead struct {
	mode string
	err  error
}

// storageClassReader names the account that reads StorageClasses for this
// add-on's health: the one spec.kubeConfig names in another cluster, the
// add-ons account for the cluster profile, and the controller's own for
// the restricted profile.
func (s *scope) storageClassReader() string {
	switch {
	case s.cluster != nil && s.cluster.server != "":
		return s.cluster.as
	case s.profile == capstanv1.ProfileRestricted:
		return "the controller's account"
	default:
		return "the add-ons account"
	}
}

// storageClassUnread is a StorageClass that a Pending claim names and
// that health could not read: err is the read's error, nil when the class
// does not exist; who is the account that read it. Without the class's
// volumeBindingMode, a claim that waits for its first consumer cannot be
// told from a stuck one, so it is waited for until Bound, and its reason
// says why.
type storageClassUnread struct {
	class, who string
	err        error
}

func (e *storageClassUnread) Error() string {
	const unknown = "so whether the claim waits for its first consumer (volumeBindingMode: WaitForFirstConsumer) is unknown, and it is waited for until Bound"
	switch {
	case e.err == nil || apierrors.IsNotFound(e.err):
		return fmt.Sprintf("its StorageClass %q does not exist, %s: create that StorageClass, or have the claim name one that exists", e.class, unknown)
	case apierrors.IsForbidden(e.err):
		return fmt.Sprintf("its StorageClass %q could not be read: %s may not get storageclasses (storage.k8s.io), %s: ask the cluster's administrator to grant it get on storageclasses in a ClusterRole", e.class, e.who, unknown)
	default:
		return fmt.Sprintf("reading its StorageClass %q failed, %s; the next look reads it again: %v", e.class, unknown, e.err)
	}
}

func (e *storageClassUnread) Unwrap() error { return e.err }
