package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/prepare"
)

// VerifyTTL bounds how long a dry run's "unchanged" is trusted. Past it,
// the object is dry-run again, so what a resourceVersion cannot show (a
// CRD that gained a default, a new admission webhook) is caught too.
const VerifyTTL = 30 * time.Minute

// Verified is what a server-side dry run found of one object: unchanged,
// for the manifest with Digest, compared with the live object at
// ResourceVersion. While both hold, the object is still unchanged: any
// change to the live object, drift included, gives it a new
// resourceVersion.
type Verified struct {
	Digest, ResourceVersion string
	At                      time.Time
	// Generation is the live object's metadata.generation at
	// ResourceVersion (see SameSpec).
	Generation int64
	// Healthy is set when a workload was found ready at ResourceVersion.
	Healthy bool
	// Shape is ShapeOf the live object at ResourceVersion, for an object
	// with a status and no metadata.generation (a Service, a
	// HorizontalPodAutoscaler before Kubernetes 1.37); empty otherwise.
	Shape string
}

// VerifiedAt is what a dry run or an apply found unchanged: the manifest
// with digest, as live is now.
func VerifiedAt(digest string, live *unstructured.Unstructured, at time.Time) Verified {
	v := Verified{Digest: digest, ResourceVersion: live.GetResourceVersion(), Generation: live.GetGeneration(), At: at}
	if _, ok := live.Object["status"]; ok && v.Generation == 0 {
		v.Shape = ShapeOf(live)
	}
	return v
}

// ShapeOf digests what of a live object is not status: everything but
// status, the metadata the API server sets on every write
// (resourceVersion, managedFields), and the annotations the
// autoscaling/v1 API mirrors an autoscaler's status into. Two versions of
// an object of the same shape differ by a status write alone, which a dry
// run of its manifest cannot find changed: Capstan applies no status.
func ShapeOf(live *unstructured.Unstructured) string {
	u := live.DeepCopy()
	delete(u.Object, "status")
	u.SetResourceVersion("")
	u.SetManagedFields(nil)
	if ann := u.GetAnnotations(); len(ann) > 0 {
		for k := range ann {
			if strings.HasPrefix(k, "autoscaling.alpha.kubernetes.io/") {
				delete(ann, k)
			}
		}
		u.SetAnnotations(ann)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// specKinds are the kinds whose metadata.generation the API server raises
// on every change of their spec, and whose status moves often: a workload
// rolling out, an autoscaler or a disruption budget counting pods. A
// HorizontalPodAutoscaler has a generation only from Kubernetes 1.37 (the
// HPAGeneration feature); before, its generation is 0, and SameSpec tells
// its status writes apart by Verified.Shape.
var specKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:                     true,
	{Group: "apps", Kind: "StatefulSet"}:                    true,
	{Group: "apps", Kind: "DaemonSet"}:                      true,
	{Group: "apps", Kind: "ReplicaSet"}:                     true,
	{Group: "batch", Kind: "Job"}:                           true,
	{Group: "batch", Kind: "CronJob"}:                       true,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:          true,
}

// SameSpec reports whether an object verified unchanged still is, although
// its resourceVersion moved. For the kinds in specKinds, the same
// generation means the same spec, so only its status or metadata changed,
// and every label and annotation the manifest sets still has its value.
// For an object with a status and no generation (a Service, a
// HorizontalPodAutoscaler before Kubernetes 1.37), the same Shape means
// only its status was written: the shape covers its spec, labels,
// annotations and owner references. A rollout's status updates, or a load
// balancer's address, then cost no dry run. The check stays as recent as
// the dry run or apply that verified it.
func (v Verified) SameSpec(obj, live *unstructured.Unstructured, digest string, now time.Time) bool {
	if v.Digest != digest || now.Sub(v.At) >= VerifyTTL || live.GetDeletionTimestamp() != nil {
		return false
	}
	if v.Shape != "" {
		return ShapeOf(live) == v.Shape
	}
	if v.Generation == 0 || live.GetGeneration() != v.Generation || !specKinds[obj.GroupVersionKind().GroupKind()] {
		return false
	}
	return subset(obj.GetLabels(), live.GetLabels()) && subset(obj.GetAnnotations(), live.GetAnnotations()) &&
		sameOwners(obj.GetOwnerReferences(), live.GetOwnerReferences())
}

// subset reports whether every key of want is in have with the same value.
func subset(want, have map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// sameOwners reports whether every owner reference the manifest sets is on
// the live object.
func sameOwners(want, have []metav1.OwnerReference) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h metav1.OwnerReference) bool {
			return h.UID == w.UID && h.Kind == w.Kind && h.Name == w.Name && h.APIVersion == w.APIVersion &&
				ptrEqual(h.Controller, w.Controller) && ptrEqual(h.BlockOwnerDeletion, w.BlockOwnerDeletion)
		}) {
			return false
		}
	}
	return true
}

func ptrEqual(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// StillUnchanged reports whether an object verified unchanged still is:
// the manifest and the live resourceVersion are the same, and the check is
// recent enough.
func (v Verified) StillUnchanged(digest, resourceVersion string, now time.Time) bool {
	return v.Digest == digest && v.ResourceVersion == resourceVersion && now.Sub(v.At) < VerifyTTL
}

// Cluster is what a preview needs of the cluster, as the identity that
// applies: reads, label-selected lists and dry runs. *apply.Applier is one.
type Cluster interface {
	Get(ctx context.Context, ref capstanv1.ObjectRef) (*unstructured.Unstructured, error)
	DryRun(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// PreviewInput is what a preview compares.
type PreviewInput struct {
	// Addon is the add-on: its inventory and its labels.
	Addon *capstanv1.Addon
	// Objects are the prepared objects to apply.
	Objects []*unstructured.Unstructured
	// CreatedNamespace is the Namespace that spec.createNamespace adds: it
	// is created when missing, and one that exists is not adopted.
	CreatedNamespace string
	// Known is what earlier dry runs verified, by ObjectRef.Key.
	Known map[string]Verified
	// Watched are the resourceVersions in the controller's watch cache, by
	// ObjectRef.Key, for the kinds whose informers have synced.
	Watched map[string]string
	// Now is the time of the preview.
	Now time.Time
	// Hides reports whether a string holds a value never to be shown, for
	// the diffs of objects of every kind (HideValuesPair); nil hides
	// nothing beyond Secrets' data.
	Hides func(string) bool
	// Recreate plans an object the add-on applied, whose change the API
	// server refuses to make in place, as deleted and created anew
	// (spec.recreate). An object whose manifest asks for it
	// (apply.RecreateMarked) is planned so without it.
	Recreate bool
	// Generated are the fields the chart generates at random, which a
	// plan's hash covers as a person can review them (see Generated).
	Generated Generated
	// FullDiffs computes every diff whole, for `capstan plan`; a preview
	// for status leaves it false: a diff that would take too much work
	// only counts its lines (Comparison.DiffTooLarge), and once the diffs
	// before an object fill what status keeps of them, its diff is not
	// computed (Comparison.DiffNotKept).
	FullDiffs bool
	// Grace remembers the dry runs the API server could not take for a
	// moment: one that fails so for long enough is the object's error,
	// not one more retry. Nil retries every such dry run.
	Grace *DryRunGrace
}

// Preview is the result of previewing every object.
type Preview struct {
	// Objects are the comparisons, in the order of the input's objects.
	Objects []ObjectResult
	// Live are the live objects read, by ObjectRef.Key; nil for one that
	// does not exist. Objects that were Quiet were not read.
	Live map[string]*unstructured.Unstructured
	// Quiet are the objects unchanged by the watch cache alone: verified
	// before, and at the same resourceVersion since. They cost no request.
	Quiet map[string]bool
	// Digests are the manifests' digests, by ObjectRef.Key.
	Digests map[string]string
	// Verified is what this preview verified, to remember until the next.
	Verified map[string]Verified
}

// PreviewObjects reads every object's live state and runs a server-side
// dry-run apply of it, then compares the two. It saves what it can:
//   - an object verified unchanged before, whose manifest and live
//     resourceVersion (in the watch cache) are the same since, is unchanged
//     with no request at all;
//   - objects the add-on applied before are read by label-selected Lists
//     rather than one by one;
//   - an object verified before and found at the same resourceVersion is
//     unchanged without another dry run;
//   - objects in a Namespace this sync creates are creates, with no read
//     and no dry run.
//
// A dry run the API server refuses is reported in the object's result,
// with a Secret's message withheld; only a failed read is an error, and then
// the Preview holds what was verified before it.
func PreviewObjects(ctx context.Context, c Cluster, in PreviewInput) (*Preview, error) {
	inventory := map[string]bool{}
	for _, ref := range in.Addon.Status.Inventory {
		inventory[ref.Key()] = true
	}
	crdKinds := prepare.CRDScopes(in.Objects)
	ownHooks := sync.OnceValue(func() map[string]bool { return apply.Webhooks(in.Objects) })
	// failing are the GraceKeys of the dry runs that failed so on this
	// look; ranOut, that one of them has had its grace.
	failing, ranOut := map[string]bool{}, false
	out := &Preview{
		Objects:  make([]ObjectResult, 0, len(in.Objects)),
		Live:     make(map[string]*unstructured.Unstructured, len(in.Objects)),
		Quiet:    map[string]bool{},
		Digests:  make(map[string]string, len(in.Objects)),
		Verified: map[string]Verified{},
	}
	for _, obj := range in.Objects {
		out.Digests[capstanv1.RefOf(obj).Key()] = ManifestDigest(obj)
	}
	if len(in.Watched) > 0 {
		for _, obj := range in.Objects {
			key := capstanv1.RefOf(obj).Key()
			if v, ok := in.Known[key]; ok {
				rv, ok := in.Watched[key]
				out.Quiet[key] = ok && v.StillUnchanged(out.Digests[key], rv, in.Now)
			}
		}
	}
	listed := readLabelled(ctx, c, in, out.Quiet)
	// A rendered Namespace that does not exist yet holds nothing yet: its
	// objects are creates, with no read and no dry run (which would only
	// answer that the namespace is missing).
	newNamespaces := map[string]bool{}
	for _, obj := range in.Objects {
		if obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Kind: "Namespace"}) {
			continue
		}
		key := capstanv1.RefOf(obj).Key()
		if out.Quiet[key] {
			continue // it exists
		}
		live, ok := listed[key]
		if !ok {
			var err error
			if live, err = c.Get(ctx, capstanv1.RefOf(obj)); err != nil {
				return out, in.readFailed(capstanv1.RefOf(obj), err)
			}
			listed[key] = live
		}
		if live == nil {
			newNamespaces[obj.GetName()] = true
		}
	}
	// NOTE: what status keeps of the diffs, spent in the order Build
	// spends it (the objects' order).
	budget := MaxTotalDiffBytes
	for _, obj := range in.Objects {
		if err := ctx.Err(); err != nil {
			// NOTE: a diff takes no context; a plan whose client has
			// gone stops here, between objects.
			return out, err
		}
		ref := capstanv1.RefOf(obj)
		key := ref.Key()
		if newNamespaces[obj.GetNamespace()] {
			out.Objects = append(out.Objects, ObjectResult{Ref: ref, Unverified: true, RandomName: in.Generated.RandomName(obj),
				Comparison: Comparison{Action: capstanv1.ActionCreate, Digest: in.Generated.CreateDigest(obj)}})
			continue
		}
		if out.Quiet[key] {
			out.Objects = append(out.Objects, ObjectResult{Ref: ref, Comparison: Comparison{Action: capstanv1.ActionUnchanged}})
			out.Verified[key] = in.Known[key]
			continue
		}
		live, ok := listed[key]
		if !ok {
			var err error
			live, err = c.Get(ctx, ref)
			if err != nil && !apimeta.IsNoMatchError(err) {
				return out, in.readFailed(ref, err)
			}
		}
		out.Live[key] = live
		res := ObjectResult{Ref: ref, RandomName: live == nil && in.Generated.RandomName(obj)}
		// NOTE: digest is the raw manifest's, for what a dry run verified;
		// a plan's hash takes the digests of the changes, which cover what
		// the chart generates at random as a person can review it
		// (Generated): one with the raw bytes would be new on every render,
		// and no approval of the plan would ever apply.
		digest := out.Digests[key]
		// NOTE: the inventory alone does not make an object this add-on's:
		// it is saved before anything is applied, so an install that
		// stopped there names objects it never created, which someone
		// else may have created since. Such an object is adopted as any
		// other, and only one both in the inventory and shown to be this
		// add-on's (held) is ever deleted to be created anew. A kind an
		// uninstall never deletes may be shared: one in the inventory
		// stays held when another add-on's labels are on it (another
		// add-on that shares it applied it last, or adopted it), so it is
		// never adopted again; those labels only steer deletes, which
		// never come to these kinds.
		held := live != nil && inventory[key] && (apply.NotOurs(in.Addon, live) == "" || !apply.Deletable(ref) && apply.LabelledForAnother(in.Addon, live))
		ours := held || live != nil && in.Addon.LabelledFor(live.GetLabels())
		if live != nil && apply.CreateOnly(obj) != "" {
			// NOTE: created while missing, never changed after: another
			// controller fills it in, or a person owns it from then on.
			// One this add-on did not create is adopted as any other.
			res.Action = capstanv1.ActionUnchanged
			res.Adopted = !ours
			out.Verified[key] = VerifiedAt(digest, live, in.Now)
			out.Objects = append(out.Objects, res)
			continue
		}
		if v, ok := in.Known[key]; ok && live != nil && in.Addon.LabelledFor(live.GetLabels()) {
			if v.StillUnchanged(digest, live.GetResourceVersion(), in.Now) {
				res.Action = capstanv1.ActionUnchanged
				out.Verified[key] = v
				out.Objects = append(out.Objects, res)
				continue
			}
			if v.SameSpec(obj, live, digest, in.Now) {
				// NOTE: only the live status or others' metadata moved;
				// health is judged from the object read here.
				res.Action = capstanv1.ActionUnchanged
				v.ResourceVersion, v.Healthy = live.GetResourceVersion(), false
				out.Verified[key] = v
				out.Objects = append(out.Objects, res)
				continue
			}
		}
		// NOTE: the namespace of createNamespace is created when missing,
		// as helm --create-namespace does; one that exists is not adopted.
		ensured := ref.Kind == "Namespace" && ref.APIVersion == "v1" && ref.Name == in.CreatedNamespace
		res.Adopted = live != nil && !ours && !ensured
		if ensured && live == nil {
			// The Namespace Capstan makes for createNamespace, from a
			// validated name, and applied first (only the add-on's CRDs
			// come before it): its own apply is its check, so a dry run
			// would only double it.
			res.Comparison = createComparison(obj, in.Generated)
			out.Objects = append(out.Objects, res)
			continue
		}
		dry, err := c.DryRun(ctx, obj)
		// NOTE: a webhook that this render registers is waited for on its
		// error (the controller's webhookWait), so the plan needs it at
		// once; another's, whose pod restarts, gets the grace.
		webhook := apply.FailedWebhook(err)
		transient := apply.Transient(err) && (webhook == "" || !ownHooks()[webhook])
		if !transient {
			in.Grace.Passed(in.Addon, key)
		}
		var refusal string
		var first time.Time
		if transient {
			var lasted bool
			gk := GraceKey(key, webhook)
			failing[gk] = true
			first, lasted = in.Grace.Lasted(in.Addon, gk, in.Now)
			refusal = graceRefusal(first, lasted, gk != key, ranOut)
			ranOut = ranOut || lasted
		}
		switch {
		case transient && refusal == "":
			// NOTE: the API server could not take the dry run for a
			// moment (an etcd leader change, a rolling control plane, a
			// 429): the plan says nothing of the object, so the preview
			// fails and is retried with backoff, as a failed read is,
			// rather than refuse the plan until the resync; so is a
			// webhook of someone else's the API server failed to call
			// (its pod restarts). One that goes on failing (in.Grace) is
			// a refusal the API server answers with a bare 500, or a
			// webhook down for good (counted once for the webhook, not
			// once for each object that calls it in turn), recorded below
			// as what stops the sync; once one has, the plan is refused
			// anyway, and the failures of the objects after it are
			// recorded at once rather than each waiting out a grace of its
			// own. A webhook this render registers stays the object's
			// error at once: the add-on's own webhook of an earlier wave
			// is waited for on it.
			return out, &DryRunError{Ref: ref, Message: RedactAPIError(obj, err), Err: err, First: first, Grace: in.Grace.For()}
		case err != nil && apimeta.IsNoMatchError(err) && definedBy(crdKinds, obj):
			// Its CRD is created first in this very sync, so the API
			// server cannot dry-run it yet.
			res.Unverified = true
			res.Comparison = createComparison(obj, in.Generated)
		case err != nil && apierrors.IsNotFound(err) && prepare.Renders(in.Objects, "Namespace", obj.GetNamespace()):
			// Its namespace is created first in this very sync.
			res.Unverified = true
			res.Comparison = createComparison(obj, in.Generated)
		case err != nil && apply.IsImmutableJob(obj, err) && held:
			// NOTE: only a Job this add-on holds: one adopted (a Helm
			// release's migration still running) is someone else's, and
			// its delete would stop its pods; it falls to the error below,
			// which says to delete it by hand.
			if why := apply.CannotRecreate(obj, live); why != "" {
				// NOTE: a Job is recreated for its pod template without
				// spec.recreate, but never past what keeps it.
				res.Action = capstanv1.ActionUpdate
				res.Error = RedactAPIError(obj, err) + "; " + why
				break
			}
			// NOTE: bound to the Job read here, as spec.recreate's deletes
			// are: an approval deletes only the Job its approver saw.
			res.Recreate, res.RecreateUID = true, live.GetUID()
			res.Comparison = Comparison{Action: capstanv1.ActionUpdate, Digest: in.Generated.ManifestDigest(obj),
				Diff: "(the Job's pod template changed: it is deleted and created anew)\n"}
		case err != nil && (in.Recreate || apply.RecreateMarked(obj) != "") && held && apply.RefusedInPlace(err) && apply.CannotRecreate(obj, live) == "":
			res.Recreate, res.RecreateUID = true, live.GetUID()
			why := "spec.recreate"
			if m := apply.RecreateMarked(obj); m != "" {
				why = "its manifest's " + m
			}
			res.Comparison = Comparison{Action: capstanv1.ActionUpdate, Digest: in.Generated.ManifestDigest(obj),
				Diff: "(the API server refuses to change it in place, so the sync deletes it and creates it anew, as " + why + " asks: " + RedactAPIError(obj, err) + ")\n"}
		case err != nil:
			res.Action = capstanv1.ActionCreate
			if live != nil {
				res.Action = capstanv1.ActionUpdate
			}
			res.Error = RedactAPIError(obj, err) + inPlaceHint(obj, live, held, err)
			res.Error += refusal
		default:
			mode := diffForStatus
			switch {
			case in.FullDiffs:
				mode = diffFull
			case !diffRoom(budget):
				// NOTE: Build would drop the diff, and computing a large
				// one takes time on every preview of a pending change.
				mode = diffNone
			}
			res.Comparison, err = compare(obj, live, dry, in.Hides, in.Generated, mode)
			if err != nil {
				return out, err
			}
			if res.Action == capstanv1.ActionUnchanged && live != nil && inventory[key] && lostLabels(live, in.Addon) {
				// Someone removed Capstan's labels from an object this
				// add-on applied: without them the object drops out of the
				// watch and the label-selected reads, so a sync puts them
				// back.
				res.Comparison = Comparison{Action: capstanv1.ActionUpdate, Digest: in.Generated.ManifestDigest(obj),
					Diff: "(Capstan's labels " + capstanv1.AddonLabel + " and " + capstanv1.AddonNamespaceLabel + " were removed; the sync puts them back)\n"}
			}
			if res.Action == capstanv1.ActionUnchanged && live != nil {
				out.Verified[key] = VerifiedAt(digest, live, in.Now)
			}
			if res.Action == capstanv1.ActionUnchanged && res.Adopted {
				res.Owned = apply.AppliedFields(dry)
			}
		}
		if res.Recreate {
			res.AfterDelete = &ObjectResult{Ref: ref, RandomName: in.Generated.RandomName(obj), Comparison: createComparison(obj, in.Generated)}
		}
		_, budget = capDiff(res.Diff, budget, false)
		out.Objects = append(out.Objects, res)
	}
	in.Grace.Keep(in.Addon, failing)
	return out, nil
}

// readFailed is the error of the preview's read of ref that failed with
// err. A read the API server could not take for a moment (apply.Transient)
// gets the grace a dry run does, counted under the object's key (GraceKey)
// with its dry run's failures: within it, a DryRunError to retry (Read),
// which is no failure of the add-on; once it has lasted, or with no
// Grace, or for any other error, the read's error as it is.
func (in PreviewInput) readFailed(ref capstanv1.ObjectRef, err error) error {
	failed := fmt.Errorf("reading %s: %w", ref.Key(), err)
	if in.Grace == nil || !apply.Transient(err) {
		return failed
	}
	first, lasted := in.Grace.Lasted(in.Addon, GraceKey(ref.Key(), ""), in.Now)
	switch {
	case lasted && first.IsZero():
		return fmt.Errorf("%w (the controller remembers too many other requests failing so to give this one time)", failed)
	case lasted:
		return fmt.Errorf("%w (the API server has failed this read since %s, on %d looks or more)", failed, first.UTC().Format(time.RFC3339), GraceTries)
	}
	return &DryRunError{Ref: ref, Read: true, Message: err.Error(), Err: err, First: first, Grace: in.Grace.For()}
}

// graceRefusal says why a dry run the API server could not take is
// recorded as the object's refusal, or "" when it is retried: lasted is
// what DryRunGrace.Lasted answered (first being when the failures began),
// webhook that they are counted for the webhook called, and ranOut that
// an object before it on this look has had its grace, so the plan is
// refused anyway.
//
// NOTE: the text goes into the plan's hash, so it holds nothing that
// changes from one look to the next (no count of looks): a Stalled
// add-on's status stays as it is at its resync.
func graceRefusal(first time.Time, lasted, webhook, ranOut bool) string {
	const fix = "fix the manifest, or what the API server calls for it"
	switch {
	case lasted && first.IsZero():
		return " (the controller remembers too many other dry runs failing so to give this one time, so it is taken as a refusal at once: " + fix + ")"
	case lasted && webhook:
		return " (the API server has failed to call this webhook since " + first.UTC().Format(time.RFC3339) + ", on " + strconv.Itoa(GraceTries) + " looks or more, so it is taken as a refusal: " + fix + ")"
	case lasted:
		return " (the API server has failed this dry run since " + first.UTC().Format(time.RFC3339) + ", on " + strconv.Itoa(GraceTries) + " looks or more, so it is taken as a refusal: " + fix + ")"
	case ranOut:
		return " (the API server could not take this dry run; the plan is refused for another object's that went on failing anyway, so it is shown here and tried again at the next look)"
	}
	return ""
}

// inPlaceHint says how to go on with a change the API server refuses to
// make in place, or "" for any other refusal. Only an object the add-on
// holds (in its inventory, and shown to be its own by apply.NotOurs) is
// ever deleted for it: one it did not apply is someone else's, whatever
// labels it carries.
func inPlaceHint(obj, live *unstructured.Unstructured, held bool, err error) string {
	switch {
	case live != nil && !apply.Deletable(capstanv1.RefOf(obj)) && apierrors.IsInvalid(err) && strings.Contains(err.Error(), "immutable"):
		// NOTE: a hint alone, whose words may be loose: nothing is
		// deleted for it.
		return "; " + apply.CannotRecreate(obj, live)
	case live == nil || !apply.RefusedInPlace(err):
		return ""
	case apply.CannotRecreate(obj, live) != "":
		return "; " + apply.CannotRecreate(obj, live)
	case !held:
		return "; this add-on did not apply the object, so it is not deleted for the change: delete it by hand for the sync to create it"
	}
	return "; the change needs the object deleted and created anew: set spec.recreate: true for the sync to do that, or mark the object " +
		apply.FluxForceAnnotation + ": enabled"
}

// createComparison is the comparison of an object that does not exist yet
// and is not dry-run: a create, with the digest of what is rendered, its
// generated fields as a person can review them.
func createComparison(obj *unstructured.Unstructured, generated Generated) Comparison {
	return Comparison{Action: capstanv1.ActionCreate, Digest: generated.CreateDigest(obj)}
}

// readLabelled reads, with one label-selected List per kind and namespace,
// the live objects this add-on applied before, keyed by ObjectRef.Key. Only
// kinds with two or more rendered objects in a namespace are listed: for
// one, a Get costs the same. A List that fails (an unknown kind, a forbidden
// list) leaves its objects to be read one by one. Objects in skip need no
// read.
func readLabelled(ctx context.Context, c Cluster, in PreviewInput, skip map[string]bool) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	if len(in.Addon.Status.Inventory) == 0 {
		return out // a first install: nothing of ours runs yet
	}
	type group struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	counts := map[group]int{}
	for _, o := range in.Objects {
		if !skip[capstanv1.RefOf(o).Key()] {
			counts[group{o.GroupVersionKind(), o.GetNamespace()}]++
		}
	}
	for g, n := range counts {
		if n < 2 {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(g.gvk.GroupVersion().WithKind(g.gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(g.namespace), client.MatchingLabels(in.Addon.OwnerLabels())); err != nil {
			continue
		}
		for i := range list.Items {
			item := &list.Items[i]
			item.SetGroupVersionKind(g.gvk)
			out[capstanv1.RefOf(item).Key()] = item
		}
	}
	return out
}

// DryRunError is a dry run, or a read of a live object (Read), that the
// API server could not take for a moment (apply.Transient), within its
// grace (DryRunGrace): the preview stops, and the caller retries it. Its
// message is RedactAPIError's.
type DryRunError struct {
	// Ref is the object dry-run, or read.
	Ref capstanv1.ObjectRef
	// Read says that the read of the live object failed, not its dry run.
	Read bool
	// Message is the API server's answer, withheld for a Secret.
	Message string
	// Err is the dry run's error.
	Err error
	// First is when the dry run's failures began, and Grace how long
	// they must last before they count as the object's refusal
	// (DryRunGrace.For); zero when nothing counts them.
	First time.Time
	Grace time.Duration
}

func (e *DryRunError) Error() string {
	return "the API server could not take the " + e.request() + " of " + e.Ref.Describe() + ", which is tried again: " + e.Message
}

// request names what failed: the dry run, or the read.
func (e *DryRunError) request() string {
	if e.Read {
		return "read"
	}
	return "dry run"
}

func (e *DryRunError) Unwrap() error { return e.Err }

// Retrying says, for the add-on's status, what the API server could not
// do for the dry run and that it is tried again: a moment the API server
// could not take is no failure of the add-on until it lasts (DryRunGrace).
func (e *DryRunError) Retrying() string {
	what := e.request() + " of " + e.Ref.Describe()
	counts := "the object's refusal"
	if e.Read {
		counts = "a failure"
	}
	why := RetryingWhy(e.Err, what)
	if e.Grace <= 0 {
		return why + "; retrying with backoff: " + e.Message
	}
	until := ""
	if !e.First.IsZero() {
		// NOTE: the time the grace ends, not what is left of it, so that
		// the status stays as it is from one look to the next.
		until = ", since " + e.First.UTC().Format(time.RFC3339) + ", so not before " + e.First.Add(e.Grace).UTC().Format(time.RFC3339)
	}
	return why + "; retrying with backoff (it counts as " + counts + " only once it has failed so on " +
		strconv.Itoa(GraceTries) + " looks in a row and for " + spokenDuration(e.Grace) + until + "): " + e.Message
}

// spokenDuration says d as a person would: in whole minutes or seconds
// when it is one, as time.Duration says it otherwise.
func spokenDuration(d time.Duration) string {
	unit := func(n int64, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.FormatInt(n, 10) + " " + one + "s"
	}
	switch {
	case d%time.Minute == 0:
		return unit(int64(d/time.Minute), "minute")
	case d%time.Second == 0:
		return unit(int64(d/time.Second), "second")
	}
	return d.String()
}

// RetryingWhy says what the API server could not do for what (a request
// named with its object: "dry run of ConfigMap apps/settings") that failed
// with err, which apply.Transient takes for a moment's.
func RetryingWhy(err error, what string) string {
	var netErr net.Error
	switch webhook := apply.FailedWebhook(err); {
	case webhook != "":
		return "the API server could not call the admission webhook " + strconv.Quote(webhook) + " for the " + what
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), errors.Is(err, context.DeadlineExceeded):
		return "the API server did not answer the " + what + " in time"
	case apierrors.IsTooManyRequests(err):
		return "the API server asked for fewer requests (429) at the " + what
	case errors.As(err, &netErr), errors.Is(err, context.Canceled):
		return "the API server could not be reached for the " + what
	}
	return "the API server could not take the " + what + " for a moment"
}

// RedactAPIError keeps the API server's message, except for Secrets, whose
// messages can quote a value.
func RedactAPIError(obj *unstructured.Unstructured, err error) string {
	if ns := missingNamespace(err); ns != "" {
		return fmt.Sprintf("namespace %s does not exist: create it, or set spec.createNamespace: true so the sync creates it", ns)
	}
	if obj.GetKind() == "Secret" {
		return apply.SecretRefusal(err)
	}
	return err.Error()
}

// missingNamespace returns the namespace that a NotFound error says is
// missing, or "".
func missingNamespace(err error) string {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return ""
	}
	if d := status.Status().Details; d != nil && d.Kind == "namespaces" {
		return d.Name
	}
	return ""
}

// definedBy reports whether obj's kind is one that a CRD among the
// rendered objects defines.
func definedBy(crdKinds map[schema.GroupKind]bool, obj *unstructured.Unstructured) bool {
	_, ok := crdKinds[obj.GroupVersionKind().GroupKind()]
	return ok
}

// lostLabels reports whether an object that Capstan applied for this
// add-on (its field manager owns fields of it) has lost some of Capstan's
// labels, with no other add-on's in their place. An object adopted without
// a change was never applied, and has none to lose (apply.AdoptedOnly).
func lostLabels(live *unstructured.Unstructured, addon *capstanv1.Addon) bool {
	l := live.GetLabels()
	if name, ok := l[capstanv1.AddonLabel]; ok && name != addon.Name {
		return false
	}
	if ns, ok := l[capstanv1.AddonNamespaceLabel]; ok && ns != addon.Namespace {
		return false
	}
	if addon.LabelledFor(l) && l[capstanv1.ManagedByLabel] == "capstan" {
		return false
	}
	// NOTE: an object adopted without a change has Capstan's entry too,
	// with the fields it renders but not Capstan's labels, which were
	// never on it (apply.Applier.ClaimAdopted).
	for _, f := range live.GetManagedFields() {
		if f.Manager == capstanv1.FieldManager {
			return !apply.AdoptedOnly(live)
		}
	}
	return false
}

// ManifestDigest identifies an object's manifest, for plan hashes and for
// what a dry run verified.
func ManifestDigest(obj *unstructured.Unstructured) string {
	b, _ := json.Marshal(obj.Object)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
