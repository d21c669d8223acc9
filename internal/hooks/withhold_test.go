package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// quoted is a hook Secret's value that an admission policy quotes in its
// refusal; no mask knows it.
const quoted = "s3cret-of-the-migration"

// refuseDeletes makes the fixture's deletes fail as an admission policy
// refuses them when it quotes the object's data.
func (f *fixture) refuseDeletes() {
	f.applier.Client = interceptor.NewClient(admin, interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "creds",
				errors.New(`admission webhook "policy.example.com" denied the request: data.password is "`+quoted+`"`))
		},
	})
}

// TestARefusedDeleteOfAHookSecretIsWithheld: the refusal of a hook
// Secret's delete, by before-hook-creation, by hook-succeeded or by the
// clean-up of a recorded run, says that the API server refused the Secret
// and why in a word, never its message, which can quote the Secret's data;
// the error still is the API server's.
func TestARefusedDeleteOfAHookSecretIsWithheld(t *testing.T) {
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		var status apierrors.APIStatus
		switch {
		case err == nil:
			t.Errorf("%s: no error", what)
		case strings.Contains(err.Error(), quoted) || !strings.Contains(err.Error(), "the API server refused the Secret: Forbidden"):
			t.Errorf("%s: %q; want the message withheld, and the reason said", what, err)
		case !errors.As(err, &status):
			t.Errorf("%s: %q is no longer the API server's", what, err)
		}
	}
	f := newFixture(t)
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "creds", "namespace": f.ns},
		"stringData": map[string]any{"password": quoted},
	}}
	ctx := context.Background()
	run := func(policies ...string) error {
		h := render.Hook{Object: secret.DeepCopy(), Events: []string{"pre-upgrade"}, DeletePolicies: policies}
		return f.runner.Run(ctx, hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-upgrade", Hooks: []render.Hook{h}, Timeout: minute, Run: "pre-upgrade/one"})
	}
	if err := run(hooks.BeforeHookCreation); err != nil {
		t.Fatal(err)
	}
	f.refuseDeletes()
	check(t, "before-hook-creation", run(hooks.BeforeHookCreation))
	check(t, "hook-succeeded", run(hooks.HookSucceeded))
	_, err := f.runner.CleanUp(ctx, hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-upgrade", Timeout: minute},
		[]capstanv1.HookObject{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "Secret", Namespace: f.ns, Name: "creds"}, Run: "pre-upgrade/one"}})
	check(t, "the clean-up of a recorded run", err)
}
