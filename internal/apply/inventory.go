package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// neverDelete are the kinds Capstan never deletes, neither when pruning nor
// when uninstalling: deleting a CRD deletes every resource of its kind, and
// the others hold data.
var neverDelete = map[schema.GroupKind]bool{
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
	{Kind: "Namespace"}:                             true,
	{Kind: "PersistentVolumeClaim"}:                 true,
	{Kind: "PersistentVolume"}:                      true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}: true,
}

// Deletable reports whether Capstan may ever delete objects of ref's kind.
func Deletable(ref capstanv1.ObjectRef) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return !neverDelete[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
}

// Union returns the references in a or b, once each, in a stable order. It is
// the inventory written before an apply, so a crash mid-apply orphans nothing.
func Union(a, b []capstanv1.ObjectRef) []capstanv1.ObjectRef {
	seen := map[string]bool{}
	var out []capstanv1.ObjectRef
	// The newer reference (b) wins, so a changed API version is recorded.
	for _, list := range [][]capstanv1.ObjectRef{b, a} {
		for _, r := range list {
			if k := r.Key(); !seen[k] {
				seen[k] = true
				out = append(out, r)
			}
		}
	}
	Sort(out)
	return out
}

// Subtract returns the references in a that are not in b.
func Subtract(a, b []capstanv1.ObjectRef) []capstanv1.ObjectRef {
	in := map[string]bool{}
	for _, r := range b {
		in[r.Key()] = true
	}
	var out []capstanv1.ObjectRef
	for _, r := range a {
		if !in[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}

// PruneSet returns what pruning would delete: objects in the old inventory
// that the new render no longer has, except the never-delete kinds (which
// leave the inventory undeleted, whether the add-on prunes or not:
// Released). An empty
// render never prunes: it is far more likely a broken source than a wish to
// delete everything. A render that holds nothing of a kind Capstan deletes
// counts as empty: a chart's crds/ are rendered whatever its values say, so
// a values typo or a top-level `enabled: false` that empties its templates
// still leaves the CRDs (and a Namespace or a claim may stay as well).
func PruneSet(inventory, rendered []capstanv1.ObjectRef) []capstanv1.ObjectRef {
	if !slices.ContainsFunc(rendered, Deletable) {
		return nil
	}
	var out []capstanv1.ObjectRef
	for _, r := range Subtract(inventory, rendered) {
		if Deletable(r) {
			out = append(out, r)
		}
	}
	return out
}

// Released returns the objects of the never-delete kinds in the old
// inventory that the new render no longer has: they leave the inventory
// running, never deleted, so that an add-on holds such an object only
// while it renders it. Another add-on that renders it (a CRD moved into
// an add-on of its own) then adopts it as any object let go, and applies
// its changes with its own labels, instead of being held off it for ever
// by an add-on that no longer has it. PruneSet's guard holds for an
// add-on that had objects of a kind Capstan deletes: a render that lost
// them all (a broken source, a failed template) is suspect, and releases
// nothing. An add-on that never had any (a folder of CRDs, a chart of
// Namespaces) releases what it stops rendering, or it would hold each
// for ever; an empty render releases nothing.
func Released(inventory, rendered []capstanv1.ObjectRef) []capstanv1.ObjectRef {
	if len(rendered) == 0 || !slices.ContainsFunc(rendered, Deletable) && slices.ContainsFunc(inventory, Deletable) {
		return nil
	}
	var out []capstanv1.ObjectRef
	for _, r := range Subtract(inventory, rendered) {
		if !Deletable(r) {
			out = append(out, r)
		}
	}
	return out
}

// Sort orders references by group, kind, namespace and name.
func Sort(refs []capstanv1.ObjectRef) {
	sort.SliceStable(refs, func(i, j int) bool { return refs[i].Key() < refs[j].Key() })
}

// Hold says why a prune or an uninstall leaves a live object running:
// another Addon holds it now (Addon, as "namespace/name"), or nothing
// shows that this add-on made it (NotOurs says why). The zero Hold lets
// the object go.
type Hold struct {
	Addon   string
	NotOurs string
}

// Holder tells who holds a live object now, from its reference and
// metadata.
type Holder func(ctx context.Context, ref capstanv1.ObjectRef, obj metav1.Object) (Hold, error)

// NotOurs says why a live object is not add-on a's to delete or to apply
// over without adopting it, or returns "" when it is a's: Capstan's owner
// labels name a, or, with no owner labels naming another add-on, Capstan's
// field manager applied fields of it (someone removed the labels since).
// An inventory entry alone proves nothing: the inventory is saved before
// anything is applied, so an install that stopped there (a pre-install
// hook failed, a wave timed out) names objects it never created, and
// someone else may have created one of those names since.
func NotOurs(a *capstanv1.Addon, obj metav1.Object) string {
	labels := obj.GetLabels()
	if a.LabelledFor(labels) {
		return ""
	}
	name, ns := labels[capstanv1.AddonLabel], labels[capstanv1.AddonNamespaceLabel]
	if name != "" || ns != "" {
		return fmt.Sprintf("its labels %s=%s and %s=%s name another Addon", capstanv1.AddonLabel, name, capstanv1.AddonNamespaceLabel, ns)
	}
	for _, f := range obj.GetManagedFields() {
		// NOTE: only Capstan's applies count: its plain writes (values
		// Secrets, hook objects) carry the binary's name as their manager
		// too, with the Update operation.
		if f.Manager == capstanv1.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			return ""
		}
	}
	return "neither Capstan's labels naming this Addon nor a field Capstan applied are on it, so this add-on did not create it"
}

// LabelledForAnother reports whether Capstan's owner labels on obj name an
// Addon other than a.
func LabelledForAnother(a *capstanv1.Addon, obj metav1.Object) bool {
	labels := obj.GetLabels()
	return !a.LabelledFor(labels) && (labels[capstanv1.AddonLabel] != "" || labels[capstanv1.AddonNamespaceLabel] != "")
}

// ResourcePolicyAnnotation is Helm's resource policy: an object whose
// policy is "keep" is left running when an upgrade or an uninstall would
// delete it, and leaves the release. It is the chart author's word for
// what must outlive the chart: a generated password, a certificate, data.
const ResourcePolicyAnnotation = "helm.sh/resource-policy"

// FluxPruneAnnotation set to "disabled" keeps an object from Flux's garbage
// collection, both when it leaves the source and when its Kustomization is
// deleted. Manifests written for Flux carry it on what must outlive them,
// as an annotation or as a label: Flux reads its marks from either
// (fluxMark).
const FluxPruneAnnotation = "kustomize.toolkit.fluxcd.io/prune"

// KappDeleteStrategyAnnotation set to "orphan" has kapp leave an object
// running, forgotten, where it would delete it: when it leaves the
// manifests, and when its app is deleted. Manifests written for kapp carry
// it on what must outlive them.
const KappDeleteStrategyAnnotation = "kapp.k14s.io/delete-strategy"

// ArgoSyncOptionsAnnotation is Argo CD's per-object list of sync options:
// Prune=false keeps an object when it leaves the source, Delete=false when
// its Application is deleted.
const ArgoSyncOptionsAnnotation = "argocd.argoproj.io/sync-options"

// FluxSSAAnnotation is Flux's per-object apply policy. Its IfNotPresent
// applies an object only while it is missing: cert-manager fills in a
// webhook configuration's caBundle, or a Secret's data, after Flux creates
// it, and every later apply would take them back.
const FluxSSAAnnotation = "kustomize.toolkit.fluxcd.io/ssa"

// CreateOnly names the annotation, with its value, that has obj applied
// only while it is missing (kustomize.toolkit.fluxcd.io/ssa: IfNotPresent,
// read as KeptBy reads the marks), or "" when none does.
func CreateOnly(obj metav1.Object) string {
	return fluxMark(obj, FluxSSAAnnotation, "IfNotPresent")
}

// Ignored names the annotation, with its value, that has obj never
// applied (kustomize.toolkit.fluxcd.io/ssa: Ignore, read as KeptBy reads
// the marks, since it asks for less, never more), or "" when none does.
func Ignored(obj metav1.Object) string {
	return fluxMark(obj, FluxSSAAnnotation, "Ignore")
}

// fluxMark names Flux's mark key: want on obj, with the value it has, or
// "" when obj has none. Flux matches its marks in an object's annotations
// or its labels (fluxcd/pkg/ssa's AnyInMetadata), so both are read: the
// annotation first, then the label, named as one ("label key: value").
func fluxMark(obj metav1.Object, key, want string) string {
	if v := strings.TrimSpace(obj.GetAnnotations()[key]); strings.EqualFold(v, want) {
		return key + ": " + v
	}
	if v := strings.TrimSpace(obj.GetLabels()[key]); strings.EqualFold(v, want) {
		return "label " + key + ": " + v
	}
	return ""
}

// FluxForceAnnotation set to "enabled" has Flux recreate an object whose
// change the API server refuses in place, such as a Job whose image
// changed.
const FluxForceAnnotation = "kustomize.toolkit.fluxcd.io/force"

// RecreateMarked names the annotation, with its value, that asks for obj
// to be deleted and created anew when the API server refuses to change it
// in place, as spec.recreate asks for a whole add-on, or "" when none does:
// Flux's kustomize.toolkit.fluxcd.io/force: enabled, or Argo CD's sync
// option Force=true, which has Argo CD's client-side apply delete and
// create an object the API server refuses (kubectl apply --force), unless
// ServerSideApply=true makes it force field ownership instead. Unlike the
// marks that keep an object, these ask for a delete, so each is read no
// more loosely than its tool reads it, and Flux's more narrowly: Flux also
// takes its force mark from a label and in any case (fluxcd/pkg/ssa's
// AnyInMetadata, which fluxMark follows for the marks that keep an
// object), but Capstan reads only the annotation, exactly "enabled", since
// a mark read too loosely would delete an object no one meant to. Read too
// narrowly, it costs only a refused change, which the error says how to
// ask for. Argo CD's options are trimmed, as Argo CD trims them.
func RecreateMarked(obj metav1.Object) string {
	if obj.GetAnnotations()[FluxForceAnnotation] == "enabled" {
		return FluxForceAnnotation + ": enabled"
	}
	var force, serverSide bool
	for _, o := range strings.Split(obj.GetAnnotations()[ArgoSyncOptionsAnnotation], ",") {
		switch strings.TrimSpace(o) {
		case "Force=true":
			force = true
		case "ServerSideApply=true":
			serverSide = true
		}
	}
	if force && !serverSide {
		return ArgoSyncOptionsAnnotation + ": Force=true"
	}
	return ""
}

// Deletion is why Capstan would delete an object, which decides what in
// its annotations keeps it.
type Deletion int

const (
	// NoKeep keeps nothing: a restricted add-on's objects all go with it,
	// so a tenant's manifests cannot leave objects behind.
	NoKeep Deletion = iota
	// Pruning deletes what the render no longer holds.
	Pruning
	// Uninstalling deletes what the inventory holds, as the Addon goes.
	Uninstalling
	// Recreating deletes an object to create it anew with a change the
	// API server refuses in place; whatever keeps it from either of the
	// others keeps it from this too.
	Recreating
)

// KeptBy names the annotation, with its value, that keeps obj from the
// deletion d, or "" when nothing does. Each is read as its own tool reads
// it, the value in any case and with spaces around it ignored, so that
// manifests written for Helm, Flux, kapp or Argo CD keep what they meant
// to:
//   - helm.sh/resource-policy: keep keeps it from every deletion;
//   - kustomize.toolkit.fluxcd.io/prune: disabled, an annotation or a
//     label, keeps it from every deletion;
//   - kapp.k14s.io/delete-strategy: orphan keeps it from every deletion;
//   - argocd.argoproj.io/sync-options: Prune=false keeps it from a prune,
//     and Delete=false from an uninstall.
func KeptBy(obj metav1.Object, d Deletion) string {
	if d == NoKeep {
		return ""
	}
	a := obj.GetAnnotations()
	if v := strings.TrimSpace(a[ResourcePolicyAnnotation]); strings.EqualFold(v, "keep") {
		return ResourcePolicyAnnotation + ": " + v
	}
	if by := fluxMark(obj, FluxPruneAnnotation, "disabled"); by != "" {
		return by
	}
	if v := strings.TrimSpace(a[KappDeleteStrategyAnnotation]); strings.EqualFold(v, "orphan") {
		return KappDeleteStrategyAnnotation + ": " + v
	}
	var options []string
	if d != Uninstalling {
		options = append(options, "Prune=false")
	}
	if d != Pruning {
		options = append(options, "Delete=false")
	}
	if o := argoSyncOption(obj, options...); o != "" {
		return ArgoSyncOptionsAnnotation + ": " + o
	}
	return ""
}

// ConfirmPrune reports whether obj's manifests ask for a person's
// confirmation before a prune deletes it: Argo CD's sync option
// Prune=confirm, read as KeptBy reads the others. The plan waits for an
// approval of its hash then (plan.ConfirmPrune).
func ConfirmPrune(obj metav1.Object) bool {
	return argoSyncOption(obj, "Prune=confirm") != ""
}

// argoSyncOption returns the first of obj's Argo CD sync options that is
// one of want, in any case and with spaces around it ignored, or "".
func argoSyncOption(obj metav1.Object, want ...string) string {
	for _, o := range strings.Split(obj.GetAnnotations()[ArgoSyncOptionsAnnotation], ",") {
		o = strings.TrimSpace(o)
		for _, w := range want {
			if strings.EqualFold(o, w) {
				return o
			}
		}
	}
	return ""
}

// Spared is an object DeleteAll left running: another Addon holds it
// (Holder), an annotation keeps it (KeptBy, as KeptBy names it), or
// nothing shows that this add-on made it (NotOurs says why).
type Spared struct {
	Ref     capstanv1.ObjectRef
	Holder  string
	KeptBy  string
	NotOurs string
}

// maxDeleteTries bounds the reads and deletes of one object whose metadata
// keeps changing between the two.
const maxDeleteTries = 3

// Deleting says how DeleteAll deletes.
type Deleting struct {
	// Holder, when set, tells who holds an object: one another Addon
	// holds, or that nothing shows to be this add-on's, is left running
	// (spared).
	Holder Holder
	// Keep is the deletion whose marks (KeptBy) leave an object running.
	Keep Deletion
	// AwaitGone, when set, makes the deletes go in reverse sync waves,
	// highest first, as the waves were applied lowest first: after the
	// objects of a wave are deleted, AwaitGone returns once they are gone
	// (their finalizers done), and only then does the next wave go. The
	// custom resources of wave 1 are then finalized while the operator of
	// wave 0 still runs to do it. It is called with the wave next to go,
	// and the references deleted. Objects all in one wave, the most
	// common case, go at once, with no wait.
	AwaitGone func(ctx context.Context, next int32, deleted []capstanv1.ObjectRef) error
	// Confirming, set for a prune, holds back the delete of an object
	// marked to be pruned only with a person's confirmation
	// (ConfirmPrune) unless Confirmed holds its key: the plan that was
	// approved listed it so. One marked since the plan was made is left
	// running and in the inventory, neither done nor spared, for the next
	// plan to ask about.
	Confirming bool
	Confirmed  map[string]bool
	// Planned, when not nil, binds each delete to the object the plan
	// showed: the UID it read, by ObjectRef.Key, and none for an object
	// it found gone. An object read with another UID (deleted and created
	// anew under its name since, by a person or a restore) was never
	// shown; it is held as an unconfirmed one is, left running and in the
	// inventory for the next plan to show its delete.
	Planned map[string]types.UID
}

// Deleted is what DeleteAll did.
type Deleted struct {
	// Done holds the references it deleted, found gone, or found being
	// deleted already.
	Done []capstanv1.ObjectRef
	// Spared holds those it left running.
	Spared []Spared
	// Held holds those it did not delete for want of a confirmation
	// (Deleting.Confirming), or since they are not the objects the plan
	// showed (Deleting.Planned): they stay in the inventory.
	Held []capstanv1.ObjectRef
	// Requests counts the objects its own deletes removed or marked for
	// deletion: a retry that finds an object gone, or being deleted by an
	// earlier try, does not count it again. (Without a holder or a
	// deletion to keep objects from, nothing is read first, and each
	// delete sent counts.)
	Requests int
}

// DeleteAll deletes objects in the order given, skipping the never-delete
// kinds (CRDs and Namespaces among them, so nothing they hold goes first),
// in reverse waves with d.AwaitGone. With a holder, or with a deletion
// that annotations may keep objects from, each object's metadata is read
// first: an object that the holder says another Addon holds or is not
// this add-on's, or that KeptBy keeps from d.Keep, is left running
// (spared). The delete is bound to the
// resourceVersion read, so an object taken over or marked to keep
// meanwhile is read again, not deleted; one whose deletion has begun is
// not deleted again, and counts as done. The API server's refusal to
// delete a Secret has its message withheld (RefusedWrite); a failed
// read, of the object or by the holder, says what failed.
func (a *Applier) DeleteAll(ctx context.Context, refs []capstanv1.ObjectRef, d Deleting) (Deleted, error) {
	refs = slices.DeleteFunc(slices.Clone(refs), func(r capstanv1.ObjectRef) bool { return !Deletable(r) })
	var out Deleted
	if d.AwaitGone == nil || len(refs) < 2 {
		err := a.deleteEach(ctx, refs, nil, d, &out, metav1.DeletePropagationBackground)
		return out, err
	}
	// NOTE: each object's metadata is read once, for its wave, and the
	// delete binds to that read; the deletes without waves read it too.
	read := make(map[string]*metav1.PartialObjectMetadata, len(refs))
	var present []capstanv1.ObjectRef
	for _, r := range refs {
		m, err := a.ReadMetadata(ctx, r)
		if err != nil {
			return out, fmt.Errorf("reading %s: %w", r.Describe(), err)
		}
		if m == nil {
			out.Done = append(out.Done, r)
			continue
		}
		read[r.Key()] = m
		present = append(present, r)
	}
	waves := reverseWaves(present, read)
	for i, w := range waves {
		if i > 0 {
			// NOTE: a wave after a wait is read again before its deletes:
			// what was read before the wait has mostly changed since, and a
			// delete bound to it would only conflict and read again.
			read = nil
		}
		before, held := len(out.Done), len(out.Held)
		lower := i+1 < len(waves)
		// NOTE: a wave that a lower one waits for is deleted in the
		// foreground: it is gone only once what it owns is (a Deployment's
		// pods, an operator's children), so the wave below, which they may
		// still need, waits for them too, as Argo CD's waves do. The last
		// wave waits for nothing, and goes in the background, as Helm's
		// uninstall does.
		propagation := metav1.DeletePropagationBackground
		if lower {
			propagation = metav1.DeletePropagationForeground
		}
		if err := a.deleteEach(ctx, w.refs, read, d, &out, propagation); err != nil {
			// NOTE: the deletes this wave sent before the one that failed
			// were never awaited: as after a wait that fails, they stay in
			// the inventory, for the next prune to wait for them before
			// the waves below.
			if lower {
				out.Done = out.Done[:before]
			}
			return out, err
		}
		if len(out.Held) > held {
			// NOTE: an object held for a confirmation still runs, and
			// may need what the waves below it run (its operator): they
			// are held with it. The deletes this wave sent are not awaited
			// now, so they stay in the inventory with the held waves, for
			// the next prune to wait for them before it deletes those.
			for _, lw := range waves[i+1:] {
				out.Held = append(out.Held, lw.refs...)
			}
			if lower {
				out.Done = out.Done[:before]
			}
			return out, nil
		}
		deleted := out.Done[before:]
		if lower && len(deleted) > 0 {
			if err := d.AwaitGone(ctx, waves[i+1].number, deleted); err != nil {
				// NOTE: what is not gone yet is not done: it stays in the
				// inventory, so that the next prune or uninstall waits for
				// it again before the waves below it, not deleting them at
				// once as the only wave left. out.Requests keeps the
				// deletes sent: they began the deletions, and the retry,
				// which finds the objects being deleted, sends and counts
				// none again.
				out.Done = out.Done[:before]
				return out, err
			}
		}
	}
	return out, nil
}

// deleteWave is the objects of one wave, to delete together.
type deleteWave struct {
	number int32
	refs   []capstanv1.ObjectRef
}

// reverseWaves groups refs by the wave their live metadata puts them in,
// highest first, keeping the order within a wave.
func reverseWaves(refs []capstanv1.ObjectRef, read map[string]*metav1.PartialObjectMetadata) []deleteWave {
	byWave := map[int32][]capstanv1.ObjectRef{}
	var numbers []int32
	for _, r := range refs {
		w := Wave(read[r.Key()])
		if _, ok := byWave[w]; !ok {
			numbers = append(numbers, w)
		}
		byWave[w] = append(byWave[w], r)
	}
	slices.Sort(numbers)
	slices.Reverse(numbers)
	out := make([]deleteWave, 0, len(numbers))
	for _, n := range numbers {
		out = append(out, deleteWave{number: n, refs: byWave[n]})
	}
	return out
}

// deleteEach deletes refs, all of deletable kinds, one by one, with the
// metadata read already when read holds it, and adds what it did to out.
func (a *Applier) deleteEach(ctx context.Context, refs []capstanv1.ObjectRef, read map[string]*metav1.PartialObjectMetadata, d Deleting, out *Deleted, propagation metav1.DeletionPropagation) error {
	for _, r := range refs {
		if d.Holder == nil && d.Keep == NoKeep && !d.Confirming && d.Planned == nil && read == nil {
			sent, err := a.deleteServed(ctx, r, propagation)
			if err != nil {
				return fmt.Errorf("deleting %s: %w", r.Describe(), err)
			}
			if sent {
				out.Requests++
			}
			out.Done = append(out.Done, r)
			continue
		}
		sp, sent, err := a.deleteUnlessSpared(ctx, r, read[r.Key()], d, propagation)
		switch {
		case errors.Is(err, errUnconfirmed), errors.Is(err, errNotPlanned):
			out.Held = append(out.Held, r)
		case err != nil:
			return fmt.Errorf("deleting %s: %w", r.Describe(), err)
		case sp != nil:
			out.Spared = append(out.Spared, *sp)
		default:
			out.Done = append(out.Done, r)
			if sent {
				out.Requests++
			}
		}
	}
	return nil
}

// ReadMetadata reads an object's metadata, or nil when it is gone (or its
// kind is). The metadata carries the API version it was read by, which a
// delete of it goes through.
//
// The inventory holds an object by the API version it was applied with,
// and the cluster may stop serving that version while the object runs on:
// a CRD that serves only v1 now, an API server upgraded past a beta. That
// version then maps to no kind, or, while the client's REST mapper has
// not seen the change, the API server answers 404: both read as if the
// object were gone, and a prune would drop it from the inventory still
// running, for no uninstall to find. So an object not found by its own
// version is looked for by the versions its kind is served by now
// (servedVersions), and is gone only when its kind is served by none, or
// a served version finds no object either. A kind the REST mapper maps to
// no version is served by none only when discovery says so
// (discoveredVersions): an aggregated API whose server is down maps to
// nothing too, while its objects still exist.
func (a *Applier) ReadMetadata(ctx context.Context, r capstanv1.ObjectRef) (*metav1.PartialObjectMetadata, error) {
	m, err := a.readMetadata(ctx, r, r.APIVersion)
	if !versionGone(err) {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return m, err
	}
	versions, err := a.servedVersions(ctx, r, meta.IsNoMatchError(err))
	if err != nil {
		return nil, err
	}
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	for _, v := range versions {
		m, err := a.readMetadata(ctx, r, schema.GroupVersion{Group: gv.Group, Version: v}.String())
		if !isGone(err) {
			return m, err
		}
	}
	return nil, nil
}

// readMetadata reads r's metadata by apiVersion.
func (a *Applier) readMetadata(ctx context.Context, r capstanv1.ObjectRef, apiVersion string) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, r.Kind))
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, m); err != nil {
		return nil, err
	}
	return m, nil
}

// isGone reports whether err says that an object is not found by the
// version asked, or that the version maps to no kind.
func isGone(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// versionGone reports whether err says that the version asked may no
// longer be served: it maps to no kind, or the API server found no
// resource at its path. The API server answers an object that is not
// there with a Status naming it; a path it does not serve gets its plain
// "404 page not found", which client-go reports as an unexpected server
// response. Only then is the object looked for by other versions: a
// prune of objects that are simply gone costs no more requests than it did.
func versionGone(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	if d == nil || d.Name == "" {
		return true
	}
	for _, c := range d.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return true
		}
	}
	return false
}

// servedVersions returns the versions, other than r's own, that r's kind
// is served by now, to look for r by when its own version did not find it;
// none when the kind is served by no version at all. The REST mapper of
// controller-runtime keeps serving a version from its cache after the API server stopped
// serving it, with no word of a version added since: for a custom
// resource, the CRD is read, and its served versions are the answer (a
// version the mapper lacks it loads when asked for it). When the CRD says
// that r's own version is served, a 404 (ownNoMatch false) was the object
// itself missing, and there is no other version to ask; a version that
// mapped to no kind (ownNoMatch) is an error: the mapper is behind the
// CRD, and the next try maps it.
func (a *Applier) servedVersions(ctx context.Context, r capstanv1.ObjectRef, ownNoMatch bool) ([]string, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return nil, nil
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: r.Kind}
	mapper := a.Client.RESTMapper()
	if mapper == nil {
		return nil, nil
	}
	mappings, err := mapper.RESTMappings(gk)
	if err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("finding the versions the cluster serves %s by: %w", r.Kind, err)
	}
	if len(mappings) == 0 {
		return a.discoveredVersions(ctx, r, gv, gk)
	}
	var versions []string
	for _, m := range mappings {
		versions = append(versions, m.GroupVersionKind.Version)
	}
	// NOTE: a CRD's group holds a dot; the API server's own groups of
	// none (apps, batch) have no CRD to read.
	if strings.Contains(gk.Group, ".") {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		switch err := a.Client.Get(ctx, client.ObjectKey{Name: mappings[0].Resource.Resource + "." + gk.Group}, crd); {
		case err == nil && crd.Spec.Group == gk.Group && crd.Spec.Names.Kind == gk.Kind:
			versions = versions[:0]
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				if v.Name == gv.Version {
					if ownNoMatch {
						// NOTE: never gone: the object may run on by this
						// very version, and a prune that dropped it, or an
						// uninstall that finished, would leave it for ever.
						return nil, fmt.Errorf("the CustomResourceDefinition of %s serves %s, which the client did not map yet; the next try reads it again", r.Kind, gv)
					}
					return nil, nil
				}
				versions = append(versions, v.Name)
			}
		case err == nil, isGone(err), apierrors.IsForbidden(err):
			// NOTE: not a custom resource, or a CRD this identity may not
			// read: the mapper's versions are all there is to go by.
		default:
			return nil, fmt.Errorf("reading the CustomResourceDefinition of %s: %w", r.Kind, err)
		}
	}
	return slices.DeleteFunc(slices.Compact(versions), func(v string) bool { return v == gv.Version }), nil
}

// discoveredVersions returns the versions, other than r's own, that
// discovery lists r's kind in, when the REST mapper maps the kind to none;
// none when the API server serves no such kind. The mapper cannot tell a
// kind that is gone from one whose group discovery cannot list now: an
// aggregated API whose APIService is unavailable is listed Stale, with no
// resources, and controller-runtime's mapper answers that as no match. Its
// objects live on in the server behind it, and an entry dropped from the
// inventory then, or an uninstall finished, would leave them for ever. So
// only a group that discovery does not list, or whose every version it
// lists in full without the kind, counts as gone; a group it lists but
// cannot serve now is an error, and the prune or uninstall tries again.
func (a *Applier) discoveredVersions(ctx context.Context, r capstanv1.ObjectRef, gv schema.GroupVersion, gk schema.GroupKind) ([]string, error) {
	if a.Discovery == nil {
		return nil, nil
	}
	groups, resources, failed, err := a.Discovery.GroupsAndMaybeResourcesWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the API server's discovery whether it still serves %s, which the client maps to no version: %w", r.Kind, err)
	}
	versions, err := kindVersions(ctx, gk, groups, resources, failed, a.Discovery.ServerResourcesForGroupVersionWithContext)
	if err != nil {
		return nil, err
	}
	if slices.Contains(versions, gv.Version) {
		// NOTE: the mapper is behind discovery: the next try maps it.
		return nil, fmt.Errorf("the API server's discovery lists %s in %s, which the client did not map yet; the next try reads it again", r.Kind, gv)
	}
	return versions, nil
}

// kindVersions is the decision of discoveredVersions, from what discovery
// returned: the versions of gk's group that list the kind, or an error when
// a version of the group could not be listed (failed, or fetch, which lists
// one version when discovery is not aggregated and returned no resources).
func kindVersions(ctx context.Context, gk schema.GroupKind, groups *metav1.APIGroupList, resources map[schema.GroupVersion]*metav1.APIResourceList,
	failed map[schema.GroupVersion]error, fetch func(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error)) ([]string, error) {
	var group *metav1.APIGroup
	if groups != nil {
		for i := range groups.Groups {
			if groups.Groups[i].Name == gk.Group {
				group = &groups.Groups[i]
			}
		}
	}
	var down []string
	for gv, err := range failed {
		if gv.Group == gk.Group {
			down = append(down, fmt.Sprintf("%s: %v", gv, err))
		}
	}
	if len(down) > 0 {
		slices.Sort(down)
		return nil, fmt.Errorf("the API server lists the API group %q but cannot serve it now (%s), so whether the %s is still there cannot be told; it stays in the inventory, and the next try asks again: make the group's APIService available, or remove it", gk.Group, strings.Join(down, "; "), gk.Kind)
	}
	if group == nil {
		return nil, nil // the API server serves no such group
	}
	var versions []string
	for _, v := range group.Versions {
		gv := schema.GroupVersion{Group: gk.Group, Version: v.Version}
		list := resources[gv]
		if resources == nil {
			var err error
			switch list, err = fetch(ctx, gv.String()); {
			case apierrors.IsNotFound(err):
				continue // the version went since the group was listed
			case err != nil:
				return nil, fmt.Errorf("the API server lists the API group %q but cannot list the resources of %s now, so whether the %s is still there cannot be told: %w", gk.Group, gv, gk.Kind, err)
			}
		}
		if list != nil && slices.ContainsFunc(list.APIResources, func(res metav1.APIResource) bool {
			return res.Kind == gk.Kind && !strings.Contains(res.Name, "/")
		}) {
			versions = append(versions, v.Version)
		}
	}
	return versions, nil
}

// deleteServed deletes r by its own version, or, when that finds no
// object, by a version its kind is served by now (ReadMetadata). sent
// reports whether a delete was sent to an object found. A StatefulSet is
// read first, and deleted as deleteUnlessSpared deletes one, with no claim
// owned by it.
func (a *Applier) deleteServed(ctx context.Context, r capstanv1.ObjectRef, propagation metav1.DeletionPropagation) (sent bool, err error) {
	if releases(r, propagation) {
		_, sent, err := a.deleteUnlessSpared(ctx, r, nil, Deleting{}, propagation)
		return sent, err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind))
	obj.SetNamespace(r.Namespace)
	obj.SetName(r.Name)
	err = a.Client.Delete(ctx, obj, client.PropagationPolicy(propagation))
	if !versionGone(err) {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, RefusedWrite(r, err)
	}
	m, err := a.ReadMetadata(ctx, r)
	if err != nil || m == nil {
		return false, err
	}
	uid := m.GetUID()
	err = a.Client.Delete(ctx, m, client.Preconditions{UID: &uid}, client.PropagationPolicy(propagation))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, RefusedWrite(r, err)
}

// errUnconfirmed is an object held back from a prune for want of a
// confirmation (Deleting.Confirming).
var errUnconfirmed = errors.New("marked Prune=confirm since the plan was approved")

// errNotPlanned is an object held back from a prune since it is not the one
// the plan showed (Deleting.Planned).
var errNotPlanned = errors.New("created anew under its name since the plan was made")

// deleteUnlessSpared deletes one object unless d's holder names another
// owner or an annotation keeps it from d.Keep, and says which. m is its
// metadata when read already, or nil. sent reports whether its delete
// removed the object or began its deletion: not when it was gone, or its
// deletion had begun already (a retry of a deletion that waited for its
// finalizers sends no delete again).
//
// A StatefulSet is deleted only once no PersistentVolumeClaim is owned by
// it (releaseClaims): its claims outlive it, as every claim outlives
// Capstan's deletes.
func (a *Applier) deleteUnlessSpared(ctx context.Context, r capstanv1.ObjectRef, m *metav1.PartialObjectMetadata, d Deleting, propagation metav1.DeletionPropagation) (spared *Spared, sent bool, err error) {
	for range maxDeleteTries {
		if m == nil {
			if m, err = a.ReadMetadata(ctx, r); err != nil || m == nil {
				return nil, false, err
			}
		}
		if by := KeptBy(m, d.Keep); by != "" {
			return &Spared{Ref: r, KeptBy: by}, false, nil
		}
		if d.Holder != nil {
			h, err := d.Holder(ctx, r, m)
			if err != nil {
				return nil, false, err
			}
			if h != (Hold{}) {
				return &Spared{Ref: r, Holder: h.Addon, NotOurs: h.NotOurs}, false, nil
			}
		}
		if d.Planned != nil && d.Planned[r.Key()] != m.GetUID() {
			// NOTE: a plan's approval covers the delete of the UID it
			// read (its hash holds it), not of whatever has the name now.
			return nil, false, errNotPlanned
		}
		if d.Confirming && !d.Confirmed[r.Key()] && ConfirmPrune(m) && m.DeletionTimestamp.IsZero() {
			// NOTE: read at the delete, as KeptBy is: a mark set since
			// the plan was approved is honoured too.
			return nil, false, errUnconfirmed
		}
		if !m.DeletionTimestamp.IsZero() && !slices.Contains(m.GetFinalizers(), metav1.FinalizerOrphanDependents) {
			// NOTE: a deletion that orphans the object's dependents is
			// sent the add-on's delete again, which deletes them too. One
			// in the background is not turned to the foreground: the
			// garbage collector takes foregroundDeletion off an object
			// whose children are gone while its own finalizer holds it,
			// and a delete sent again at every look of the wait would put
			// it back, and count the object again.
			return nil, false, nil
		}
		if releases(r, propagation) {
			changed, err := a.releaseClaims(ctx, r, m)
			switch {
			case errors.Is(err, errChangedWhileReleasing), err == nil && changed:
				// NOTE: read again, and checked again, before the delete,
				// which binds to a read that shows no claim owned.
				m = nil
				continue
			case err != nil:
				return nil, false, err
			}
		}
		uid, rv := m.GetUID(), m.GetResourceVersion()
		err := a.Client.Delete(ctx, m, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(propagation))
		switch {
		case apierrors.IsNotFound(err):
			return nil, false, nil
		case apierrors.IsConflict(err):
			m = nil // changed since it was read: read it again
			continue
		}
		return nil, err == nil, RefusedWrite(r, err)
	}
	return nil, false, fmt.Errorf("it changed %d times between its read and its delete; the next sync tries again", maxDeleteTries)
}

// releases reports whether r's delete with propagation must release its
// claims first (releaseClaims): r is a StatefulSet, and its dependents
// are deleted with it. An orphaning delete has the garbage collector take
// the StatefulSet's owner references off its claims itself.
func releases(r capstanv1.ObjectRef, propagation metav1.DeletionPropagation) bool {
	return IsStatefulSet(r) && propagation != metav1.DeletePropagationOrphan
}

// IsStatefulSet reports whether r names a StatefulSet (apps, any version).
func IsStatefulSet(r capstanv1.ObjectRef) bool {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	return err == nil && (schema.GroupKind{Group: gv.Group, Kind: r.Kind}) == statefulSetGK
}
