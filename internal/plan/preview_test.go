package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestLostLabels(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	ours := map[string]string{capstanv1.AddonLabel: "web", capstanv1.AddonNamespaceLabel: "capstan-system", capstanv1.ManagedByLabel: "capstan"}
	without := func(keys ...string) map[string]string {
		l := maps.Clone(ours)
		for _, k := range keys {
			delete(l, k)
		}
		return l
	}
	applied := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}, {Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}}
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		manager []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"all there", ours, applied, false},
		{"all removed", nil, applied, true},
		{"managed-by removed", without(capstanv1.ManagedByLabel), applied, true},
		{"the namespace label removed", without(capstanv1.AddonNamespaceLabel), applied, true},
		{"another add-on's labels", map[string]string{capstanv1.AddonLabel: "db", capstanv1.AddonNamespaceLabel: "capstan-system"}, applied, false},
		{"adopted without a change: never applied", nil, []metav1.ManagedFieldsEntry{{Manager: "helm"}}, false},
	} {
		u := &unstructured.Unstructured{}
		u.SetLabels(tc.labels)
		u.SetManagedFields(tc.manager)
		if got := lostLabels(u, addon); got != tc.want {
			t.Errorf("%s: lostLabels = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// countingCluster answers reads and dry runs from a map, and counts them.
type countingCluster struct {
	live      map[string]*unstructured.Unstructured
	dryRunErr map[string]error
	// dryRunAs is what a dry run returns for an object, by key, when not
	// the object itself: what the API server keeps of it.
	dryRunAs     map[string]*unstructured.Unstructured
	gets, dryRun int
}

func (c *countingCluster) Get(_ context.Context, ref capstanv1.ObjectRef) (*unstructured.Unstructured, error) {
	c.gets++
	return c.live[ref.Key()], nil
}

func (c *countingCluster) DryRun(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c.dryRun++
	if err := c.dryRunErr[capstanv1.RefOf(obj).Key()]; err != nil {
		return nil, err
	}
	if as := c.dryRunAs[capstanv1.RefOf(obj).Key()]; as != nil {
		return as.DeepCopy(), nil
	}
	return obj.DeepCopy(), nil
}

func (c *countingCluster) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("lists are not served here")
}

func TestPreviewObjectsSavesRequests(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	mk := func(kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(addon.AppliedLabels())
		return u
	}
	quiet := mk("ConfigMap", "apps", "quiet")
	fresh := mk("Namespace", "", "fresh")
	inFresh := mk("ConfigMap", "fresh", "inside")
	secret := mk("Secret", "apps", "creds")
	addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{capstanv1.RefOf(quiet)})
	now := time.Now()
	known := map[string]Verified{capstanv1.RefOf(quiet).Key(): {Digest: ManifestDigest(quiet), ResourceVersion: "7", At: now.Add(-time.Minute)}}
	c := &countingCluster{live: map[string]*unstructured.Unstructured{},
		dryRunErr: map[string]error{capstanv1.RefOf(secret).Key(): apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "creds", nil)}}
	p, err := PreviewObjects(context.Background(), c, PreviewInput{
		Addon: addon, Objects: []*unstructured.Unstructured{quiet, fresh, inFresh, secret},
		Known: known, Watched: map[string]string{capstanv1.RefOf(quiet).Key(): "7"}, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	actions := []capstanv1.Action{}
	for _, o := range p.Objects {
		actions = append(actions, o.Action)
	}
	want := []capstanv1.Action{capstanv1.ActionUnchanged, capstanv1.ActionCreate, capstanv1.ActionCreate, capstanv1.ActionCreate}
	if !slices.Equal(actions, want) {
		t.Fatalf("actions = %v; want %v", actions, want)
	}
	if !p.Quiet[capstanv1.RefOf(quiet).Key()] || p.Verified[capstanv1.RefOf(quiet).Key()] != known[capstanv1.RefOf(quiet).Key()] {
		t.Error("the object unchanged in the watch cache is not quiet, or its verification was not kept")
	}
	// One read each for the new Namespace and the Secret; one dry run for
	// the Namespace and one for the Secret. The quiet object and the one
	// in the new Namespace cost nothing.
	if c.gets != 2 || c.dryRun != 2 {
		t.Errorf("%d reads and %d dry runs; want 2 and 2", c.gets, c.dryRun)
	}
	if e := p.Objects[3].Error; !strings.Contains(e, "withheld") {
		t.Errorf("the Secret's dry-run error = %q; want its message withheld", e)
	}
	if o := p.Objects[2]; !o.Unverified || o.Diff != "" {
		t.Errorf("the object in the new Namespace: unverified %v, diff %q; want unverified with no diff", o.Unverified, o.Diff)
	}

	// The Namespace that createNamespace adds is read, to know it is
	// missing, and not dry-run: it is applied before anything else.
	c = &countingCluster{live: map[string]*unstructured.Unstructured{}}
	p, err = PreviewObjects(context.Background(), c, PreviewInput{
		Addon: addon, Objects: []*unstructured.Unstructured{fresh, inFresh}, CreatedNamespace: "fresh", Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.gets != 1 || c.dryRun != 0 {
		t.Errorf("with createNamespace: %d reads and %d dry runs; want 1 and 0", c.gets, c.dryRun)
	}
	if o := p.Objects[0]; o.Action != capstanv1.ActionCreate || o.Unverified || o.Error != "" {
		t.Errorf("the Namespace of createNamespace: %+v; want a create, not left unverified", o)
	}
}

// TestPreviewTrustsTheGeneration: a workload whose resourceVersion moved
// while its generation stayed (its status changed, or another writer's
// annotation came) needs no dry run; a new generation, a label the manifest
// sets that changed, a kind whose generation does not follow its spec, or
// an old verification does.
func TestPreviewTrustsTheGeneration(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	manifest := func(apiVersion, kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace("apps")
		u.SetName("web")
		u.SetLabels(addon.AppliedLabels())
		u.SetAnnotations(map[string]string{"team": "a"})
		return u
	}
	liveOf := func(obj *unstructured.Unstructured, rv string, generation int64, change func(*unstructured.Unstructured)) *unstructured.Unstructured {
		l := obj.DeepCopy()
		l.SetResourceVersion(rv)
		l.SetGeneration(generation)
		l.SetAnnotations(map[string]string{"team": "a", "deployment.kubernetes.io/revision": "1"})
		if change != nil {
			change(l)
		}
		return l
	}
	now := time.Now()
	for _, tc := range []struct {
		name       string
		obj        *unstructured.Unstructured
		generation int64
		age        time.Duration
		change     func(*unstructured.Unstructured)
		wantDryRun bool
	}{
		{name: "status moved", obj: manifest("apps/v1", "Deployment"), generation: 1},
		{name: "spec changed", obj: manifest("apps/v1", "Deployment"), generation: 2, wantDryRun: true},
		{name: "an annotation of the manifest changed", obj: manifest("apps/v1", "Deployment"), generation: 1, wantDryRun: true,
			change: func(l *unstructured.Unstructured) { l.SetAnnotations(map[string]string{"team": "b"}) }},
		{name: "a label of the manifest removed", obj: manifest("apps/v1", "Deployment"), generation: 1, wantDryRun: true,
			change: func(l *unstructured.Unstructured) {
				l.SetLabels(map[string]string{capstanv1.AddonLabel: "web", capstanv1.AddonNamespaceLabel: "capstan-system"})
			}},
		{name: "a kind whose generation does not follow its spec", obj: manifest("v1", "Service"), generation: 1, wantDryRun: true},
		{name: "verified too long ago", obj: manifest("apps/v1", "Deployment"), generation: 1, age: VerifyTTL, wantDryRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := capstanv1.RefOf(tc.obj).Key()
			addon := addon.DeepCopy()
			addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{capstanv1.RefOf(tc.obj)})
			known := map[string]Verified{key: {Digest: ManifestDigest(tc.obj), ResourceVersion: "5", Generation: 1, At: now.Add(-time.Minute - tc.age)}}
			c := &countingCluster{live: map[string]*unstructured.Unstructured{key: liveOf(tc.obj, "9", tc.generation, tc.change)}}
			p, err := PreviewObjects(context.Background(), c, PreviewInput{
				Addon: addon, Objects: []*unstructured.Unstructured{tc.obj},
				Known: known, Watched: map[string]string{key: "9"}, Now: now,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.dryRun > 0; got != tc.wantDryRun {
				t.Errorf("dry runs: %d; want a dry run: %v", c.dryRun, tc.wantDryRun)
			}
			if !tc.wantDryRun {
				v := p.Verified[key]
				if p.Objects[0].Action != capstanv1.ActionUnchanged || v.ResourceVersion != "9" || !v.At.Equal(known[key].At) {
					t.Errorf("action %s, verified %+v; want unchanged, at the new resourceVersion, as old as the last dry run", p.Objects[0].Action, v)
				}
			}
		})
	}
}

// TestPreviewDecidesWhatToRecreate: with spec.recreate, only an object of
// the add-on's inventory whose change the API server refuses in place is
// planned to be deleted and created anew, bound to the UID read; every
// other refusal stays an error that says how to go on. An object marked
// as Flux marks it is recreated without spec.recreate.
func TestPreviewDecidesWhatToRecreate(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	mk := func(apiVersion, kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace("apps")
		u.SetName(name)
		u.SetLabels(addon.AppliedLabels())
		return u
	}
	ours, left := mk("apps/v1", "Deployment", "web"), mk("apps/v1", "Deployment", "left")
	database, claim, password := mk("example.com/v1", "Database", "db"), mk("v1", "PersistentVolumeClaim", "data"), mk("v1", "Secret", "password")
	// migrate's manifest asks for itself what spec.recreate asks for all;
	// the marks of left, db and data ask for what the guards refuse.
	migrate := mk("batch/v1", "Job", "migrate")
	for _, o := range []*unstructured.Unstructured{migrate, left, database, claim} {
		o.SetAnnotations(map[string]string{"kustomize.toolkit.fluxcd.io/force": "enabled"})
	}
	immutable := func(kind, path string, forbidden bool) error {
		e := fieldInvalid(path)
		if forbidden {
			e = fieldForbidden(path)
		}
		return apierrors.NewInvalid(schema.GroupKind{Kind: kind}, "x", field.ErrorList{e})
	}
	c := &countingCluster{live: map[string]*unstructured.Unstructured{}, dryRunErr: map[string]error{
		capstanv1.RefOf(ours).Key():     immutable("Deployment", "spec.selector", false),
		capstanv1.RefOf(left).Key():     immutable("Deployment", "spec.selector", false),
		capstanv1.RefOf(database).Key(): immutable("Database", "spec.size", false),
		capstanv1.RefOf(claim).Key():    immutable("PersistentVolumeClaim", "spec.storageClassName", false),
		capstanv1.RefOf(password).Key(): immutable("Secret", "data", true),
		capstanv1.RefOf(migrate).Key():  immutable("Job", "spec.completions", false),
	}}
	for i, obj := range []*unstructured.Unstructured{ours, left, database, claim, password, migrate} {
		l := obj.DeepCopy()
		l.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
		if obj == password {
			l.SetAnnotations(map[string]string{"helm.sh/resource-policy": "keep"})
		}
		c.live[capstanv1.RefOf(obj).Key()] = l
	}
	addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{capstanv1.RefOf(ours), capstanv1.RefOf(database), capstanv1.RefOf(claim), capstanv1.RefOf(password), capstanv1.RefOf(migrate)})
	objs := []*unstructured.Unstructured{ours, left, database, claim, password, migrate}
	for _, recreate := range []bool{false, true} {
		p, err := PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: objs, Now: time.Now(), Recreate: recreate})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"left":     "this add-on did not apply the object, so it is not deleted for the change",
			"db":       "Capstan does not delete a custom resource to change it",
			"data":     "Capstan never deletes a PersistentVolumeClaim",
			"password": "it is marked helm.sh/resource-policy: keep",
			"web":      "; the change needs the object deleted and created anew: set spec.recreate: true for the sync to do that, or mark the object kustomize.toolkit.fluxcd.io/force: enabled",
		}
		for _, o := range p.Objects {
			if o.Ref.Name == "migrate" {
				if !o.Recreate || o.RecreateUID != "uid-5" || o.Error != "" || !strings.Contains(o.Diff, "as its manifest's kustomize.toolkit.fluxcd.io/force: enabled asks") {
					t.Errorf("recreate %v: migrate, marked kustomize.toolkit.fluxcd.io/force: enabled, should be recreated: %+v", recreate, o)
				}
				continue
			}
			if recreate && o.Ref.Name == "web" {
				if !o.Recreate || o.RecreateUID != "uid-0" || o.Error != "" || o.Action != capstanv1.ActionUpdate {
					t.Errorf("with spec.recreate, web should be recreated, bound to uid-0: %+v", o)
				}
				continue
			}
			if o.Recreate || !strings.Contains(o.Error, want[o.Ref.Name]) {
				t.Errorf("recreate %v, %s: recreate %v, error %q; want one that says %q", recreate, o.Ref.Name, o.Recreate, o.Error, want[o.Ref.Name])
			}
		}
	}

	// A sync stopped after the delete of migrate, before its create: the
	// retry plans migrate as a Create, which is the change approved.
	approved, err := PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: []*unstructured.Unstructured{migrate}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	delete(c.live, capstanv1.RefOf(migrate).Key())
	delete(c.dryRunErr, capstanv1.RefOf(migrate).Key())
	retry, err := PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: []*unstructured.Unstructured{migrate}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if retry.Objects[0].Action != capstanv1.ActionCreate || !Within(Changes(Input{Objects: retry.Objects}), Changes(Input{Objects: approved.Objects})) {
		t.Errorf("the retry's %+v is not within the approved recreate %+v", retry.Objects[0], approved.Objects[0])
	}
}

// TestPreviewRecreatesAJobOnlyWhenNothingKeepsIt: a Job whose pod template
// changed is planned to be deleted and created anew without spec.recreate,
// bound to the UID read, as a recreate is; one that its live manifest marks
// to be kept (Helm's keep, Argo CD's Delete=false) is an error that says
// so, and nothing is planned to delete it. So is one this add-on does not
// hold: a Job adopted from a Helm release (in no inventory, with no label
// of Capstan's), one labelled for another add-on, or one labelled for this
// add-on but missing from its inventory.
func TestPreviewRecreatesAJobOnlyWhenNothingKeepsIt(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	notApplied := "this add-on did not apply the object, so it is not deleted for the change: delete it by hand"
	other := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "db"}}
	for _, tc := range []struct {
		name, keptBy string
		annotations  map[string]string
		liveLabels   map[string]string
		notInventory bool
	}{
		{name: "plain"},
		{name: "helm-keep", keptBy: "it is marked helm.sh/resource-policy: keep", annotations: map[string]string{"helm.sh/resource-policy": "keep"}},
		{name: "argo-delete-false", keptBy: "it is marked argocd.argoproj.io/sync-options: Delete=false", annotations: map[string]string{"argocd.argoproj.io/sync-options": "Delete=false"}},
		{name: "adopted-from-helm", keptBy: notApplied, notInventory: true,
			liveLabels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
		{name: "another-addon's", keptBy: "it is not deleted for the change", liveLabels: other.AppliedLabels()},
		{name: "labelled-but-not-in-the-inventory", keptBy: notApplied, notInventory: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &unstructured.Unstructured{}
			job.SetAPIVersion("batch/v1")
			job.SetKind("Job")
			job.SetNamespace("apps")
			job.SetName("migrate")
			job.SetLabels(addon.AppliedLabels())
			job.SetAnnotations(tc.annotations)
			l := job.DeepCopy()
			l.SetUID("uid-job")
			if tc.liveLabels != nil {
				l.SetLabels(tc.liveLabels)
			}
			key := capstanv1.RefOf(job).Key()
			c := &countingCluster{live: map[string]*unstructured.Unstructured{key: l}, dryRunErr: map[string]error{
				key: apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "migrate", field.ErrorList{field.Invalid(field.NewPath("spec", "template"), "x", "field is immutable")}),
			}}
			addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{capstanv1.RefOf(job)})
			if tc.notInventory {
				addon.Status.Inventory = nil
			}
			p, err := PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: []*unstructured.Unstructured{job}, Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			o := p.Objects[0]
			if tc.keptBy == "" {
				if !o.Recreate || o.RecreateUID != "uid-job" || o.Error != "" || o.Action != capstanv1.ActionUpdate {
					t.Errorf("the Job should be recreated, bound to uid-job: %+v", o)
				}
				return
			}
			if o.Recreate || !strings.Contains(o.Error, tc.keptBy) || !strings.Contains(o.Error, "spec.template") {
				t.Errorf("recreate %v, error %q; want no recreate and an error that names the refusal and says %q", o.Recreate, o.Error, tc.keptBy)
			}
		})
	}
}

func fieldInvalid(path string) *field.Error {
	return field.Invalid(field.NewPath(path), "x", "field is immutable")
}

func fieldForbidden(path string) *field.Error {
	return field.Forbidden(field.NewPath(path), "field is immutable when `immutable` is set")
}

// TestPreviewDigestsOfWholeManifestsCoverGeneratedFieldsAsReviewable: an
// object deleted and created anew, and one whose labels the sync puts
// back, have the digest of their whole manifest; a field the chart
// generates at random counts in it as a person can review it, so two
// renders that differ only in the random bytes give one digest, and any
// other change gives another. With the raw bytes, every render would
// make an approval of the plan stale.
func TestPreviewDigestsOfWholeManifestsCoverGeneratedFieldsAsReviewable(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	token := []string{"spec", "template", "metadata", "annotations", "token"}
	render := func(random string, replicas int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		u.SetNamespace("apps")
		u.SetName("web")
		u.SetLabels(addon.AppliedLabels())
		_ = unstructured.SetNestedField(u.Object, random, token...)
		return u
	}
	key := capstanv1.RefOf(render("", 1)).Key()
	addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{capstanv1.RefOf(render("", 1))})
	generated := Generated{Paths: map[string][][]string{key: {token}}, Inputs: "sha256:inputs"}
	// The live object lacks the generated field: the sync adds it.
	live := render("", 1)
	unstructured.RemoveNestedField(live.Object, token...)
	live.SetUID("uid-web")
	unlabelled := live.DeepCopy()
	unlabelled.SetLabels(nil)
	unlabelled.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	for _, tc := range []struct {
		name    string
		cluster func() *countingCluster
		check   func(ObjectResult) bool
	}{
		{"recreated", func() *countingCluster {
			return &countingCluster{live: map[string]*unstructured.Unstructured{key: live}, dryRunErr: map[string]error{
				key: apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{fieldInvalid("spec.selector")})}}
		}, func(o ObjectResult) bool { return o.Recreate }},
		// The API server keeps nothing of the generated field (a field
		// its schema prunes), so only the labels change.
		{"labels put back", func() *countingCluster {
			return &countingCluster{live: map[string]*unstructured.Unstructured{key: unlabelled}, dryRunAs: map[string]*unstructured.Unstructured{key: live}}
		}, func(o ObjectResult) bool { return strings.Contains(o.Diff, "were removed") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			digestOf := func(obj *unstructured.Unstructured) string {
				p, err := PreviewObjects(context.Background(), tc.cluster(), PreviewInput{Addon: addon, Objects: []*unstructured.Unstructured{obj},
					Now: time.Now(), Recreate: true, Generated: generated})
				if err != nil {
					t.Fatal(err)
				}
				o := p.Objects[0]
				if o.Action != capstanv1.ActionUpdate || o.Error != "" || !tc.check(o) {
					t.Fatalf("the preview: %+v; want an update that is %s", o, tc.name)
				}
				return o.Digest
			}
			first, second := digestOf(render("x7Qp", 1)), digestOf(render("Lm2v", 1))
			if first != second {
				t.Errorf("two renders that differ only in a generated field give the digests %s and %s; want one", first, second)
			}
			if other := digestOf(render("x7Qp", 2)); other == first {
				t.Errorf("a render with other replicas keeps the digest %s; want another", first)
			}
		})
	}
}

// TestPreviewComputesNoDiffPastWhatStatusKeeps: once the diffs of the
// objects before fill what status keeps of them, a preview for status
// computes no diff for the objects after (each a large one would take
// time on every preview of a pending change), and the plan marks them
// not kept; their digests, and so the plan's hash, are those of a full
// preview, which computes every diff. A preview whose context has ended
// (a plan whose client has gone) stops before the next object.
func TestPreviewComputesNoDiffPastWhatStatusKeeps(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	c := &countingCluster{live: map[string]*unstructured.Unstructured{}}
	var objs []*unstructured.Unstructured
	for i := range 20 {
		cm := func(value string) *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"namespace": "apps", "name": fmt.Sprint("cm", i)},
				"data":     map[string]any{"big": strings.Repeat(value+"\n", 1500)}}}
			u.SetLabels(addon.AppliedLabels())
			return u
		}
		objs = append(objs, cm("after"))
		c.live[capstanv1.RefOf(objs[i]).Key()] = cm("before")
	}
	preview := func(ctx context.Context, full bool) (*Preview, error) {
		return PreviewObjects(ctx, c, PreviewInput{Addon: addon, Objects: objs, Now: time.Now(), FullDiffs: full})
	}
	p, err := preview(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, o := range p.Objects {
		if o.Diff != "" {
			kept++
		}
	}
	if kept == 0 || kept == len(objs) || !p.Objects[len(objs)-1].DiffNotKept || p.Objects[len(objs)-1].Digest == "" {
		t.Fatalf("%d of %d diffs computed, the last not kept: %v; want those status keeps, and a digest for each", kept, len(objs), p.Objects[len(objs)-1].DiffNotKept)
	}
	plan := Build(Input{Objects: p.Objects})
	if last := plan.Objects[len(plan.Objects)-1]; !plan.DiffsTruncated || !last.DiffTruncated || last.Diff != "" {
		t.Errorf("the plan's last object: %+v; want its diff marked not kept", last)
	}
	full, err := preview(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if full.Objects[len(objs)-1].Diff == "" || Build(Input{Objects: full.Objects, Full: true}).Hash != plan.Hash {
		t.Error("a full preview does not compute every diff, or its plan has another hash")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.dryRun = 0
	if _, err := preview(ctx, true); !errors.Is(err, context.Canceled) || c.dryRun != 0 {
		t.Errorf("a preview whose context ended: %v, after %d dry runs; want it stopped before any", err, c.dryRun)
	}
}

// TestPreviewTellsAStatusWriteByItsShape: a Service (a status, no
// generation) whose resourceVersion moved while only its status was
// written (a load balancer's address) needs no dry run: its shape is the
// one verified. An edit of its spec or metadata, or an old verification,
// does.
func TestPreviewTellsAStatusWriteByItsShape(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"type": "LoadBalancer"}}}
	obj.SetAPIVersion("v1")
	obj.SetKind("Service")
	obj.SetNamespace("apps")
	obj.SetName("web")
	obj.SetLabels(addon.AppliedLabels())
	liveOf := func(rv string, change func(*unstructured.Unstructured)) *unstructured.Unstructured {
		l := obj.DeepCopy()
		l.SetResourceVersion(rv)
		l.Object["status"] = map[string]any{"loadBalancer": map[string]any{}}
		if change != nil {
			change(l)
		}
		return l
	}
	key := capstanv1.RefOf(obj).Key()
	now := time.Now()
	for _, tc := range []struct {
		name       string
		age        time.Duration
		change     func(*unstructured.Unstructured)
		wantDryRun bool
	}{
		{name: "status written", change: func(l *unstructured.Unstructured) {
			l.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "lb", Subresource: "status"}})
			_ = unstructured.SetNestedSlice(l.Object, []any{map[string]any{"ip": "192.0.2.1"}}, "status", "loadBalancer", "ingress")
		}},
		{name: "spec edited", wantDryRun: true, change: func(l *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(l.Object, "ClusterIP", "spec", "type")
		}},
		{name: "another writer's annotation", wantDryRun: true, change: func(l *unstructured.Unstructured) {
			l.SetAnnotations(map[string]string{"team": "b"})
		}},
		{name: "verified too long ago", age: VerifyTTL, wantDryRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addon := addon.DeepCopy()
			addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{capstanv1.RefOf(obj)})
			known := map[string]Verified{key: VerifiedAt(ManifestDigest(obj), liveOf("5", nil), now.Add(-time.Minute-tc.age))}
			c := &countingCluster{live: map[string]*unstructured.Unstructured{key: liveOf("9", tc.change)}}
			p, err := PreviewObjects(context.Background(), c, PreviewInput{
				Addon: addon, Objects: []*unstructured.Unstructured{obj},
				Known: known, Watched: map[string]string{key: "9"}, Now: now,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.dryRun > 0; got != tc.wantDryRun {
				t.Errorf("dry runs: %d; want a dry run: %v", c.dryRun, tc.wantDryRun)
			}
			if !tc.wantDryRun {
				v := p.Verified[key]
				if p.Objects[0].Action != capstanv1.ActionUnchanged || v.ResourceVersion != "9" || v.Shape != known[key].Shape || !v.At.Equal(known[key].At) {
					t.Errorf("action %s, verified %+v; want unchanged, at the new resourceVersion, of the same shape, as old as the last dry run", p.Objects[0].Action, v)
				}
			}
		})
	}
}

// TestPreviewRetriesADryRunTheAPIServerCouldNotTake: a dry run the API
// server could not take for a moment (overloaded, timing out, failing, out
// of reach) stops the preview with an error to retry, and is no error of
// the object's in the plan, which would refuse the plan until the resync.
// So is a webhook of someone else's the API server failed to call (its
// pod restarts). A refusal, and a webhook the render registers itself
// that the API server failed to call (waited for by its wave), stay the
// object's error.
func TestPreviewRetriesADryRunTheAPIServerCouldNotTake(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web"}}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace("apps")
	obj.SetName("settings")
	gr := schema.GroupResource{Resource: "configmaps"}
	webhook := apierrors.NewInternalError(errors.New(`failed calling webhook "check.example.com": failed to call webhook: Post "https://check.apps.svc:443/validate": dial tcp 10.0.0.1:443: connect: connection refused`))
	registers := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "check"},
		"webhooks": []any{map[string]any{"name": "check.example.com"}},
	}}
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
		also  []*unstructured.Unstructured
	}{
		{"etcd timing out", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true, nil},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true, nil},
		{"server timeout", apierrors.NewServerTimeout(gr, "patch", 1), true, nil},
		{"service unavailable", apierrors.NewServiceUnavailable("the control plane rolls"), true, nil},
		{"gateway timeout", apierrors.NewGenericServerResponse(504, "patch", gr, "settings", "", 0, false), true, nil},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true, nil},
		{"deadline", fmt.Errorf("patch: %w", context.DeadlineExceeded), true, nil},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "settings", nil), false, nil},
		{"an admission webhook's deny", apierrors.NewForbidden(gr, "settings", errors.New(`admission webhook "check.example.com" denied the request: no`)), false, nil},
		{"a webhook of someone else's the API server failed to call", webhook, true, nil},
		{"a webhook the render registers the API server failed to call", webhook, false, []*unstructured.Unstructured{registers}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &countingCluster{live: map[string]*unstructured.Unstructured{}, dryRunErr: map[string]error{capstanv1.RefOf(obj).Key(): tc.err}}
			p, err := PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: append([]*unstructured.Unstructured{obj}, tc.also...), Now: time.Now()})
			if !tc.retry {
				if err != nil {
					t.Fatalf("PreviewObjects: %v; want the refusal in the plan", err)
				}
				if len(p.Objects) == 0 || p.Objects[0].Error == "" {
					t.Fatalf("objects %+v; want the dry run's error recorded", p.Objects)
				}
				return
			}
			var dre *DryRunError
			if !errors.As(err, &dre) || !errors.Is(err, tc.err) {
				t.Fatalf("PreviewObjects: %v; want a DryRunError wrapping %v", err, tc.err)
			}
			if !strings.Contains(err.Error(), "ConfigMap apps/settings") {
				t.Errorf("error %q does not name the object", err)
			}
		})
	}
}
