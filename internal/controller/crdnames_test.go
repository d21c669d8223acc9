package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/apply"
)

// TestACRDWhoseNamesClashFailsAtOnce: a CRD whose kind another CRD of its
// group already has is never Established (the API server says
// NamesAccepted False, KindConflict), and the wait for it fails within
// seconds, with the API server's reason, not after the CRD timeout (a
// minute by default), as it did before.
func TestACRDWhoseNamesClashFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	group := fmt.Sprintf("names%d.example.com", time.Now().UnixNano()%100000)
	first := foosCRD(group, "v1beta1")
	second := foosCRD(group, "v1beta1")
	second.Name = "gadgets." + group
	second.Spec.Names.Plural, second.Spec.Names.Singular, second.Spec.Names.ListKind = "gadgets", "gadget", "GadgetList"
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{first, second} {
		if err := admin.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
	}
	if err := apply.WaitForCRD(ctx, admin, first.Name, 100*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// As a sync waits for the CRDs it applied: polled each second, within
	// the default CRD timeout of a minute.
	start := time.Now()
	err := (&apply.Applier{Client: admin}).WaitEstablished(ctx, second.Name)
	took := time.Since(start)
	if err == nil {
		t.Fatal("a CRD whose kind another CRD of its group has was Established")
	}
	want := "CustomResourceDefinition " + second.Name + ": the API server does not accept its names (KindConflict): "
	if !strings.Contains(err.Error(), want) || took > 20*time.Second {
		t.Fatalf("after %s: %v; want at once %q", took.Round(time.Second), err, want)
	}
	t.Logf("after %s: %v", took.Round(100*time.Millisecond), err)
}

// TestAnEstablishedCRDWhoseNewNamesClashIsWaitedFor: an Established CRD
// given a short name another CRD of its group already has is refused the
// new name (NamesAccepted False, ShortNamesConflict) but goes on serving
// the names it had; the wait for it succeeds. (A wait that failed on any
// refused names would fail it whenever discovery lagged the first read.)
func TestAnEstablishedCRDWhoseNewNamesClashIsWaitedFor(t *testing.T) {
	ctx := context.Background()
	group := fmt.Sprintf("renames%d.example.com", time.Now().UnixNano()%100000)
	first := foosCRD(group, "v1beta1")
	first.Spec.Names.ShortNames = []string{"fo"}
	second := foosCRD(group, "v1beta1")
	second.Name = "gadgets." + group
	second.Spec.Names.Plural, second.Spec.Names.Singular, second.Spec.Names.Kind, second.Spec.Names.ListKind = "gadgets", "gadget", "Gadget", "GadgetList"
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{first, second} {
		if err := admin.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
		if err := apply.WaitForCRD(ctx, admin, crd.Name, 100*time.Millisecond, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKey{Name: second.Name}, cur); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			cur.Spec.Names.ShortNames = []string{"fo"}
			if err := admin.Update(ctx, cur); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, c := range cur.Status.Conditions {
			refused = refused || c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !refused {
		t.Fatal("the API server accepted a short name another CRD of the group has")
	}
	if err := apply.WaitForCRD(ctx, admin, second.Name, 100*time.Millisecond, 10*time.Second); err != nil {
		t.Fatalf("the wait for an Established CRD whose new short name clashes: %v", err)
	}
}
