package server

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/testcontroller"
	"capstan.dev/capstan/internal/values"
)

// TestFormCheckTypesSecretInputsAsTheController: the page checks its
// secret inputs as the controller will read them, each a targetPath entry
// of a Secret, so a writeOnly integer or boolean typed on the page (a PIN,
// a flag) is accepted as the controller accepts it, and one that is not a
// number is refused, naming the field without quoting it. A kept secret
// input the form left empty is not judged, whatever its targetPath.
func TestFormCheckTypesSecretInputsAsTheController(t *testing.T) {
	archive, err := testcontroller.ChartArchive("pin", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: pin\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer"},` +
			`"pin":{"type":"integer","writeOnly":true},"audit":{"type":"boolean","writeOnly":true},` +
			`"auth":{"type":"object","properties":{"password":{"type":"string","writeOnly":true}}},` +
			`"servers":{"type":"array","items":{"type":"object","properties":{"pin":{"type":"integer","writeOnly":true}}}},` +
			`"a.b":{"type":"integer","writeOnly":true},"c/d":{"type":"integer","writeOnly":true}}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "pin", Version: "1.0.0"}}
	vals := map[string]any{"replicas": float64(2)}

	errs, err := checkFormValues(art, "app", vals, map[string]string{"pin": "1234", "audit": "true", "auth.password": "hunter2"}, nil)
	if err != nil || len(errs) != 0 {
		t.Errorf("a writeOnly integer and boolean typed on the page: %v %+v; want them accepted", err, errs)
	}
	errs, err = checkFormValues(art, "app", vals, map[string]string{"pin": "12ab"}, nil)
	if err != nil || len(errs) != 1 || errs[0].Path != "/pin" || strings.Contains(errs[0].Message, "12ab") {
		t.Errorf("a writeOnly integer that is not a number: %v %+v; want one error at /pin that quotes nothing", err, errs)
	}
	if errs, err := checkFormValues(art, "app", vals, map[string]string{"auth.password": "new"}, []string{"pin", "auth.password"}); err != nil || len(errs) != 0 {
		t.Errorf("a kept writeOnly integer: %v %+v; want it not judged", err, errs)
	}
	// NOTE: a secret input's path is a targetPath, as the CLI's
	// --secret-input writes it: a list index, a key with a dot or a slash.
	kept := []string{`servers[0].pin`, `a\.b`, `c/d`}
	if errs, err := checkFormValues(art, "app", vals, nil, kept); err != nil || len(errs) != 0 {
		t.Errorf("kept writeOnly integers at %q: %v %+v; want them not judged", kept, err, errs)
	}
	errs, err = checkFormValues(art, "app", vals, map[string]string{`servers[0].pin`: "12ab"}, kept[1:])
	if err != nil || len(errs) != 1 || errs[0].Path != "/servers/0/pin" {
		t.Errorf("a writeOnly integer typed at servers[0].pin that is not a number: %v %+v; want one error at /servers/0/pin", err, errs)
	}
}

// TestSecretValueErrorsNameTargetPaths: the page names a secret input
// typed into the YAML as a targetPath, the form its secret field takes, so
// one under a list or at a key that holds a dot is named where it is; one
// the add-on holds already, unchanged, is not refused.
func TestSecretValueErrorsNameTargetPaths(t *testing.T) {
	errs := []capstanv1.ValuesError{
		{Path: "/a.b", Rule: values.RuleWriteOnly},
		{Path: "/servers/0/pin", Rule: values.RuleWriteOnly},
		{Path: "/users/10001/password", Rule: values.RuleWriteOnly},
		{Path: "/pins/007", Rule: values.RuleWriteOnly},
		{Path: "/auth/password", Rule: values.RuleWriteOnly},
		{Path: "/replicas", Rule: "type"},
	}
	// NOTE: a map's key of digits is named as a key, which a targetPath
	// reads back as that key, not as a list's index.
	vals := map[string]any{"a.b": float64(1), "servers": []any{map[string]any{"pin": float64(2)}},
		"users": map[string]any{"10001": map[string]any{"password": "p"}}, "pins": map[string]any{"007": "p"},
		"auth": map[string]any{"password": "kept"}, "replicas": "two"}
	current := map[string]any{"auth": map[string]any{"password": "kept"}}
	rest, set := secretValueErrors(errs, vals, current)
	if want := []string{`a\.b`, `servers[0].pin`, `users.10001.password`, `pins.007`}; !slices.Equal(set, want) {
		t.Errorf("set = %q; want %q", set, want)
	}
	var paths []string
	for _, e := range rest {
		paths = append(paths, e.Path)
	}
	if want := []string{"/a.b", "/servers/0/pin", "/users/10001/password", "/pins/007", "/replicas"}; !slices.Equal(paths, want) {
		t.Errorf("rest at %q; want %q", paths, want)
	}
}
