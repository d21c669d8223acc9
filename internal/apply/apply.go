// Package apply changes the cluster: server-side dry runs and applies with
// one field manager, in order (CRDs, then Namespaces, then the rest), and
// pruning from an inventory that never deletes stateful kinds.
package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Applier applies and deletes objects as one identity: the impersonated
// add-ons account for the cluster profile, the controller for the
// restricted profile.
type Applier struct {
	// Client writes as the applying identity. It must not cache: every Get
	// reads the API server.
	Client client.Client
	// CRDTimeout bounds the wait for new CRDs to become Established.
	CRDTimeout time.Duration
	// Poll is the interval of waits. Default one second.
	Poll time.Duration
	// Discovery is the API server's discovery, asked whether a kind the
	// REST mapper maps to no version is gone (ReadMetadata). Without it,
	// such a kind counts as gone.
	Discovery Discovery
	// ClaimRelease bounds the wait for the StatefulSet controller to take
	// up the claim retention policy Retain that Capstan sets on a
	// StatefulSet before deleting it (releaseClaims). Default 30 seconds.
	ClaimRelease time.Duration
}

// Discovery is the part of client-go's discovery.DiscoveryClient that
// ReadMetadata asks.
type Discovery interface {
	GroupsAndMaybeResourcesWithContext(ctx context.Context) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error)
	ServerResourcesForGroupVersionWithContext(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error)
}

// DryRun returns what the API server would store if obj were applied, with
// force and Capstan's field manager, without storing it.
func (a *Applier) DryRun(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out),
		client.ForceOwnership, client.FieldOwner(capstanv1.FieldManager), client.DryRunAll)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get reads the live object, or returns nil when it does not exist.
func (a *Applier) Get(ctx context.Context, ref capstanv1.ObjectRef) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetAPIVersion(ref.APIVersion)
	live.SetKind(ref.Kind)
	err := a.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return live, nil
}

// List lists objects as the applying identity.
func (a *Applier) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return a.Client.List(ctx, list, opts...)
}

// Apply applies one object with force and Capstan's field manager. A Job
// whose pod template changed is deleted and created anew, since the
// template is immutable, unless CannotRecreate refuses it (Recreate).
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	_, err := a.ApplyLive(ctx, obj)
	return err
}

// ApplyLive is Apply, and returns the object as the API server answered:
// the live object right after the apply. The delete of a Job whose pod
// template changed is bound to the Job it reads just before; a sync binds
// it to the Job its plan saw instead (Ordered).
func (a *Applier) ApplyLive(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out, err := a.applyOnce(ctx, obj)
	if err != nil && IsImmutableJob(obj, err) {
		return a.Recreate(ctx, obj, "")
	}
	return out, err
}

// applyOnce applies one object with force and Capstan's field manager, and
// nothing else: a refusal is returned as it is. The fields it applies that
// a former deployer (Helm, kubectl, another GitOps tool) owns as well are
// handed over to Capstan (handOver).
func (a *Applier) applyOnce(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out, err := a.applyAlone(ctx, obj)
	if err != nil {
		return nil, err
	}
	return a.handOver(ctx, out), nil
}

// applyAlone is applyOnce without the hand-over: the API server's answer
// to the apply itself, which shows whether it created the object
// (createdNow) before a hand-over drops a former deployer's entry.
func (a *Applier) applyAlone(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out),
		client.ForceOwnership, client.FieldOwner(capstanv1.FieldManager)); err != nil {
		return nil, err
	}
	return out, nil
}

// LabelOwner marks a live object that an add-on adopts without a change
// as the add-on's: it applies the add-on's owner labels (labels) alone,
// with a field manager of their own (capstanv1.OwnerLabelsManager), so
// nothing else of the object changes. (ClaimAdopted then makes the fields
// the chart renders Capstan's, values unchanged.)
// The apply is bound to uid, the object the plan saw: one deleted since is
// not created anew as a bare object of labels, and one created anew under
// the same name is not marked; the API server answers a conflict.
func (a *Applier) LabelOwner(ctx context.Context, ref capstanv1.ObjectRef, uid types.UID, labels map[string]string) error {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(ref.APIVersion)
	obj.SetKind(ref.Kind)
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	obj.SetUID(uid)
	obj.SetLabels(labels)
	return a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.ForceOwnership, client.FieldOwner(capstanv1.OwnerLabelsManager))
}

// IsImmutableJob reports whether err is the API server refusing a change to
// a Job's pod template.
func IsImmutableJob(obj *unstructured.Unstructured, err error) bool {
	return obj.GetKind() == "Job" && strings.HasPrefix(obj.GetAPIVersion(), "batch/") &&
		apierrors.IsInvalid(err) && strings.Contains(err.Error(), "spec.template") && strings.Contains(err.Error(), "immutable")
}

// RefusedInPlace reports whether err is the API server refusing to make a
// change in place, and for nothing else: each cause names a field, and its
// detail, which ends the cause's message after any value it quotes, is an
// immutable field ("field is immutable", an immutable Secret's data), a
// Service's clusterIP ("may not change once set"), a RoleBinding's roleRef
// ("cannot change roleRef"), or a StatefulSet's spec beyond the fields it
// may change. A refusal with any other cause is not one, nor is one an
// admission webhook or policy made: the object created anew would be
// refused as well, and deleting it first would only take it away.
func RefusedInPlace(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	if st.Details == nil || len(st.Details.Causes) == 0 || fromAdmission(st.Message) {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field == "" || !inPlaceOnly(c) {
			return false
		}
	}
	return true
}

// inPlaceEnds are the details the API server gives a change it makes only
// to a new object.
var inPlaceEnds = []string{"field is immutable", "immutable when `immutable` is set", "may not change once set", "cannot change roleRef"}

func inPlaceOnly(c metav1.StatusCause) bool {
	if c.Type != metav1.CauseTypeFieldValueInvalid && c.Type != metav1.CauseTypeForbidden {
		return false
	}
	if c.Type == metav1.CauseTypeForbidden && strings.HasPrefix(c.Message, "Forbidden: updates to statefulset spec for fields other than ") {
		return true
	}
	for _, end := range inPlaceEnds {
		if strings.HasSuffix(c.Message, end) {
			return true
		}
	}
	return false
}

// fromAdmission reports whether a refusal's message is an admission
// webhook's or a ValidatingAdmissionPolicy's: a policy may refuse an
// update in the words of an immutable field, and deleting the object would
// only step around it.
func fromAdmission(msg string) bool {
	return strings.Contains(msg, "admission webhook") || strings.Contains(msg, "ValidatingAdmissionPolicy")
}

// CannotRecreate says why an object that the API server refuses to change
// in place must not be deleted and created anew for it, or "" when it may
// be:
//   - the never-delete kinds, which hold data or everything of their kind;
//   - what its manifests mark to be kept (KeptBy), such as a Secret with
//     a password generated once that carries helm.sh/resource-policy: keep;
//   - custom resources: their controller may take down what they run, a
//     database or a cloud resource, when one is deleted;
//   - a StatefulSet whose selector changes and whose claims go with it
//     (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete): its pods
//     cannot be kept for the new one, and the claims would be deleted.
func CannotRecreate(obj, live *unstructured.Unstructured) string {
	ref := capstanv1.RefOf(obj)
	switch {
	case !Deletable(ref):
		return fmt.Sprintf("Capstan never deletes a %s, so this change is one to make by hand", ref.Kind)
	case KeptBy(live, Recreating) != "":
		return "it is marked " + KeptBy(live, Recreating) + ", so Capstan does not delete it to change it: make this change by hand"
	case !scheme.Scheme.Recognizes(obj.GroupVersionKind()):
		return "Capstan does not delete a custom resource to change it, since its controller may take down what it runs when it is deleted: make this change by hand"
	case isStatefulSet(obj) && !sameSelector(live, obj) && DeletesClaims(live):
		return "its selector changes, so its pods cannot be kept for the new one, and deleting it would delete its claims (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete): make this change by hand"
	}
	return ""
}

func isStatefulSet(obj *unstructured.Unstructured) bool {
	return obj.GroupVersionKind().GroupKind() == statefulSetGK
}

// Recreate deletes an object that the API server refuses to change in
// place, waits until it is gone, and applies it anew. The delete is bound
// to uid, the object the plan saw, when it is given: one created again by
// someone else since is not deleted; without one, it is bound to the
// object read here. A StatefulSet whose selector stays the same is deleted
// with its pods orphaned: the new one adopts them as they run, and their
// claims with them. A Job waits for its pods to be gone first, so the old
// run and the new never run side by side. Anything else goes with its
// dependents deleted in the background, while the new object starts its
// own: a Deployment whose selector changed would otherwise leave the old
// ReplicaSet's pods running for ever; a StatefulSet among them only once
// no claim is owned by it (ReleaseClaims). What CannotRecreate refuses is
// refused.
func (a *Applier) Recreate(ctx context.Context, obj *unstructured.Unstructured, uid types.UID) (*unstructured.Unstructured, error) {
	return a.recreate(ctx, obj, uid, nil)
}

// recreate is Recreate, with the API server's refusals of a Secret worded
// by refused when it is set (withheld).
func (a *Applier) recreate(ctx context.Context, obj *unstructured.Unstructured, uid types.UID, refused Refused) (*unstructured.Unstructured, error) {
	ref := capstanv1.RefOf(obj)
	live, err := a.Get(ctx, ref)
	switch {
	case err != nil:
		return nil, err
	case live == nil:
		live, err := a.applyOnce(ctx, obj)
		return live, withheld(obj, err, refused)
	case uid != "" && live.GetUID() != uid:
		return nil, fmt.Errorf("%s was deleted and created again since the plan, so it is not deleted to change it; the next sync plans it again", ref.Describe())
	}
	if why := CannotRecreate(obj, live); why != "" {
		return nil, fmt.Errorf("the API server refuses to change %s in place; %s", ref.Describe(), why)
	}
	propagation := metav1.DeletePropagationBackground
	switch {
	case isStatefulSet(obj) && sameSelector(live, obj):
		propagation = metav1.DeletePropagationOrphan
	case isJob(obj):
		propagation = metav1.DeletePropagationForeground
	}
	if isStatefulSet(obj) && propagation != metav1.DeletePropagationOrphan {
		// NOTE: CannotRecreate refuses a whenDeleted of Delete, but a
		// claim may still be owned under Retain: one of an ordinal scaled
		// away while the policy was Delete keeps its owner reference.
		changed, err := a.ReleaseClaims(ctx, ref, live)
		if err != nil {
			return nil, fmt.Errorf("deleting %s to create it anew: %w", ref.Describe(), err)
		}
		if changed {
			// NOTE: it, or a claim, changed meanwhile (its policy may
			// be Delete again): read once more, and judged again.
			fresh, err := a.Get(ctx, ref)
			switch {
			case err != nil:
				return nil, err
			case fresh == nil || fresh.GetUID() != live.GetUID():
				return nil, fmt.Errorf("%s was deleted or created again while its claims were released, so it is not deleted now; the next sync tries again", ref.Describe())
			}
			if why := CannotRecreate(obj, fresh); why != "" {
				return nil, fmt.Errorf("the API server refuses to change %s in place; %s", ref.Describe(), why)
			}
		}
	}
	return a.replace(ctx, obj, live.GetUID(), propagation, refused)
}

func isJob(obj *unstructured.Unstructured) bool {
	return obj.GroupVersionKind().GroupKind() == schema.GroupKind{Group: "batch", Kind: "Job"}
}

// sameSelector reports whether two objects have the same spec.selector.
func sameSelector(a, b *unstructured.Unstructured) bool {
	sa, _, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "selector")
	sb, _, _ := unstructured.NestedFieldNoCopy(b.Object, "spec", "selector")
	return sa != nil && equality.Semantic.DeepEqual(sa, sb)
}

// replace deletes an object, bound to uid when it is given, waits until it
// is gone, and applies it anew. An apply refused after the delete says
// that the object is gone. The API server's refusals of a Secret are
// worded by refused when it is set (withheld).
func (a *Applier) replace(ctx context.Context, obj *unstructured.Unstructured, uid types.UID, propagation metav1.DeletionPropagation, refused Refused) (*unstructured.Unstructured, error) {
	ref := capstanv1.RefOf(obj)
	if err := a.deleteAndWait(ctx, ref, uid, propagation, a.CRDTimeout); err != nil {
		return nil, fmt.Errorf("deleting %s to create it anew: %w", ref.Describe(), withheld(obj, err, refused))
	}
	out := obj.DeepCopy()
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out),
		client.ForceOwnership, client.FieldOwner(capstanv1.FieldManager)); err != nil {
		return nil, fmt.Errorf("%s was deleted to be created anew, and creating it failed, so it is missing until a sync creates it: %w", ref.Describe(), withheld(obj, err, refused))
	}
	return out, nil
}

// Ordered applies objects in Capstan's order: CustomResourceDefinitions,
// then a wait until they are Established, then Namespaces, then everything
// else. It stops at the first error, which names the object. An object in
// recreate that the API server refuses to change in place (a Job whose pod
// template changed among them) is deleted and created anew (Recreate,
// bound to the UID recreate gives); one that is not in recreate is never
// deleted, a Job neither: the plan did not see it as it is, so the error
// says how to go on. onApplied, if set, is called after each object is
// applied, with the object and the API server's answer.
func (a *Applier) Ordered(ctx context.Context, objs []*unstructured.Unstructured, recreate map[*unstructured.Unstructured]types.UID, onApplied func(obj, live *unstructured.Unstructured)) error {
	return a.ordered(ctx, objs, recreate, onApplied, nil)
}

// ordered is Ordered, with the API server's refusals of a Secret worded
// by refused when it is set (withheld).
func (a *Applier) ordered(ctx context.Context, objs []*unstructured.Unstructured, recreate map[*unstructured.Unstructured]types.UID, onApplied func(obj, live *unstructured.Unstructured), refused Refused) error {
	crds, namespaces, rest := Split(objs)
	apply := func(list []*unstructured.Unstructured) error {
		for _, obj := range list {
			live, err := a.applyOnce(ctx, obj)
			uid, ok := recreate[obj]
			switch {
			case err != nil && ok && (RefusedInPlace(err) || IsImmutableJob(obj, err)):
				live, err = a.recreate(ctx, obj, uid, refused)
			case err != nil && IsImmutableJob(obj, err):
				// NOTE: a Job the plan did not plan to recreate appeared
				// since the preview (an operator of an earlier wave
				// created it), or its pod template changed since: it may
				// be someone else's, and its delete would stop its pods.
				err = fmt.Errorf("%w; %s", withheld(obj, err, refused), unplannedJob)
			default:
				err = withheld(obj, err, refused)
			}
			if err != nil {
				return fmt.Errorf("applying %s: %w", capstanv1.RefOf(obj).Describe(), err)
			}
			if onApplied != nil {
				onApplied(obj, live)
			}
		}
		return nil
	}
	if err := apply(crds); err != nil {
		return err
	}
	for _, crd := range crds {
		if err := a.WaitEstablished(ctx, crd.GetName()); err != nil {
			return err
		}
	}
	if err := apply(namespaces); err != nil {
		return err
	}
	return apply(rest)
}

// unplannedJob is the advice for a Job whose pod template the API server
// refuses to change, which the plan did not plan to delete.
const unplannedJob = "the plan did not plan to delete this Job (it was created, or its pod template changed, since the plan), so it is not deleted for the change: the next sync plans it again; if this add-on did not apply it, delete it by hand for the sync to create it"

// Refused words the API server's refusal of obj for a message, withholding
// what may quote a value (plan.RedactAPIError).
type Refused func(obj *unstructured.Unstructured, err error) string

// withheld is err, the API server's refusal of obj, in refused's words
// when obj is a Secret and refused is set: an admission policy's refusal
// may quote the Secret's data, and data written in a manifest, no Helm
// value, is no value the controller's mask knows to hide. The error still
// wraps err, so that errors.As finds the API server's status to classify
// it by. Errors of Capstan's own (a wait that timed out) quote nothing,
// and are returned as they are, as is every refusal of another kind.
func withheld(obj *unstructured.Unstructured, err error, refused Refused) error {
	var status apierrors.APIStatus
	if err == nil || refused == nil || obj.GroupVersionKind().GroupKind() != secretGK || !errors.As(err, &status) {
		return err
	}
	return &withheldError{msg: refused(obj, err), err: err}
}

// withheldError is an error whose message refused worded.
type withheldError struct {
	msg string
	err error
}

func (e *withheldError) Error() string { return e.msg }
func (e *withheldError) Unwrap() error { return e.err }

// Split sorts objects into CRDs, Namespaces and the rest, keeping their order.
func Split(objs []*unstructured.Unstructured) (crds, namespaces, rest []*unstructured.Unstructured) {
	for _, obj := range objs {
		gk := obj.GroupVersionKind().GroupKind()
		switch gk {
		case crdGK:
			crds = append(crds, obj)
		case namespaceGK:
			namespaces = append(namespaces, obj)
		default:
			rest = append(rest, obj)
		}
	}
	return crds, namespaces, rest
}

// WaitEstablished waits until a CustomResourceDefinition is Established
// and the client's REST mapper serves each of its versions, within the
// Applier's CRD timeout. Established alone is not enough: discovery can lag
// it, and a custom resource applied in that gap fails with "no matches for
// kind".
func (a *Applier) WaitEstablished(ctx context.Context, name string) error {
	timeout := a.CRDTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	return WaitForCRD(ctx, a.Client, name, a.poll(), timeout)
}

// WaitForCRD waits until the CustomResourceDefinition name is Established
// and c's REST mapper maps every served version of its kind. The error
// names the CRD, the timeout and the last thing that was missing.
//
// A CRD whose names the API server does not accept (NamesAccepted False:
// another CRD of its group has one of them) fails soon, with the
// condition's reason and message: no wait makes it Established, or serves
// its new kind, only a change to it or to the other CRD, and the sync
// would wait the whole timeout to say what the first read said. An
// Established CRD whose new short names or categories clash goes on
// serving the names it had (status.acceptedNames), its kind and plural
// included, and is waited for as any other.
func WaitForCRD(ctx context.Context, c client.Client, name string, poll, timeout time.Duration) error {
	var last string
	wasEstablished := false // then only discovery is waited for
	var refusedSince time.Time
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			last = err.Error()
			return false, nil
		}
		established := false
		var namesRefused *apiextensionsv1.CustomResourceDefinitionCondition
		for i, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
			if cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse {
				namesRefused = &crd.Status.Conditions[i]
			}
		}
		// NOTE: an Established CRD goes on serving the names it had
		// (status.acceptedNames): refused short names or categories
		// stop nothing the sync needs, but a refused kind or plural
		// leaves the new one unserved for good.
		accepted := crd.Status.AcceptedNames
		if namesRefused == nil || established && accepted.Kind == crd.Spec.Names.Kind && accepted.Plural == crd.Spec.Names.Plural {
			refusedSince = time.Time{}
		} else {
			// NOTE: failed only once the names have been refused for a
			// second: the API server's naming controller judges them
			// after the apply, so a read just after it may still carry
			// its judgement of the names before it (a rename that fixes
			// the clash).
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			} else if time.Since(refusedSince) >= time.Second {
				return false, fmt.Errorf("CustomResourceDefinition %s: the API server does not accept its names (%s): %s; rename them, or remove the CustomResourceDefinition that holds them", name, namesRefused.Reason, namesRefused.Message)
			}
			last = "names not accepted: " + namesRefused.Message
		}
		if !established {
			return false, nil
		}
		wasEstablished = true
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if _, err := c.RESTMapper().RESTMapping(gk, v.Name); err != nil {
				last = "not yet served by discovery: " + err.Error()
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("waiting for CustomResourceDefinition %s: %w", name, ctx.Err())
	case !wait.Interrupted(err):
		return err
	case wasEstablished:
		return fmt.Errorf("CustomResourceDefinition %s was Established, but API discovery did not serve it within %s (%s)", name, timeout, last)
	}
	msg := fmt.Sprintf("CustomResourceDefinition %s did not become Established within %s", name, timeout)
	if last != "" {
		msg += " (" + last + ")"
	}
	return errors.New(msg)
}

func (a *Applier) poll() time.Duration {
	if a.Poll > 0 {
		return a.Poll
	}
	return time.Second
}

// deleteAndWait deletes an object, bound to uid when it is given, and waits
// until it is gone.
func (a *Applier) deleteAndWait(ctx context.Context, ref capstanv1.ObjectRef, uid types.UID, propagation metav1.DeletionPropagation, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = time.Minute
	}
	opts := []client.DeleteOption{client.PropagationPolicy(propagation)}
	if uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(ref.APIVersion)
	obj.SetKind(ref.Kind)
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	if err := a.Client.Delete(ctx, obj, opts...); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, a.poll()/4, timeout, true, func(ctx context.Context) (bool, error) {
		live, err := a.Get(ctx, ref)
		return live == nil && err == nil, nil
	})
}

// Delete deletes one object, by a version its kind is served by now when
// the cluster no longer serves ref's (ReadMetadata); one that is gone
// already is no error.
// A Secret's refusal is withheld (RefusedWrite).
func (a *Applier) Delete(ctx context.Context, ref capstanv1.ObjectRef, propagation metav1.DeletionPropagation) error {
	_, err := a.deleteServed(ctx, ref, propagation)
	return err
}

// RefusedWrite is err, the API server's refusal to delete or change ref,
// with its message withheld when ref is a Secret (withheld, in
// SecretRefusal's words): an admission policy's refusal of a delete or a
// patch may quote the object, data included. It wraps the error of the
// write request alone: a read's error quotes no admission, and says what
// failed. Every delete request of an inventory goes through it, the
// uninstall's too, so no caller can leave it out, and so do the deletes of
// a hook's object and of an install's undo, and the patch that takes an
// Orphan deletion's owner reference off.
func RefusedWrite(ref capstanv1.ObjectRef, err error) error {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(ref.APIVersion)
	obj.SetKind(ref.Kind)
	return withheld(obj, err, func(_ *unstructured.Unstructured, err error) string { return SecretRefusal(err) })
}

// SecretRefusal words the API server's refusal of a Secret with no word
// of its message, which can quote a value: the reason alone.
func SecretRefusal(err error) string {
	if apierrors.IsInvalid(err) {
		return "the API server refused the Secret as invalid (its message is withheld because it can quote a value)"
	}
	return "the API server refused the Secret: " + string(apierrors.ReasonForError(err))
}

var (
	crdGK       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	namespaceGK = schema.GroupKind{Kind: "Namespace"}
	secretGK    = schema.GroupKind{Kind: "Secret"}
)
