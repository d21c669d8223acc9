package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

// TestRefusalStandsDecides checks when a refused registration is kept
// without reading the manifest again: only for the same address and
// applied render, with no sync request, while the condition still says so.
func TestRefusalStandsDecides(t *testing.T) {
	refused := func(reason string) *capstanv1.Addon {
		a := &capstanv1.Addon{}
		apimeta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: capstanv1.ConditionRegistered,
			Status: metav1.ConditionFalse, Reason: reason})
		return a
	}
	same := registrationCheck{source: "http://10.96.0.20:8080/m", appliedHash: "h1"}
	for _, tc := range []struct {
		name  string
		now   registrationCheck
		addon *capstanv1.Addon
		sync  bool
		want  bool
	}{
		{name: "name taken, nothing changed", now: same, addon: refused("NameTaken"), want: true},
		{name: "manifest invalid, nothing changed", now: same, addon: refused("ManifestInvalid"), want: true},
		{name: "a new apply", now: registrationCheck{source: same.source, appliedHash: "h2"}, addon: refused("NameTaken")},
		{name: "another address", now: registrationCheck{source: "http://10.96.0.21:8080/m", appliedHash: "h1"}, addon: refused("NameTaken")},
		{name: "a sync request", now: same, addon: refused("NameTaken"), sync: true},
		{name: "the condition says something else now", now: same, addon: refused("PrimaryNotFound")},
		{name: "no condition", now: same, addon: &capstanv1.Addon{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusalStands(same, tc.now, tc.addon, tc.sync); got != tc.want {
				t.Errorf("refusalStands = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRegisterRefusedNameListsOnce registers an add-on whose name another
// Addon holds, three times with nothing changed: the manifest is read and
// the Addons listed once, not at every reconcile; a sync request checks
// again.
func TestRegisterRefusedNameListsOnce(t *testing.T) {
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reads.Add(1)
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	}))
	defer srv.Close()
	fetcher, err := source.NewFetcher(source.Options{Guard: netguard.Config{LoopbackOnly: true, Allow: []string{srv.Listener.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rival := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "wiki", UID: "rival"}}
	rival.Status.Registration = &capstanv1.Registration{Name: "wiki"}
	var lists atomic.Int32
	reader := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(rival).WithStatusSubresource(rival).Build(),
		interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists.Add(1)
			return c.List(ctx, list, opts...)
		}})
	r := &AddonReconciler{APIReader: reader, Fetcher: fetcher}

	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki", UID: "self"}}
	addon.Spec.Registration = &capstanv1.RegistrationSource{URL: srv.URL + "/manifest.json"}
	addon.Status.AppliedHash = "h1"
	artifact := &source.Artifact{Chart: &source.Chart{Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{
		Name: "wiki", Annotations: map[string]string{capstanv1.ChartAddonAnnotation: "true"}}}}}
	reconcile := func(sync bool) {
		t.Helper()
		s := &scope{addon: addon, artifact: artifact, profile: capstanv1.ProfileCluster}
		s.verdict.HandledSyncRequest = sync
		if _, err := r.register(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if c := apimeta.FindStatusCondition(addon.Status.Conditions, capstanv1.ConditionRegistered); c == nil || c.Reason != "NameTaken" {
			t.Fatalf("condition %+v, want NameTaken", c)
		}
	}
	for range 3 {
		reconcile(false)
	}
	if reads.Load() != 1 || lists.Load() != 1 {
		t.Errorf("three reconciles of a refused name read the manifest %d times and listed the Addons %d times, want once each",
			reads.Load(), lists.Load())
	}
	reconcile(true)
	if reads.Load() != 2 || lists.Load() != 2 {
		t.Errorf("a sync request read the manifest %d times and listed %d times in all, want twice each", reads.Load(), lists.Load())
	}
}
