package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// deleteRecorder is a client that answers reads of metadata from a map of
// annotations by name and records the deletes it is sent: the order of
// the deletes is pure logic, and what the API server does with each is
// the controller suite's business.
type deleteRecorder struct {
	client.Client
	annotations map[string]map[string]string
	// deleting names the objects whose deletion has begun, in the
	// foreground (as Capstan's delete of a wave a lower one waits for
	// leaves them) unless background names them too.
	deleting   map[string]bool
	background map[string]bool
	// propagation holds each delete's propagation policy by name.
	propagation map[string]metav1.DeletionPropagation
	log         []string
}

func (r *deleteRecorder) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	ann, ok := r.annotations[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	obj.SetName(key.Name)
	obj.SetAnnotations(ann)
	obj.SetUID(types.UID("uid-" + key.Name))
	obj.SetResourceVersion("1")
	if r.deleting[key.Name] {
		obj.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)})
		if !r.background[key.Name] {
			obj.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
		}
	}
	return nil
}

// RESTMapper maps no kind: an object not found is gone, since no other
// version serves its kind.
func (r *deleteRecorder) RESTMapper() meta.RESTMapper { return meta.NewDefaultRESTMapper(nil) }

func (r *deleteRecorder) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	r.log = append(r.log, "delete "+obj.GetName())
	var o client.DeleteOptions
	o.ApplyOptions(opts)
	if r.propagation != nil && o.PropagationPolicy != nil {
		r.propagation[obj.GetName()] = *o.PropagationPolicy
	}
	return nil
}

// TestDeleteAllGoesInReverseWaves: with AwaitGone, the deletes go highest
// wave first, each wave awaited before the next; a wave whose objects
// were all spared is not awaited; objects in one wave, or without
// AwaitGone, go in the order given with no wait; and a wait that fails
// deletes nothing more, and does not count the wave it waited for as done.
// An object whose deletion has begun (a retry after such a wait) is done
// with no delete sent again, and only the deletes sent are counted.
func TestDeleteAllGoesInReverseWaves(t *testing.T) {
	ref := func(kind, name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: kind, Namespace: "apps", Name: name}
	}
	refs := []capstanv1.ObjectRef{ref("ConfigMap", "a"), ref("ConfigMap", "b"), ref("PersistentVolumeClaim", "claim"),
		ref("ConfigMap", "c"), ref("ConfigMap", "d"), ref("ConfigMap", "gone"), ref("ConfigMap", "kept")}
	wave := func(n string) map[string]string { return map[string]string{WaveAnnotation: n} }
	annotations := map[string]map[string]string{
		"a": nil, "b": wave("1"), "c": {ArgoWaveAnnotation: "1"}, "d": wave("-1"), "claim": wave("5"),
		"kept": {WaveAnnotation: "2", ResourcePolicyAnnotation: "keep"},
	}
	var requests int
	run := func(refs []capstanv1.ObjectRef, annotations map[string]map[string]string, await bool, fail string, deleting ...string) (*deleteRecorder, []capstanv1.ObjectRef, []Spared, error) {
		rec := &deleteRecorder{annotations: annotations, deleting: map[string]bool{}}
		for _, name := range deleting {
			rec.deleting[name] = true
		}
		d := Deleting{Keep: Uninstalling}
		if await {
			d.AwaitGone = func(_ context.Context, next int32, deleted []capstanv1.ObjectRef) error {
				var names []string
				for _, r := range deleted {
					names = append(names, r.Name)
				}
				rec.log = append(rec.log, fmt.Sprintf("await %d (%s)", next, strings.Join(names, " ")))
				if fmt.Sprint(next) == fail {
					return errors.New("not gone")
				}
				return nil
			}
		}
		deleted, err := (&Applier{Client: rec}).DeleteAll(context.Background(), refs, d)
		requests = deleted.Requests
		return rec, deleted.Done, deleted.Spared, err
	}
	names := func(refs []capstanv1.ObjectRef) string {
		var out []string
		for _, r := range refs {
			out = append(out, r.Name)
		}
		return strings.Join(out, " ")
	}

	rec, done, spared, err := run(refs, annotations, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rec.log, ", "), "delete b, delete c, await 0 (b c), delete a, await -1 (a), delete d"; got != want {
		t.Errorf("in reverse waves: %s; want %s", got, want)
	}
	if got := names(done); got != "gone b c a d" {
		t.Errorf("done: %s", got)
	}
	if len(spared) != 1 || spared[0].Ref.Name != "kept" || spared[0].KeptBy != "helm.sh/resource-policy: keep" {
		t.Errorf("spared: %+v", spared)
	}
	if requests != 4 {
		t.Errorf("%d deletes counted; want the 4 sent", requests)
	}

	// The retry of a wait for b and c: they are being deleted, so only the
	// waves below them are sent a delete, after the wait.
	rec, done, _, err = run(refs, annotations, true, "", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rec.log, ", "), "await 0 (b c), delete a, await -1 (a), delete d"; got != want {
		t.Errorf("with b and c being deleted: %s; want %s", got, want)
	}
	if got := names(done); got != "gone b c a d" || requests != 2 {
		t.Errorf("with b and c being deleted: done %s, %d deletes counted; want gone b c a d, and 2", got, requests)
	}

	// The waves awaited go in the foreground, the last in the background.
	fg := &deleteRecorder{annotations: annotations, deleting: map[string]bool{}, propagation: map[string]metav1.DeletionPropagation{}}
	if _, err := (&Applier{Client: fg}).DeleteAll(context.Background(), refs, Deleting{Keep: Uninstalling,
		AwaitGone: func(context.Context, int32, []capstanv1.ObjectRef) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	if p := fg.propagation; p["b"] != metav1.DeletePropagationForeground || p["a"] != metav1.DeletePropagationForeground || p["d"] != metav1.DeletePropagationBackground {
		t.Errorf("propagation %v; want the waves awaited in the foreground, the last in the background", p)
	}

	rec, _, _, err = run(refs, annotations, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rec.log, ", "), "delete a, delete b, delete c, delete d"; got != want {
		t.Errorf("without AwaitGone: %s; want %s", got, want)
	}

	one := map[string]map[string]string{"a": wave("3"), "b": {ArgoWaveAnnotation: "3"}}
	rec, _, _, err = run(refs[:2], one, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rec.log, ", "), "delete a, delete b"; got != want {
		t.Errorf("in one wave: %s; want %s", got, want)
	}

	rec, done, _, err = run(refs, annotations, true, "0")
	if err == nil {
		t.Fatal("a wait that failed should fail the deletes")
	}
	if got, want := strings.Join(rec.log, ", "), "delete b, delete c, await 0 (b c)"; got != want || names(done) != "gone" {
		t.Errorf("after a failed wait: %s, done %s; want %s, and done only what was gone before, since b and c are not gone yet", got, names(done), want)
	}
	// The deletes of b and c were sent, and count, although they are not
	// done: the retry finds them being deleted and does not count them
	// again (2 above), so the count over both tries is the 4 deletes.
	if requests != 2 {
		t.Errorf("after a failed wait: %d deletes counted; want the 2 sent", requests)
	}
}

// TestDeleteAllHoldsWhatAsksConfirmation: a prune deletes an object marked
// Prune=confirm only when the approved plan listed it (Confirmed); one
// marked since is held back, neither done nor spared, so that it stays in
// the inventory, and in waves, the waves below it are held with it. An
// uninstall (not Confirming) deletes it.
func TestDeleteAllHoldsWhatAsksConfirmation(t *testing.T) {
	ref := func(name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name}
	}
	confirm := map[string]string{ArgoSyncOptionsAnnotation: "Prune=confirm"}
	annotations := map[string]map[string]string{"plain": nil, "approved": confirm, "marked-since": confirm}
	refs := []capstanv1.ObjectRef{ref("plain"), ref("approved"), ref("marked-since")}
	rec := &deleteRecorder{annotations: annotations}
	d := Deleting{Keep: Pruning, Confirming: true, Confirmed: map[string]bool{ref("approved").Key(): true}}
	out, err := (&Applier{Client: rec}).DeleteAll(context.Background(), refs, d)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.log, ", "); got != "delete plain, delete approved" {
		t.Errorf("deletes: %s", got)
	}
	if len(out.Held) != 1 || out.Held[0].Name != "marked-since" || len(out.Done) != 2 || len(out.Spared) != 0 {
		t.Errorf("held %v, done %v, spared %v; want marked-since held, the other two done", out.Held, out.Done, out.Spared)
	}
	// In waves: held in wave 1, it holds wave 0 (its operator) with it.
	waved := map[string]map[string]string{"operator": nil, "marked-since": {ArgoSyncOptionsAnnotation: "Prune=confirm", WaveAnnotation: "1"}}
	rec = &deleteRecorder{annotations: waved}
	d.AwaitGone = func(context.Context, int32, []capstanv1.ObjectRef) error { return nil }
	out, err = (&Applier{Client: rec}).DeleteAll(context.Background(), []capstanv1.ObjectRef{ref("operator"), ref("marked-since")}, d)
	if err != nil || len(rec.log) != 0 || len(out.Held) != 2 || len(out.Done) != 0 {
		t.Errorf("in waves: deletes %v, held %v, done %v, %v; want both held, none deleted", rec.log, out.Held, out.Done, err)
	}
	rec = &deleteRecorder{annotations: annotations}
	if _, err := (&Applier{Client: rec}).DeleteAll(context.Background(), refs, Deleting{Keep: Uninstalling}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.log, ", "); got != "delete plain, delete approved, delete marked-since" {
		t.Errorf("an uninstall's deletes: %s", got)
	}
}

// refusingDeletes refuses the delete of one named object.
type refusingDeletes struct {
	*deleteRecorder
	refuse string
}

func (r *refusingDeletes) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if obj.GetName() == r.refuse {
		r.log = append(r.log, "refused "+obj.GetName())
		return errors.New("admission webhook denied the request")
	}
	return r.deleteRecorder.Delete(ctx, obj, opts...)
}

// TestAWaveStoppedHalfWayKeepsItsDeletesInTheInventory: wave 1 holds cr-a
// and cr-b, wave 0 the operator that finalizes them. When the delete of
// cr-b is refused, or cr-b is held for a confirmation, the delete of cr-a
// was sent but never awaited: it is not done, so it stays in the
// inventory, and the next prune waits for it before the operator goes. A
// refusal in the last wave leaves what it deleted done: nothing below
// waits for it.
func TestAWaveStoppedHalfWayKeepsItsDeletesInTheInventory(t *testing.T) {
	ref := func(name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name}
	}
	refs := []capstanv1.ObjectRef{ref("cr-a"), ref("cr-b"), ref("operator")}
	annotations := map[string]map[string]string{"cr-a": {WaveAnnotation: "1"}, "cr-b": {WaveAnnotation: "1"}, "operator": nil}
	await := func(context.Context, int32, []capstanv1.ObjectRef) error { return nil }
	names := func(refs []capstanv1.ObjectRef) string {
		var out []string
		for _, r := range refs {
			out = append(out, r.Name)
		}
		return strings.Join(out, " ")
	}

	rec := &refusingDeletes{deleteRecorder: &deleteRecorder{annotations: annotations}, refuse: "cr-b"}
	q := Sequence{Applier: &Applier{Client: rec}, Inventory: refs, Prune: refs, Keep: Pruning, AwaitGone: await}
	res, err := q.Run(context.Background())
	if err == nil {
		t.Fatal("a refused delete should fail the prune")
	}
	if got, want := strings.Join(rec.log, ", "), "delete cr-a, refused cr-b"; got != want {
		t.Errorf("deletes: %s; want %s", got, want)
	}
	if got := names(res.Inventory); got != "cr-a cr-b operator" {
		t.Errorf("after a refused delete the inventory holds %q; want cr-a, being deleted, kept with the rest", got)
	}
	if res.PruneRequests != 1 {
		t.Errorf("%d deletes counted; want the 1 sent", res.PruneRequests)
	}

	// Held for a confirmation: cr-b holds the operator, and cr-a stays too.
	held := map[string]map[string]string{"cr-a": {WaveAnnotation: "1"}, "operator": nil,
		"cr-b": {WaveAnnotation: "1", ArgoSyncOptionsAnnotation: "Prune=confirm"}}
	rec = &refusingDeletes{deleteRecorder: &deleteRecorder{annotations: held}}
	out, err := (&Applier{Client: rec}).DeleteAll(context.Background(), refs, Deleting{Keep: Pruning, Confirming: true, AwaitGone: await})
	if err != nil {
		t.Fatal(err)
	}
	if names(out.Done) != "" || names(out.Held) != "cr-b operator" {
		t.Errorf("with cr-b held: done %q, held %q; want none done, cr-b and the operator held", names(out.Done), names(out.Held))
	}

	// In the last wave, nothing waits below: what it deleted is done.
	rec = &refusingDeletes{deleteRecorder: &deleteRecorder{annotations: annotations}, refuse: "operator"}
	out, err = (&Applier{Client: rec}).DeleteAll(context.Background(), refs, Deleting{Keep: Pruning, AwaitGone: await})
	if err == nil || names(out.Done) != "cr-a cr-b" {
		t.Errorf("with the last wave's delete refused: done %q, %v; want cr-a cr-b done, and the refusal", names(out.Done), err)
	}
}
