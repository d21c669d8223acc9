package hooks_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
)

// holdFinalizer keeps a ConfigMap, and so its namespace, while a test
// reads the namespace Terminating.
const holdFinalizer = "capstan.dev/test-hold"

// holdNamespace puts a ConfigMap with a finalizer in ns, so that ns stays
// Terminating once deleted, until the test ends and lets it go.
func holdNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hold", Finalizers: []string{holdFinalizer}}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		patch := client.MergeFrom(cm.DeepCopy())
		cm.Finalizers = nil
		if err := admin.Patch(ctx, cm, patch); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}

func deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteHookNamespaceGone runs the pre-delete hooks of an add-on whose
// hooks' namespace is gone: missing, though the Addon has createNamespace
// (it is never made for a delete hook, since an uninstall never deletes a
// Namespace and would leave it behind); being deleted when the runner
// reads it; and deleted between two hooks, after the runner read it, so
// that the API server refuses the Job (NamespaceTerminating). Each is a
// hooks.NamespaceGone that names the namespace, and no Job is made.
func TestDeleteHookNamespaceGone(t *testing.T) {
	ctx := context.Background()

	t.Run("missing", func(t *testing.T) {
		f := newFixture(t)
		target := f.ns + "-gone"
		f.addon.Spec.TargetNamespace, f.addon.Spec.CreateNamespace = target, true
		hs := f.hooksOf("", false)
		for _, h := range hs {
			h.Object.SetNamespace(target)
		}
		err := f.run("pre-delete", hs, minute)
		if why, gone := hooks.NamespaceGone(err); !gone || why != "the namespace "+target+" does not exist" {
			t.Errorf("Run returned %v; want the namespace %s named as missing", err, target)
		}
		if err := admin.Get(ctx, client.ObjectKey{Name: target}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("the namespace %s was made for a pre-delete hook (%v)", target, err)
		}
	})

	t.Run("being-deleted", func(t *testing.T) {
		f := newFixture(t)
		holdNamespace(t, f.ns)
		deleteNamespace(t, f.ns)
		err := f.run("pre-delete", f.hooksOf("", false), minute)
		if why, gone := hooks.NamespaceGone(err); !gone || why != "the namespace "+f.ns+" is being deleted" {
			t.Errorf("Run returned %v; want the namespace %s named as being deleted", err, f.ns)
		}
		if f.job("db-backup") != nil {
			t.Error("the pre-delete Job was made in a namespace being deleted")
		}
	})

	t.Run("deleted-after-it-was-read", func(t *testing.T) {
		f := newFixture(t)
		holdNamespace(t, f.ns)
		hs := f.hooksOf(`{extraHooks: [{name: first, kind: ConfigMap, events: pre-delete, weight: "-20"}]}`, false)
		err := f.runner.Run(ctx, hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-delete", Hooks: hs, Timeout: minute,
			Progress: func(p capstanv1.HookProgress) error {
				if p.Name == "db-backup" {
					deleteNamespace(t, f.ns)
				}
				return nil
			}})
		why, gone := hooks.NamespaceGone(err)
		if !gone || why != "the namespace "+f.ns+" is being deleted" {
			t.Errorf("Run returned %v; want the namespace %s named as being deleted", err, f.ns)
		}
		if !strings.Contains(err.Error(), "Job "+f.ns+"/db-backup") {
			t.Errorf("the error does not name the hook: %v", err)
		}
		if f.job("db-backup") != nil {
			t.Error("the pre-delete Job was made in a namespace being deleted")
		}
	})
}
