package server

import (
	"bytes"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/testcontroller"
)

// TestEditCheckStandsInForValuesFrom: the edit form's check reads the
// add-on's valuesFrom as the controller layers it. A required secret that
// a person's Secret sets at a targetPath is stood in for, and its field
// held; one a whole-document entry may set is left to the controller's
// plan. Without either, the missing secret refuses the save, and a secret
// written into spec.values refuses it always.
func TestEditCheckStandsInForValuesFrom(t *testing.T) {
	archive, err := testcontroller.ChartArchive("vault", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: vault\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","required":["auth"],"properties":{"replicas":{"type":"integer","minimum":1},` +
			`"auth":{"type":"object","required":["password"],"properties":{"password":{"type":"string","writeOnly":true}}}}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "vault", Version: "1.0.0"}}
	fields, err := schemaForm(ch.Schema)
	if err != nil {
		t.Fatal(err)
	}
	addon := func(from ...capstanv1.ValuesReference) *capstanv1.Addon {
		return &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: capstanv1.AddonSpec{ValuesFrom: from}}
	}
	person := capstanv1.ValuesReference{Kind: "Secret", Name: "db-creds", TargetPath: "auth.password"}
	whole := capstanv1.ValuesReference{Kind: "Secret", Name: "app-values"}
	current := map[string]any{"replicas": float64(1)}
	for _, tc := range []struct {
		name         string
		a            *capstanv1.Addon
		vals         map[string]any
		errs, secret int
	}{
		{"a person's Secret at auth.password", addon(person), map[string]any{"replicas": float64(2)}, 0, 0},
		{"a whole-document Secret", addon(whole), map[string]any{"replicas": float64(2)}, 0, 0},
		{"a whole-document Secret, and replicas 0", addon(whole), map[string]any{"replicas": float64(0)}, 0, 0},
		{"a whole-document Secret, and a secret in the values", addon(whole), map[string]any{"auth": map[string]any{"password": "hunter2"}}, 1, 1},
		{"a person's Secret at auth.password, and a secret in the values", addon(person), map[string]any{"auth": map[string]any{"password": "hunter2"}}, 1, 1},
		{"no valuesFrom", addon(), map[string]any{"replicas": float64(2)}, 1, 0},
		{"a ConfigMap at another path", addon(capstanv1.ValuesReference{Kind: "ConfigMap", Name: "sizes", TargetPath: "replicas"}), map[string]any{"replicas": float64(2)}, 1, 0},
	} {
		form := &editForm{Fields: append([]formField(nil), fields...)}
		form.SecretPaths, form.fromPaths, form.WholeFrom = valuesFromOf(tc.a)
		errs, secret, err := form.check(art, "app", tc.vals, nil, current)
		if err != nil || len(errs) != tc.errs || len(secret) != tc.secret {
			t.Errorf("%s: %v, errors %+v, secret inputs in the values %q; want %d error(s) and %d secret input(s)", tc.name, err, errs, secret, tc.errs, tc.secret)
		}
	}
	form := &editForm{Fields: append([]formField(nil), fields...)}
	form.SecretPaths, form.fromPaths, form.WholeFrom = valuesFromOf(addon(person))
	form.fill(current)
	if f := form.Fields[0].Children[0]; f.Path != "auth.password" || !f.Held {
		t.Errorf("the field %s set by a person's Secret: held %v; want it held", f.Path, f.Held)
	}
}
