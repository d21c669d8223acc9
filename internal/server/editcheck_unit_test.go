package server

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/testcontroller"
	"capstan.dev/capstan/internal/values"
)

// namedPaths are the secret-input paths that the targetPaths names name.
func namedPaths(t *testing.T, names ...string) []values.SecretInputPath {
	t.Helper()
	var out []values.SecretInputPath
	for _, n := range names {
		segs, err := values.PathSegments(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, values.SecretInputPath{Segments: segs, Name: n, Named: true})
	}
	return out
}

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
			t.Errorf("%s: %v, errors %+v, secret inputs in the values %q; want %d error(s) and %d secret input(s)", tc.name, err, errs, refusalNames(secret), tc.errs, tc.secret)
		}
	}
	form := &editForm{Fields: append([]formField(nil), fields...)}
	form.SecretPaths, form.fromPaths, form.WholeFrom = valuesFromOf(addon(person))
	form.fill(current)
	if f := form.Fields[0].Children[0]; f.Path != "auth.password" || !f.Held {
		t.Errorf("the field %s set by a person's Secret: held %v; want it held", f.Path, f.Held)
	}
}

// TestSecretObjectsAndLists: the form makes each field of an object the
// schema marks writeOnly a secret field, whose secret inputs make the
// object up; a secret list, which no secret input can carry, is no field.
// A refusal of a secret object or list in the values, on the page or by
// the API, says to give it whole in a Secret named in valuesFrom, not in
// a secret field or secretInputs.
func TestSecretObjectsAndLists(t *testing.T) {
	fields, err := schemaForm([]byte(`{"type":"object","properties":{"replicas":{"type":"integer"},` +
		`"creds":{"type":"object","writeOnly":true,"properties":{"accessKey":{"type":"string"},"tls":{"type":"object","properties":{"key":{"type":"string"}}}}},` +
		`"keys":{"type":"array","items":{"type":"string","writeOnly":true}},"pins":{"type":"array","writeOnly":true,"items":{"type":"integer"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]bool{}
	var walk func([]formField)
	walk = func(fs []formField) {
		for _, f := range fs {
			if f.Kind != "object" {
				secret[f.Path] = f.WriteOnly
			}
			walk(f.Children)
		}
	}
	walk(fields)
	want := map[string]bool{"replicas": false, "creds.accessKey": true, "creds.tls.key": true}
	if !reflect.DeepEqual(secret, want) {
		t.Errorf("the form's fields, secret or not: %v; want %v (no field for a secret list)", secret, want)
	}

	vals := map[string]any{"creds": map[string]any{"accessKey": "AK"}, "keys": []any{"k1"}, "auth": map[string]any{"password": "pw"}}
	for _, paths := range [][]string{{"creds"}, {"keys"}, {"creds", "auth.password"}} {
		page := secretValuesMessage(namedPaths(t, paths...), vals, nil, nil, "nothing was saved")
		api := secretAdvice(vals, namedPaths(t, paths...), apiSecrets, "")
		for who, msg := range map[string]string{"the page": page, "the API": api} {
			if !strings.Contains(msg, "valuesFrom with no targetPath") || !strings.Contains(msg, paths[0]+" is an object or a list") || strings.Contains(msg, "AK") || strings.Contains(msg, "k1") {
				t.Errorf("%s refusing %q: %s; want it to say to give %s whole in a Secret named in valuesFrom, quoting no secret", who, paths, msg, paths[0])
			}
			if strings.Contains(msg, `"`+paths[0]+`": "..."`) || (len(paths) == 1 && strings.Contains(msg, "secret field, which keeps")) {
				t.Errorf("%s refusing %q: %s; want no secret field or secretInputs offered for it", who, paths, msg)
			}
		}
		if len(paths) > 1 && !strings.Contains(api, `"auth.password": "..."`) {
			t.Errorf("the API refusing %q: %s; want auth.password sent in secretInputs", paths, api)
		}
	}
}
