package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Sequence is one apply of an approved plan, in Capstan's order:
//
//  1. the inventory grows to hold every rendered object, and is saved
//     before anything is applied, so that a crash orphans nothing;
//  2. on an install, CRDs (waited for until Established and served) and
//     Namespaces, which the pre-install hooks may need, as Helm does;
//     then the objects the plan could not dry-run before those existed
//     are checked, and one the API server refuses stops the sequence
//     with nothing else applied (see verify);
//  3. the pre hooks;
//  4. every other changed object, by server-side apply, wave by wave
//     (capstan.dev/sync-wave): before a wave, every object of the waves
//     before it, changed or not, is awaited until it is Current;
//  5. the prune, which never deletes the never-delete kinds;
//  6. the apply is recorded, then the post hooks run.
//
// On an upgrade CRDs and Namespaces wait for the pre-upgrade hooks like
// everything else: a migration hook may need the old CRD. The hooks and
// the status checkpoints are the caller's callbacks.
type Sequence struct {
	Applier *Applier
	// Inventory is the add-on's inventory before this apply.
	Inventory []capstanv1.ObjectRef
	// Objects are every object to apply; Changed are those the plan
	// creates or updates.
	Objects, Changed []*unstructured.Unstructured
	// Install puts CRDs and Namespaces before the pre hooks.
	Install bool
	// Unverified are the changed objects that the plan could not dry-run:
	// their Namespace or CRD is among the changed objects. On an install
	// they are checked once those are applied (see verify).
	Unverified []*unstructured.Unstructured
	// HasPreHooks says the pre hooks have hooks to run. They must run
	// before anything but CRDs and Namespaces is applied, as Helm runs
	// them, so then every unverified object is dry-run.
	HasPreHooks bool
	// Creates are the changed objects the plan creates: none of them
	// existed when it previewed. One of a wave applied after a wait for
	// the waves before it, or of the first wave once pre hooks ran, is
	// read before that wave is applied (see applyWaves).
	Creates map[*unstructured.Unstructured]bool
	// Recreate are the changed objects the plan deletes and creates anew,
	// since the API server refuses to change them in place
	// (spec.recreate), each with the UID of the object the plan saw.
	Recreate map[*unstructured.Unstructured]types.UID
	// Adopted are the objects the plan adopts without a change, each with
	// the UID of the live object it saw and the fields Capstan's apply of
	// it would own; OwnerLabels are the add-on's owner labels. Nothing of
	// them is applied but those labels (Applier.LabelOwner), after the pre
	// hooks: that marks each as this add-on's, for its prune and uninstall
	// (NotOurs) and for every other add-on, which is then refused it as
	// another's. Then the fields are made Capstan's (ClaimAdopted), values
	// unchanged, so that a later version that leaves one out removes it.
	Adopted     map[capstanv1.ObjectRef]Adoption
	OwnerLabels map[string]string
	// Refused words the API server's refusal of an object for the
	// message, withholding what may quote a value: of a dry run, and, for
	// a Secret, of its apply, of the apply of its owner labels when it is
	// adopted, or of the delete and the apply that recreate it. Nil uses
	// the error as it is. (A prune's refusal of a Secret is withheld
	// whatever this is: DeleteAll withholds every one.)
	Refused Refused
	// KeepOwners, when set, names the objects whose fields are never
	// handed over from a former deployer (handOver): those a rule of
	// spec.ignore selects, whose ignored fields the apply sends as they
	// run, and which stay their owners' when the rule goes.
	KeepOwners func(obj *unstructured.Unstructured) bool
	// Prune are the objects to delete.
	Prune []capstanv1.ObjectRef
	// Keep is Pruning to honour what keeps an object from a prune (KeptBy):
	// an object marked to keep is left running and leaves the inventory.
	// Kept are those the plan found marked already: they leave the
	// inventory with no delete.
	Keep Deletion
	Kept []capstanv1.ObjectRef
	// Confirmed are the objects the prune deletes that the approved plan
	// listed as marked Prune=confirm; any other found so marked at its
	// delete is held back (Deleting.Confirming) and stays in the
	// inventory (Result.Held).
	Confirmed []capstanv1.ObjectRef
	// PruneUIDs, when not nil, are the UIDs of the objects to delete as
	// the plan read them, by ObjectRef.Key (none for one it found gone):
	// a delete goes only to that object (Deleting.Planned), and one
	// created anew under its name since is held (Result.Held).
	PruneUIDs map[string]types.UID
	// Holder, when set, tells who holds an object to prune: one that
	// another Addon holds, or that nothing shows to be this add-on's
	// (NotOurs), is left running and dropped from the inventory.
	Holder Holder
	// AwaitGone, when set, prunes in reverse sync waves (Deleting).
	AwaitGone func(ctx context.Context, next int32, deleted []capstanv1.ObjectRef) error
	// PreEvent and PostEvent name the hook events, for errors.
	PreEvent, PostEvent string
	// PreHooks and PostHooks run the hooks of those events.
	PreHooks, PostHooks func(ctx context.Context) error
	// SaveInventory saves the grown inventory before anything is applied.
	SaveInventory func(ctx context.Context, inventory []capstanv1.ObjectRef) error
	// OnApplied is called with each applied object and the API server's
	// answer, the live object.
	OnApplied func(obj, live *unstructured.Unstructured)
	// CRDsApplied is called once changed CRDs are applied: new API
	// versions change what the next render sees.
	CRDsApplied func()
	// Applied records the apply before the post hooks run, so that a
	// controller that stops while they run does not run the pre hooks
	// again.
	Applied func(ctx context.Context, r Result) error
	// AwaitWave waits until every one of objs, the objects of the waves
	// before wave, is Current, or returns why not. nothingApplied says
	// that this sequence has applied nothing, labelled no adopted object
	// and run no hook yet, so a wait may end the sync instead, to be taken
	// up by the next one: its plan is the same.
	// Nil does not wait.
	AwaitWave func(ctx context.Context, wave int32, objs []*unstructured.Unstructured, nothingApplied bool) error
	// Step, when set, is called before each step by name ("pre-hooks",
	// "apply", "prune", "post-hooks"); an error stops the sequence. Tests
	// use it to stop between steps.
	Step func(ctx context.Context, name string) error
}

// Result is what a sequence did, also when it stopped with an error.
type Result struct {
	// Applied counts the objects applied.
	Applied int
	// Pruned are the objects deleted, or found gone.
	Pruned []capstanv1.ObjectRef
	// PruneRequests counts those the prune's own deletes removed or
	// began to delete (Deleted.Requests).
	PruneRequests int
	// Held are the objects the prune did not delete, since they were
	// marked Prune=confirm after the plan was approved, or are not the
	// objects the plan showed (PruneUIDs); they stay in the inventory.
	Held []capstanv1.ObjectRef
	// Spared are the objects the prune left to the owner that holds them.
	Spared []Spared
	// Inventory is the add-on's inventory now.
	Inventory []capstanv1.ObjectRef
}

// Run applies the sequence.
func (q Sequence) Run(ctx context.Context) (Result, error) {
	if q.KeepOwners != nil {
		ctx = context.WithValue(ctx, keepOwnersKey{}, q.KeepOwners)
	}
	res := Result{Inventory: q.Inventory}
	rendered := make([]capstanv1.ObjectRef, 0, len(q.Objects))
	for _, o := range q.Objects {
		rendered = append(rendered, capstanv1.RefOf(o))
	}
	if union := Union(q.Inventory, rendered); !slices.Equal(union, q.Inventory) {
		res.Inventory = union
		if q.SaveInventory != nil {
			if err := q.SaveInventory(ctx, union); err != nil {
				return res, err
			}
		}
	}
	var first, rest []*unstructured.Unstructured
	if q.Install {
		// NOTE: CRDs and Namespaces run nothing, so they go first on an
		// install whatever their wave: the pre hooks and the dry runs of
		// the objects in them need them.
		crds, namespaces, others := Split(q.Changed)
		first, rest = append(crds, namespaces...), others
	} else {
		rest = q.Changed
	}
	rest = ByWave(rest)
	onApplied := func(obj, live *unstructured.Unstructured) {
		res.Applied++
		if q.OnApplied != nil {
			q.OnApplied(obj, live)
		}
	}
	if err := q.Applier.ordered(ctx, first, q.Recreate, onApplied, q.Refused); err != nil {
		return res, err
	}
	if q.Install {
		early, err := q.verify(ctx, len(first) > 0, rest, &res, onApplied)
		if err != nil {
			return res, err
		}
		rest = without(rest, early)
	}
	if err := q.step(ctx, "pre-hooks"); err != nil {
		return res, err
	}
	if err := run(ctx, q.PreHooks); err != nil {
		if hooksRecorded(err) || noHookFailed(err) {
			// NOTE: the hooks succeeded and are recorded, or the run
			// stopped before a hook started: the error says so, and the
			// next sync goes on from there.
			return res, err
		}
		what := "nothing was applied"
		if len(first) > 0 {
			what = "nothing but CRDs and Namespaces was applied"
		}
		return res, fmt.Errorf("the %s hook failed, so %s: %w", q.PreEvent, what, err)
	}
	if err := q.step(ctx, "apply"); err != nil {
		return res, err
	}
	if err := q.labelAdopted(ctx); err != nil {
		return res, err
	}
	if err := q.applyWaves(ctx, rest, &res, onApplied); err != nil {
		return res, err
	}
	if crds, _, _ := Split(q.Changed); len(crds) > 0 && q.CRDsApplied != nil {
		q.CRDsApplied()
	}
	if err := q.step(ctx, "prune"); err != nil {
		return res, err
	}
	confirmed := make(map[string]bool, len(q.Confirmed))
	for _, r := range q.Confirmed {
		confirmed[r.Key()] = true
	}
	deleted, err := q.Applier.DeleteAll(ctx, q.Prune, Deleting{Holder: q.Holder, Keep: q.Keep, AwaitGone: q.AwaitGone, Confirming: true, Confirmed: confirmed, Planned: q.PruneUIDs})
	res.Pruned, res.Spared, res.PruneRequests, res.Held = deleted.Done, deleted.Spared, deleted.Requests, deleted.Held
	res.Inventory = Subtract(res.Inventory, deleted.Done)
	res.Inventory = Subtract(res.Inventory, q.Kept)
	for _, sp := range deleted.Spared {
		res.Inventory = Subtract(res.Inventory, []capstanv1.ObjectRef{sp.Ref})
	}
	if err != nil {
		return res, err
	}
	if err := q.step(ctx, "post-hooks"); err != nil {
		return res, err
	}
	if q.Applied != nil {
		if err := q.Applied(ctx, res); err != nil {
			return res, err
		}
	}
	if err := run(ctx, q.PostHooks); err != nil {
		if hooksRecorded(err) || noHookFailed(err) {
			return res, err // they succeeded and are recorded, or none failed
		}
		// NOTE: the objects stay applied. The next sync of this render
		// runs only this event's hooks again; a new render is an upgrade.
		return res, fmt.Errorf("the %s hook failed; the objects are applied, and the next sync runs the %s hooks again: %w", q.PostEvent, q.PostEvent, err)
	}
	return res, nil
}

// labelAdopted applies the owner labels to the objects adopted without a
// change, in a stable order.
func (q Sequence) labelAdopted(ctx context.Context) error {
	refs := slices.Collect(maps.Keys(q.Adopted))
	Sort(refs)
	for _, ref := range refs {
		if err := q.Applier.LabelOwner(ctx, ref, q.Adopted[ref].UID, q.OwnerLabels); err != nil {
			// NOTE: the apply of the labels alone is an update of the whole
			// object to an admission policy, which may quote a Secret's data.
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(ref.APIVersion)
			obj.SetKind(ref.Kind)
			return fmt.Errorf("marking the adopted %s as this add-on's with its labels (nothing else of it changes): %w; the next sync tries again", ref.Describe(), withheld(obj, err, q.Refused))
		}
		// NOTE: the labels make the object this add-on's whatever comes
		// of the fields: a claim that fails leaves them co-owned, as an
		// adoption did before, and the next apply of the object hands
		// over what it applies (handOver).
		if err := q.Applier.ClaimAdopted(ctx, ref, q.Adopted[ref].UID, q.Adopted[ref].Fields); err != nil {
			log.FromContext(ctx).Info("taking over the fields of an adopted object failed; they stay co-owned until its next apply", "object", ref.Describe(), "error", RefusedWrite(ref, err).Error())
		}
	}
	return nil
}

// Adoption is an object a plan adopts without a change: the UID of the
// live object it saw, and the fields that the dry run of Capstan's apply
// showed it would own (nil when no dry run was made).
type Adoption struct {
	UID    types.UID
	Fields *metav1.FieldsV1
}

// applyWaves applies the changed objects, sorted by ByWave, wave by wave,
// awaiting before each wave what waveSteps says. Before a wave that was
// awaited, and before the first one when pre hooks ran, the objects of it
// that the plan creates are read (stillMissing).
func (q Sequence) applyWaves(ctx context.Context, sorted []*unstructured.Unstructured, res *Result, onApplied func(obj, live *unstructured.Unstructured)) error {
	for i, w := range waveSteps(sorted, q.Objects) {
		if len(w.await) > 0 && q.AwaitWave != nil {
			// NOTE: pre hooks that ran count as applied: the next sync
			// would not run them again, and so would plan another plan. So
			// do the owner labels written on adopted objects: the next plan
			// adopts nothing, its hash is not the one approved, and a
			// manual sync would wait for a second approval.
			if err := q.AwaitWave(ctx, w.number, w.await, res.Applied == 0 && !q.HasPreHooks && len(q.Adopted) == 0); err != nil {
				return err
			}
			if err := q.stillMissing(ctx, w.objects, "while the sync waited for the sync waves before it"); err != nil {
				return err
			}
		} else if i == 0 && q.HasPreHooks {
			// NOTE: the pre hooks may run for minutes (a migration), and
			// anyone may create an object of the first wave meanwhile, as
			// during a wait for a wave.
			if err := q.stillMissing(ctx, w.objects, "while the sync ran its "+q.PreEvent+" hooks"); err != nil {
				return err
			}
		}
		if err := q.Applier.ordered(ctx, w.objects, q.Recreate, onApplied, q.Refused); err != nil {
			return err
		}
	}
	return nil
}

// stillMissing makes sure that the objects of a wave that the plan
// creates, none of which existed when it previewed, are still missing, or
// carry this add-on's owner labels, before the wave is applied: the apply
// forces ownership of every field, so one that someone created meanwhile
// (while, as when says, the sync waited for the waves before it, where an
// operator of an earlier wave makes it within spec.healthTimeout, or ran
// its pre hooks) would be taken over with no adoption gate to pass. It
// reads only those, and only for a wave that was awaited or that follows
// pre hooks, so the first wave of a sync without pre hooks, and so an
// add-on without waves or hooks, costs no request more.
func (q Sequence) stillMissing(ctx context.Context, objs []*unstructured.Unstructured, when string) error {
	if len(q.OwnerLabels) == 0 {
		return nil
	}
	for _, obj := range objs {
		if !q.Creates[obj] {
			continue
		}
		ref := capstanv1.RefOf(obj)
		// Its labels are all this reads: metadata alone, not a large
		// ConfigMap's or custom resource's whole body.
		live, err := q.Applier.readMetadata(ctx, ref, ref.APIVersion)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apimeta.IsNoMatchError(err):
			// NOTE: its kind is not served yet; the apply says so.
			continue
		case err != nil:
			return fmt.Errorf("reading %s, which the plan creates, before its sync wave: %w", ref.Describe(), err)
		case labels.SelectorFromSet(q.OwnerLabels).Matches(labels.Set(live.GetLabels())):
			continue
		}
		return fmt.Errorf("%s was created by someone else %s, so it is not taken over by this apply: the next sync plans it again, and adopts it only as spec.adopt says", ref.Describe(), when)
	}
	return nil
}

// verify makes sure the API server takes every object the plan could not
// dry-run, now that their Namespaces and CRDs exist, before anything else is
// applied: an object refused half-way through the apply would leave the
// rest of the add-on running without it.
//
// With no pre hooks to run first, the inert objects among them (see Inert)
// are applied at once, with no dry run: in a Namespace created a moment
// ago they do nothing until the rest of the add-on arrives, and an apply
// costs the API server what a dry run would, so the dry run would double
// the work. If one is refused, those this install created are deleted
// again. Every other object is dry-run, but for one: when such objects are
// all the apply has left to do, the first of them in the apply's order is
// applied with no dry run, once the others have passed theirs; its apply is
// its own check, as nothing of the add-on that runs was applied before it.
// If it is refused, nothing ran, and the inert objects are deleted again as
// above. It returns the objects it applied.
func (q Sequence) verify(ctx context.Context, firstApplied bool, rest []*unstructured.Unstructured, res *Result, onApplied func(obj, live *unstructured.Unstructured)) ([]*unstructured.Unstructured, error) {
	// NOTE: only objects of the lowest wave may go ahead of the rest; a
	// later wave waits for the waves before it. CRDs and Namespaces are
	// applied by now, whatever their wave.
	lowest, waves := int32(0), false
	for _, obj := range q.Objects {
		if gk := obj.GroupVersionKind().GroupKind(); gk == crdGK || gk == namespaceGK {
			continue
		}
		if w := Wave(obj); !waves || w < lowest {
			lowest, waves = w, true
		}
	}
	firstWave := func(obj *unstructured.Unstructured) bool { return Wave(obj) == lowest }
	var early, dry []*unstructured.Unstructured
	for _, obj := range q.Unverified {
		if !q.HasPreHooks && Inert(obj) && firstWave(obj) {
			early = append(early, obj)
		} else {
			dry = append(dry, obj)
		}
	}
	var first *unstructured.Unstructured
	if left := without(rest, early); !q.HasPreHooks && len(dry) > 0 && sameObjects(left, dry) && firstWave(left[0]) {
		first, dry = left[0], without(dry, left[:1])
	}
	var made []created
	refused := func(obj *unstructured.Unstructured, how string, err error) error {
		msg := err.Error()
		if q.Refused != nil {
			msg = q.Refused(obj, err)
		}
		what := "nothing was applied"
		if firstApplied {
			what = "nothing but CRDs and Namespaces was applied"
		}
		// NOTE: a request the API server could not take for a moment (a
		// webhook it failed to call, a 503, a 429) is no refusal, and is
		// not worded as one: the controller retries it in its grace.
		did := "refused"
		if Transient(err) {
			did = "could not take"
		}
		if len(made) > 0 {
			gone, uerr := q.Applier.undo(ctx, made)
			res.Inventory = Subtract(res.Inventory, gone)
			res.Applied -= len(gone)
			if uerr != nil {
				// NOTE: they stay in the inventory, so nothing is orphaned;
				// the next sync applies or prunes them.
				return &installError{err: err, msg: fmt.Sprintf("the API server %s %s %s %s: %s; deleting what this install had created of the add-on failed, so some of it stays applied: %v",
					did, obj.GetKind(), objectName(obj), how, msg, uerr)}
			}
		}
		return &installError{err: err, msg: fmt.Sprintf("the API server %s %s %s %s, so %s: %s", did, obj.GetKind(), objectName(obj), how, what, msg)}
	}
	// NOTE: applyOnce, never ApplyLive: these objects were planned as
	// creates, so one that exists by now (a Job an operator made in a
	// Namespace created a moment ago) is no Job of this add-on's to
	// delete for a changed pod template; its refusal stops the install.
	for _, obj := range early {
		live, err := q.Applier.applyAlone(ctx, obj)
		if err != nil {
			return nil, refused(obj, "when it was applied", err)
		}
		// NOTE: judged before the hand-over, which may drop the entry of
		// whoever made the object meanwhile.
		if createdNow(live) {
			made = append(made, created{ref: capstanv1.RefOf(obj), uid: live.GetUID()})
		}
		onApplied(obj, q.Applier.handOver(ctx, live))
	}
	for _, obj := range dry {
		if _, err := q.Applier.DryRun(ctx, obj); err != nil {
			return nil, refused(obj, "in a dry run", err)
		}
	}
	if first != nil {
		live, err := q.Applier.applyOnce(ctx, first)
		if err != nil {
			return nil, refused(first, "when it was applied", err)
		}
		onApplied(first, live)
		early = append(early, first)
	}
	return early, nil
}

// installError is verify's error for an object of an install the API
// server did not take, with a message worded by Sequence.Refused that
// names the undo's error too when that failed. It unwraps to the apply's
// or dry run's own error alone, so that a caller judges the install by
// the API server's answer to it (a refusal fails at once; a webhook it
// could not call, for a moment, is retried) and never by the undo's
// delete.
type installError struct {
	msg string
	err error
}

func (e *installError) Error() string { return e.msg }
func (e *installError) Unwrap() error { return e.err }

// sameObjects reports whether a and b hold the same pointers, in any order.
func sameObjects(a, b []*unstructured.Unstructured) bool {
	return len(a) == len(b) && len(without(a, b)) == 0
}

// without returns objs without those in drop, which are the same pointers.
func without(objs, drop []*unstructured.Unstructured) []*unstructured.Unstructured {
	if len(drop) == 0 {
		return objs
	}
	skip := make(map[*unstructured.Unstructured]bool, len(drop))
	for _, o := range drop {
		skip[o] = true
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if !skip[o] {
			out = append(out, o)
		}
	}
	return out
}

func objectName(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func (q Sequence) step(ctx context.Context, name string) error {
	if q.Step == nil {
		return nil
	}
	return q.Step(ctx, name)
}

// run runs an optional callback.
func run(ctx context.Context, f func(context.Context) error) error {
	if f == nil {
		return nil
	}
	return f(ctx)
}

// hooksRecorded reports whether err says that an event's hooks all
// succeeded and were recorded done, and only a delete after that failed
// (hooks.CleanUpError): no hook failed, and none runs again.
func hooksRecorded(err error) bool {
	var r interface{ HooksRecorded() bool }
	return errors.As(err, &r) && r.HooksRecorded()
}

// noHookFailed reports whether err stopped a run of hooks with none
// failed, such as a run that did not start its next hook because the
// caller could not record it first (hooks.ProgressError).
func noHookFailed(err error) bool {
	var r interface{ NoHookFailed() bool }
	return errors.As(err, &r) && r.NoHookFailed()
}
