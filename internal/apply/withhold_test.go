package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// plainValue is a Secret's value that no mask knows: it is no Helm value.
const plainValue = "s3cret-from-the-manifest"

// refuser is a client that answers each apply with the next of applies
// (nil takes it), and deletes with deleteErr; an object is live until a
// delete succeeds. What an admission policy refuses is the API server's
// business; how Capstan words the refusal is pure logic.
type refuser struct {
	client.Client
	applies   []error
	deleteErr error
	deleted   bool
}

func (r *refuser) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	err := r.applies[0]
	r.applies = r.applies[1:]
	return err
}

func (r *refuser) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.deleted {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	obj.SetName(key.Name)
	obj.SetNamespace(key.Namespace)
	obj.SetUID("uid-1")
	return nil
}

func (r *refuser) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	if r.deleteErr != nil {
		return r.deleteErr
	}
	r.deleted = true
	return nil
}

// TestApplyErrorsOfASecretAreWithheld: an admission policy that quotes a
// Secret's data in its refusal, of the apply, of the delete of a recreate
// or of the apply after it, has its message worded by Sequence.Refused,
// which withholds it; the error still is the API server's for errors.As.
// Another kind's refusal is left as it is.
func TestApplyErrorsOfASecretAreWithheld(t *testing.T) {
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s",
		errors.New(`admission webhook "policy.example.com" denied the request: data.password is "`+plainValue+`"`))
	immutable := apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s",
		field.ErrorList{field.Invalid(field.NewPath("data"), plainValue, "field is immutable")})
	obj := func(kind string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind(kind)
		o.SetNamespace("ns")
		o.SetName("s")
		return o
	}
	for _, tc := range []struct {
		name      string
		kind      string
		recreate  bool
		gone      bool // the object is gone when the recreate reads it
		applies   []error
		deleteErr error
		says      string
		withheld  bool
	}{
		{name: "apply", kind: "Secret", applies: []error{denied}, says: "applying Secret ns/s: withheld", withheld: true},
		{name: "invalid apply", kind: "Secret", applies: []error{immutable}, says: "applying Secret ns/s: withheld", withheld: true},
		{name: "delete of a recreate", kind: "Secret", recreate: true, applies: []error{immutable}, deleteErr: denied,
			says: "deleting Secret ns/s to create it anew: withheld", withheld: true},
		{name: "apply of a recreate", kind: "Secret", recreate: true, applies: []error{immutable, denied},
			says: "Secret ns/s was deleted to be created anew, and creating it failed, so it is missing until a sync creates it: withheld", withheld: true},
		{name: "apply of a recreate that finds it gone", kind: "Secret", recreate: true, gone: true, applies: []error{immutable, denied},
			says: "withheld", withheld: true},
		{name: "another kind", kind: "ConfigMap", applies: []error{denied}, says: plainValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(tc.kind)
			c := &refuser{applies: tc.applies, deleteErr: tc.deleteErr, deleted: tc.gone}
			q := Sequence{
				Applier: &Applier{Client: c, Poll: 4 * time.Millisecond}, Objects: []*unstructured.Unstructured{o}, Changed: []*unstructured.Unstructured{o},
				Refused: func(*unstructured.Unstructured, error) string { return "withheld" },
			}
			if tc.recreate {
				q.Recreate = map[*unstructured.Unstructured]types.UID{o: "uid-1"}
			}
			_, err := q.Run(context.Background())
			if err == nil {
				t.Fatal("the sequence applied a refused object")
			}
			if !strings.Contains(err.Error(), tc.says) || tc.withheld && strings.Contains(err.Error(), plainValue) {
				t.Errorf("error %q; want it to say %q", err, tc.says)
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Errorf("error %q is no longer the API server's", err)
			}
		})
	}
}

// TestRefusalsOfASecretOutsideItsApplyAreWithheld: the apply of an
// adopted Secret's owner labels (an update of the whole object to an
// admission policy) has its refusal worded by Sequence.Refused, and the
// refusal of a Secret's delete, by a prune, an uninstall, a single
// delete or an install's undo of what it created, has its message
// withheld whoever deletes it; the error still is the API server's.
// Another kind's refusal is left as it is.
func TestRefusalsOfASecretOutsideItsApplyAreWithheld(t *testing.T) {
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s",
		errors.New(`admission webhook "policy.example.com" denied the request: data.password is "`+plainValue+`"`))
	ref := func(kind string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: kind, Namespace: "ns", Name: "s"}
	}
	check := func(t *testing.T, what string, err error, withheldToo bool) {
		t.Helper()
		var status apierrors.APIStatus
		switch {
		case err == nil:
			t.Errorf("%s: no error", what)
		case withheldToo && (strings.Contains(err.Error(), plainValue) || !strings.Contains(err.Error(), "Forbidden")):
			t.Errorf("%s: %q; want the message withheld, and the reason said", what, err)
		case !withheldToo && !strings.Contains(err.Error(), plainValue):
			t.Errorf("%s: %q; want the API server's message", what, err)
		case !errors.As(err, &status):
			t.Errorf("%s: %q is no longer the API server's", what, err)
		}
	}
	for _, kind := range []string{"Secret", "ConfigMap"} {
		secret := kind == "Secret"
		t.Run(kind, func(t *testing.T) {
			q := Sequence{
				Applier: &Applier{Client: &refuser{applies: []error{denied}}}, Adopted: map[capstanv1.ObjectRef]Adoption{ref(kind): {UID: "uid-1"}},
				Refused: func(*unstructured.Unstructured, error) string { return "withheld: Forbidden" },
			}
			_, err := q.Run(context.Background())
			check(t, "the adoption's labels", err, secret)

			q = Sequence{Applier: &Applier{Client: &refuser{deleteErr: denied}}, Inventory: []capstanv1.ObjectRef{ref(kind)}, Prune: []capstanv1.ObjectRef{ref(kind)}, Keep: Pruning}
			_, err = q.Run(context.Background())
			check(t, "a prune", err, secret)

			a := &Applier{Client: &refuser{deleteErr: denied}}
			_, err = a.DeleteAll(context.Background(), []capstanv1.ObjectRef{ref(kind)}, Deleting{})
			check(t, "an uninstall", err, secret)
			_, err = a.DeleteAll(context.Background(), []capstanv1.ObjectRef{ref(kind)}, Deleting{Keep: Uninstalling})
			check(t, "an uninstall that reads first", err, secret)
			check(t, "a delete", a.Delete(context.Background(), ref(kind), metav1.DeletePropagationBackground), secret)
			_, err = a.undo(context.Background(), []created{{ref: ref(kind), uid: "uid-1"}})
			check(t, "the undo of an install", err, secret)
		})
	}
}

// unreadable is a refuser whose reads fail with getErr.
type unreadable struct {
	refuser
	getErr error
}

func (u *unreadable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return u.getErr
}

// TestOnlyTheDeleteOfASecretIsWithheld: a Secret's delete that fails
// before any delete is sent, on the read of its metadata or on the
// holder's read of another Addon, says what failed, as for any kind: no
// admission quotes a Secret in the answer to a read.
func TestOnlyTheDeleteOfASecretIsWithheld(t *testing.T) {
	secret := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "s"}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "capstan.dev", Resource: "addons"}, "other",
		errors.New(`User "system:serviceaccount:capstan:controller" cannot get resource "addons"`))
	holder := func(context.Context, capstanv1.ObjectRef, metav1.Object) (Hold, error) {
		return Hold{}, fmt.Errorf("reading Addon ns/other, whose labels are on Secret ns/s: %w", forbidden)
	}
	a := &Applier{Client: &refuser{}}
	_, err := a.DeleteAll(context.Background(), []capstanv1.ObjectRef{secret}, Deleting{Holder: holder})
	if err == nil || !strings.Contains(err.Error(), `reading Addon ns/other, whose labels are on Secret ns/s: addons.capstan.dev "other" is forbidden`) {
		t.Errorf("the holder's failed read: %v", err)
	}
	unavailable := apierrors.NewServiceUnavailable("etcd is restarting")
	a = &Applier{Client: &unreadable{getErr: unavailable}}
	_, err = a.DeleteAll(context.Background(), []capstanv1.ObjectRef{secret}, Deleting{Keep: Uninstalling})
	if err == nil || !strings.Contains(err.Error(), "etcd is restarting") {
		t.Errorf("the failed read of the Secret's metadata: %v", err)
	}
}
