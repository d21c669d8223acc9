package plan

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// TestDryRunGraceLastsForLooksAndTime: a dry run the API server could
// not take counts as refused only once it failed on GraceTries looks in a
// row and for GraceFor; an answer, a failure not seen for graceStale, an
// add-on created anew, or the add-on forgotten start afresh.
func TestDryRunGraceLastsForLooksAndTime(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	other := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "db", UID: "u2"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const key = "v1/ConfigMap/apps/settings"
	var g DryRunGrace
	lasted := func(a *capstanv1.Addon, at time.Time) bool {
		_, ok := g.Lasted(a, key, at)
		return ok
	}

	// Fast backoff: many looks within a second are not enough.
	for i := range 10 {
		if lasted(addon, t0.Add(time.Duration(i)*50*time.Millisecond)) {
			t.Fatalf("look %d, within a second, counted as refused", i+1)
		}
	}
	if first, ok := g.Lasted(addon, key, t0.Add(GraceFor)); !ok || !first.Equal(t0) {
		t.Fatalf("failing for GraceFor on many looks: %v, %v; want refused, failing since %v", first, ok, t0)
	}
	// Another add-on's object of the same key has its own count.
	if lasted(other, t0.Add(GraceFor)) {
		t.Error("another add-on's first failure counted as refused")
	}

	// Two looks over a long time are not enough either.
	g.Passed(addon, key)
	lasted(addon, t0)
	if lasted(addon, t0.Add(5*time.Minute)) {
		t.Error("two looks counted as refused")
	}
	if !lasted(addon, t0.Add(6*time.Minute)) {
		t.Error("a third look after GraceFor did not count as refused")
	}
	// A failure seen again at each resync goes on counting.
	if first, ok := g.Lasted(addon, key, t0.Add(11*time.Minute)); !ok || !first.Equal(t0) {
		t.Errorf("a refusal seen again at the resync: %v, %v; want refused since %v", first, ok, t0)
	}

	// Failures far apart are not in a row: the one before is forgotten.
	g.Passed(addon, key)
	lasted(addon, t0)
	lasted(addon, t0.Add(time.Second))
	if first, ok := g.Lasted(addon, key, t0.Add(time.Hour)); ok || !first.Equal(t0.Add(time.Hour)) {
		t.Errorf("a third failure an hour after two others: %v, %v; want a new count from it", first, ok)
	}

	// The same name with a new UID is another add-on.
	renewed := addon.DeepCopy()
	renewed.UID = "u3"
	if lasted(renewed, t0.Add(2*time.Hour)) {
		t.Error("an add-on created anew inherited the count of the one before")
	}

	g.Forget(types.NamespacedName{Namespace: "capstan-system", Name: "web"})
	if _, ok := g.failed[graceKey{addon: types.NamespacedName{Namespace: "capstan-system", Name: "web"}, object: key}]; ok {
		t.Error("Forget left the add-on's count")
	}
	if _, ok := g.failed[graceKey{addon: types.NamespacedName{Namespace: "capstan-system", Name: "db"}, object: key}]; !ok {
		t.Error("Forget of one add-on dropped another's count")
	}

	var none *DryRunGrace
	if _, ok := none.Lasted(addon, key, t0.Add(time.Hour)); ok {
		t.Error("a nil grace counted a dry run as refused")
	}
}

// TestDryRunGraceKeepsOnlyWhatFailedOnTheLook: Keep forgets the add-on's
// failures that did not recur on a whole look (an object gone from the
// render, a webhook that answered), and no other add-on's.
func TestDryRunGraceKeepsOnlyWhatFailedOnTheLook(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	other := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "db", UID: "u2"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var g DryRunGrace
	g.Lasted(addon, "a", t0)
	g.Lasted(addon, "b", t0)
	g.Lasted(other, "a", t0)
	g.Keep(addon, map[string]bool{"b": true})
	if len(g.failed) != 2 {
		t.Fatalf("after Keep: %v; want web's b and db's a", g.failed)
	}
	if _, ok := g.failed[graceKey{addon: types.NamespacedName{Namespace: "capstan-system", Name: "web"}, object: "a"}]; ok {
		t.Error("Keep left a failure that did not recur")
	}
}

// TestDryRunGraceIsBounded: past graceMax objects, a new failure has no
// grace, and the memory does not grow.
func TestDryRunGraceIsBounded(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	var g DryRunGrace
	now := time.Now()
	for i := range graceMax {
		if _, ok := g.Lasted(addon, "v1/ConfigMap/apps/c"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), now); ok {
			t.Fatalf("failure %d counted as refused before the memory was full", i)
		}
	}
	if first, ok := g.Lasted(addon, "v1/ConfigMap/apps/one-more", now); !ok || !first.IsZero() {
		t.Errorf("a failure past the bound: %v, %v; want refused at once, with no time", first, ok)
	}
	if len(g.failed) > graceMax {
		t.Errorf("memory holds %d objects; want at most %d", len(g.failed), graceMax)
	}
	// Failures not seen for graceStale make room again.
	if _, ok := g.Lasted(addon, "v1/ConfigMap/apps/later", now.Add(graceStale+time.Minute)); ok {
		t.Error("a failure once the old ones were stale had no grace")
	}
	if len(g.failed) != 1 {
		t.Errorf("memory holds %d failures after the old ones went stale; want 1", len(g.failed))
	}
}

// TestPreviewRecordsADryRunThatGoesOnFailing: a server-side apply the API
// server refuses with a bare 500 (two list entries of one key) is retried
// while the grace lasts, then recorded as the object's refusal, which
// stalls the add-on; an answer in between starts the count afresh.
func TestPreviewRecordsADryRunThatGoesOnFailing(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace("apps")
	obj.SetName("settings")
	key := capstanv1.RefOf(obj).Key()
	dup := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonUnknown,
		Message: `failed to create typed patch object (apps/settings; /v1, Kind=ConfigMap): .spec.ports: duplicate entries for key [name="http"]`}}
	c := &countingCluster{live: map[string]*unstructured.Unstructured{}, dryRunErr: map[string]error{key: dup}}
	var g DryRunGrace
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	look := func(at time.Duration) (*Preview, error) {
		return PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: []*unstructured.Unstructured{obj}, Now: t0.Add(at), Grace: &g})
	}
	for _, at := range []time.Duration{0, time.Second, time.Minute} {
		var dre *DryRunError
		if _, err := look(at); !errors.As(err, &dre) {
			t.Fatalf("look at %v: %v; want a DryRunError to retry", at, err)
		}
	}
	// An answer ends the streak.
	delete(c.dryRunErr, key)
	if _, err := look(90 * time.Second); err != nil {
		t.Fatalf("look with an answer: %v", err)
	}
	c.dryRunErr[key] = dup
	for _, at := range []time.Duration{2 * time.Minute, 2*time.Minute + 10*time.Second, 2*time.Minute + 20*time.Second} {
		var dre *DryRunError
		if _, err := look(at); !errors.As(err, &dre) {
			t.Fatalf("look at %v, after an answer: %v; want a DryRunError to retry", at, err)
		}
	}
	p, err := look(2*time.Minute + GraceFor)
	if err != nil {
		t.Fatalf("PreviewObjects after the grace: %v; want the refusal in the plan", err)
	}
	if len(p.Objects) != 1 || !strings.Contains(p.Objects[0].Error, "duplicate entries") || !strings.Contains(p.Objects[0].Error, "since 2026-01-01T00:02:00Z") {
		t.Fatalf("objects %+v; want the refusal recorded, saying since when it failed", p.Objects)
	}
	// The refusal reads the same at the next look (the resync's), so the
	// plan's hash and status stay as they are.
	again, err := look(2*time.Minute + GraceFor + 5*time.Minute)
	if err != nil || len(again.Objects) != 1 || again.Objects[0].Error != p.Objects[0].Error {
		t.Fatalf("the next look: %v, %+v; want the same refusal, word for word, as %q", err, again, p.Objects[0].Error)
	}
}

// TestPreviewGivesEachFailingKindOneGrace: the preview stops at the
// first object whose dry run fails, so a grace of each object's own in
// turn would hold an add-on whose objects all call a webhook down for
// good for about two minutes an object. Failures to call one webhook
// share a grace; and once one object has had its grace, the plan is
// refused anyway, so the failures of the objects after it are recorded
// at once.
func TestPreviewGivesEachFailingKindOneGrace(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var objs []*unstructured.Unstructured
	for _, name := range []string{"a", "b", "c"} {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("v1")
		obj.SetKind("ConfigMap")
		obj.SetNamespace("apps")
		obj.SetName(name)
		objs = append(objs, obj)
	}
	dead := apierrors.NewInternalError(errors.New(`failed calling webhook "left.behind.example.com": failed to call webhook: Post "https://gone.gone.svc:443/validate": service "gone" not found`))
	dup := func(name string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonUnknown,
			Message: `failed to create typed patch object (apps/` + name + `; /v1, Kind=ConfigMap): .data: duplicate entries`}}
	}
	for _, tc := range []struct {
		name string
		err  func(name string) error
		want string
	}{
		{"a webhook down for good", func(string) error { return dead }, "failed to call this webhook since 2026-01-01T00:00:00Z"},
		{"a bare 500 for each object", dup, "another object's that went on failing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &countingCluster{live: map[string]*unstructured.Unstructured{}, dryRunErr: map[string]error{}}
			for _, obj := range objs {
				c.dryRunErr[capstanv1.RefOf(obj).Key()] = tc.err(obj.GetName())
			}
			var g DryRunGrace
			look := func(at time.Duration) (*Preview, error) {
				return PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: objs, Now: t0.Add(at), Grace: &g})
			}
			for _, at := range []time.Duration{0, time.Second, time.Minute} {
				var dre *DryRunError
				if _, err := look(at); !errors.As(err, &dre) {
					t.Fatalf("look at %v: %v; want a DryRunError to retry", at, err)
				}
			}
			p, err := look(GraceFor)
			if err != nil {
				t.Fatalf("the first look after GraceFor: %v; want every object's refusal in the plan", err)
			}
			if len(p.Objects) != 3 {
				t.Fatalf("objects %+v; want all three", p.Objects)
			}
			for _, o := range p.Objects[1:] {
				if !strings.Contains(o.Error, tc.want) {
					t.Errorf("%s: error %q; want it recorded at once, saying %q", o.Ref.Key(), o.Error, tc.want)
				}
			}
		})
	}
}

// TestGraceRefusalWhenTheMemoryIsFull: a failure the memory had no room
// for says so, not "since" a zero time.
func TestGraceRefusalWhenTheMemoryIsFull(t *testing.T) {
	msg := graceRefusal(time.Time{}, true, false, false)
	if strings.Contains(msg, "0001") || !strings.Contains(msg, "at once") {
		t.Errorf("message %q; want it to say the failure is taken as a refusal at once, with no time", msg)
	}
}

// TestDryRunGraceFollowsALongResync: with a resync longer than half of
// graceStale, a Stalled add-on is looked at only an hour apart; its
// failures stay "in a row" across that hour, instead of starting a new
// grace of retries at each resync.
func TestDryRunGraceFollowsALongResync(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const key = "v1/ConfigMap/apps/settings"
	g := DryRunGrace{Resync: time.Hour}
	for i := range GraceTries {
		g.Lasted(addon, key, t0.Add(time.Duration(i)*time.Minute))
	}
	if first, ok := g.Lasted(addon, key, t0.Add(time.Hour)); !ok || !first.Equal(t0) {
		t.Errorf("a failure an hour-long resync later: %v, %v; want still refused, failing since %v", first, ok, t0)
	}
}

// TestGraceKeyNamesTheFailedWebhook: the name of a webhook the API server
// failed to call is parsed once (apply.FailedWebhook) and is what the
// grace counts under; a webhook that answered and refused, a 500 of
// another kind, or a message whose name cannot be read counts under the
// object's key.
func TestGraceKeyNamesTheFailedWebhook(t *testing.T) {
	const key = "v1/ConfigMap/apps/a"
	for _, tc := range []struct {
		name string
		err  error
		hook string
	}{
		{"no error", nil, ""},
		{"a webhook down", apierrors.NewInternalError(errors.New(`failed calling webhook "left.behind.example.com": failed to call webhook: Post "https://gone.gone.svc:443/validate": service "gone" not found`)), "left.behind.example.com"},
		{"a webhook that refused", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New(`admission webhook "policy.example.com" denied the request`)), ""},
		{"the words, not a 500", apierrors.NewBadRequest(`failed calling webhook "x.example.com"`), ""},
		{"a 500 of another kind", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), ""},
		{"no name to read", apierrors.NewInternalError(errors.New(`failed calling webhook ""`)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := apply.FailedWebhook(tc.err)
			if hook != tc.hook {
				t.Fatalf("FailedWebhook: %q; want %q", hook, tc.hook)
			}
			want := key
			if tc.hook != "" {
				want = "webhook " + tc.hook
			}
			if got := GraceKey(key, hook); got != want {
				t.Errorf("GraceKey: %q; want %q", got, want)
			}
		})
	}
}
