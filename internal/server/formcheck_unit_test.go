package server

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
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

	errs, err := checkFormValues(art, "app", vals, map[string]string{"pin": "1234", "audit": "true", "auth.password": "hunter2"}, nil, nil)
	if err != nil || len(errs) != 0 {
		t.Errorf("a writeOnly integer and boolean typed on the page: %v %+v; want them accepted", err, errs)
	}
	errs, err = checkFormValues(art, "app", vals, map[string]string{"pin": "12ab"}, nil, nil)
	if err != nil || len(errs) != 1 || errs[0].Path != "/pin" || strings.Contains(errs[0].Message, "12ab") {
		t.Errorf("a writeOnly integer that is not a number: %v %+v; want one error at /pin that quotes nothing", err, errs)
	}
	if errs, err := checkFormValues(art, "app", vals, map[string]string{"auth.password": "new"}, []string{"pin", "auth.password"}, nil); err != nil || len(errs) != 0 {
		t.Errorf("a kept writeOnly integer: %v %+v; want it not judged", err, errs)
	}
	// NOTE: a secret input's path is a targetPath, as the CLI's
	// --secret-input writes it: a list index, a key with a dot or a slash.
	kept := []string{`servers[0].pin`, `a\.b`, `c/d`}
	if errs, err := checkFormValues(art, "app", vals, nil, kept, nil); err != nil || len(errs) != 0 {
		t.Errorf("kept writeOnly integers at %q: %v %+v; want them not judged", kept, err, errs)
	}
	errs, err = checkFormValues(art, "app", vals, map[string]string{`servers[0].pin`: "12ab"}, kept[1:], nil)
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
	rest, setPaths := secretValueErrors(errs, vals, current)
	set, _ := addons.SecretInputNames(setPaths)
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

// TestSecretInputsWithAnEmptyKeyAreGivenWhole: a secret input at a path
// with an empty key (pins: {"": ...}) can be named by no targetPath, and
// so by no secretInputs entry nor secret field. The API's and the page's
// refusals name it by its JSON pointer and say to give it in a Secret that
// valuesFrom merges whole (addons.EmptyKeySecrets), offering it no
// secretInputs entry, while a scalar beside it is still sent as one; so
// does the API's warning of one that spec.values holds already.
func TestSecretInputsWithAnEmptyKeyAreGivenWhole(t *testing.T) {
	errs := []capstanv1.ValuesError{{Path: "/pins/", Rule: values.RuleWriteOnly}, {Path: "/auth/password", Rule: values.RuleWriteOnly}}
	vals := map[string]any{"pins": map[string]any{"": "1234"}, "auth": map[string]any{"password": "pw"}}
	spec := capstanv1.AddonSpec{Values: &apiextensionsv1.JSON{Raw: []byte(`{"pins":{"":"1234"},"auth":{"password":"pw"}}`)}}
	// NOTE: the API's refusal reads the values from the spec, as
	// checkSecretValues does.
	specVals, _ := specValues(&capstanv1.Addon{Spec: spec})
	for _, c := range []struct {
		name   string
		errs   []capstanv1.ValuesError
		scalar bool
	}{
		{"alone", errs[:1], false},
		{"beside a scalar", errs, true},
	} {
		_, set := secretValueErrors(c.errs, vals, nil)
		api := (&addons.SecretValuesError{Paths: refusalNames(set), Where: "spec.values", Instead: secretAdvice(specVals, set, apiSecrets, "")}).Error()
		page := secretValuesMessage(set, vals, nil, nil, "nothing was saved")
		for who, msg := range map[string]string{"the API": api, "the page": page} {
			if !strings.Contains(msg, addons.EmptyKeySecrets([]string{"/pins/"})) {
				t.Errorf("%s, %s: %s; want it to say how to give /pins/ whole (%s)", who, c.name, msg, addons.EmptyKeySecrets([]string{"/pins/"}))
			}
			if strings.Count(msg, "empty key") != 1 || strings.Contains(msg, `"/pins/`) || strings.Contains(msg, "1234") {
				t.Errorf("%s, %s: %s; want /pins/ offered no secret input, its advice said once, and no secret quoted", who, c.name, msg)
			}
		}
		if c.scalar != strings.Contains(api, `{"secretInputs": {"auth.password": "..."}}`) {
			t.Errorf("the API, %s: %s; want auth.password, and only it, sent in secretInputs: %t", c.name, api, c.scalar)
		}
		if c.scalar != strings.Contains(page, "type it into its secret field") {
			t.Errorf("the page, %s: %s; want a secret field offered for auth.password: %t", c.name, page, c.scalar)
		}
	}
	// One that spec.values holds already is named the same in the
	// warning that lets the edit through.
	_, held := secretValueErrors(errs[:1], vals, nil)
	if msg := heldSecretInputs(vals, held); !strings.Contains(msg, addons.EmptyKeySecrets([]string{"/pins/"})) || strings.Count(msg, "empty key") != 1 {
		t.Errorf("the API's warning of /pins/ held: %s; want it to say once how to give it whole", msg)
	}
	// A held object is said to go whole in a Secret, not in secretInputs.
	obj := []values.SecretInputPath{{Segments: []string{"creds"}, Name: "creds", Named: true}}
	if msg := heldSecretInputs(map[string]any{"creds": map[string]any{"key": "k"}}, obj); !strings.Contains(msg, addons.NonScalarSecrets([]string{"creds"})) || strings.Contains(msg, "secretInputs") {
		t.Errorf("the API's warning of an object held: %s; want it told to go whole in a Secret, not in secretInputs", msg)
	}
}

// refusalNames are the names of paths, as a refusal says them.
func refusalNames(paths []values.SecretInputPath) []string {
	out, _ := addons.SecretInputNames(paths)
	return out
}

// TestSecretAdviceSaysEachPathsWay: the page's refusal and the API's
// warning of secret inputs held already are one text, each way of giving a
// secret input said once: with an object, a path with an empty key and a
// scalar among them, the two given whole in a Secret come first, the
// scalar is named with its own way (its secret field, "secretInputs"),
// and what was left undone ends the refusal, once.
func TestSecretAdviceSaysEachPathsWay(t *testing.T) {
	errs := []capstanv1.ValuesError{{Path: "/creds", Rule: values.RuleWriteOnly}, {Path: "/pins/", Rule: values.RuleWriteOnly}, {Path: "/auth/password", Rule: values.RuleWriteOnly}}
	vals := map[string]any{"creds": map[string]any{"key": "AK"}, "pins": map[string]any{"": "1234"}, "auth": map[string]any{"password": "pw"}}
	_, paths := secretValueErrors(errs, vals, nil)
	whole := addons.NonScalarSecrets([]string{"creds"}) + "; " + addons.EmptyKeySecrets([]string{"/pins/"})
	page := secretValuesMessage(paths, vals, nil, nil, "nothing was saved")
	if want := "take it out of the YAML; " + whole + "; for auth.password, type it into its secret field"; !strings.Contains(page, want) ||
		!strings.HasSuffix(page, "; nothing was saved.") || strings.Count(page, "nothing was") != 1 {
		t.Errorf("the page's refusal:\n%s\nwant it to hold %q, and end saying once that nothing was saved", page, want)
	}
	held := heldSecretInputs(vals, paths)
	const null = ", with null at its path in spec.values"
	if want := addons.NonScalarSecrets([]string{"creds"}) + null + "; " + addons.EmptyKeySecrets([]string{"/pins/"}) + null +
		`; for auth.password, move it to a Secret (the API's "secretInputs"`; !strings.Contains(held, want) {
		t.Errorf("the API's warning of secret inputs held:\n%s\nwant it to hold %q", held, want)
	}
	for who, msg := range map[string]string{"the page": page, "the warning": held} {
		if strings.Contains(msg, "AK") || strings.Contains(msg, "1234") || strings.Contains(msg, "pw") {
			t.Errorf("%s quotes a secret: %s", who, msg)
		}
	}
	// The API and the catalog say what was left undone once, last, however
	// the secret inputs are given: the catalog, which only creates, says
	// so for an object too.
	for _, tc := range []struct {
		way     secretWay
		outcome string
	}{{apiSecrets, "nothing was written"}, {catalogSecrets, "nothing was created"}} {
		for _, p := range [][]values.SecretInputPath{paths, paths[:1], paths[2:]} {
			if msg := secretAdvice(vals, p, tc.way, ""); !strings.HasSuffix(msg, "; "+tc.outcome) || strings.Count(msg, "nothing was") != 1 {
				t.Errorf("the refusal of %v: %s; want it to end saying once %q", refusalNames(p), msg, tc.outcome)
			}
		}
	}
}

// TestRedrawKeepsAListTheSaveMakesSecret: the form drawn again after a
// refused save keeps, as a plain field, a list that the save's values
// make secret; dropped, its value would not be posted back, and the next
// save of an edit would take it out of spec.values without putting it in
// a Secret. The form drawn first drops such a list, as before.
func TestRedrawKeepsAListTheSaveMakesSecret(t *testing.T) {
	fields := func() []formField {
		return []formField{{Path: "mode", Kind: "string"}, {Path: "ldap", Kind: "object", Children: []formField{
			{Path: "ldap.bindPassword", Kind: "string"},
			{Path: "ldap.servers", Kind: "array", Item: "string", Value: "a.example\nb.example"},
		}}}
	}
	secret := [][]string{{"ldap"}}
	paths := func(fs []formField) map[string]bool {
		out := map[string]bool{}
		walkFields(fs, func(f *formField) { out[f.Path] = f.WriteOnly })
		return out
	}
	redrawn := paths(applySecretPaths(fields(), secret, true))
	if secret, ok := redrawn["ldap.servers"]; !ok || secret {
		t.Errorf("drawn again, the form's fields are %v; want ldap.servers kept as a plain field", redrawn)
	}
	if !redrawn["ldap.bindPassword"] {
		t.Errorf("drawn again, the form's fields are %v; want ldap.bindPassword a secret field", redrawn)
	}
	if first := paths(applySecretPaths(fields(), secret, false)); len(first) != 2 || !first["ldap.bindPassword"] {
		t.Errorf("drawn first, the form's fields are %v; want mode and the secret ldap.bindPassword, the list dropped", first)
	}
}

// TestHeldSecretInputsSayWhatToDoWithEach: the API's warning of several
// secret inputs spec.values holds already says what to do with each,
// sending them all in one "secretInputs" that names every path, rather
// than "move it to a Secret" after a list of paths; many are warned of by
// the first few, and the rest counted, so that the Warning header stays
// short.
func TestHeldSecretInputsSayWhatToDoWithEach(t *testing.T) {
	errs := []capstanv1.ValuesError{{Path: "/auth/password", Rule: values.RuleWriteOnly}, {Path: "/db/token", Rule: values.RuleWriteOnly}}
	vals := map[string]any{"auth": map[string]any{"password": "pw"}, "db": map[string]any{"token": "tk"}}
	_, paths := secretValueErrors(errs, vals, nil)
	held := heldSecretInputs(vals, paths)
	if want := `Blocks the Addon for them; move each to a Secret: send them all in the API's "secretInputs" ({"secretInputs": {"auth.password": "...", "db.token": "..."}}), which keeps them in one Secret, with null at each one's path in spec.values`; !strings.Contains(held, want) ||
		strings.Contains(held, "move it") || strings.Contains(held, "pw") || strings.Contains(held, "tk") {
		t.Errorf("the warning of two secret inputs held:\n%s\nwant it to hold %q, and no value", held, want)
	}
	if one := heldSecretInputs(vals, paths[:1]); !strings.Contains(one, `for it; move it to a Secret (the API's "secretInputs", with null at its path in spec.values)`) {
		t.Errorf("the warning of one secret input held: %s", one)
	}

	users := make([]any, 40)
	errs = nil
	for i := range users {
		users[i] = map[string]any{"password": "pw"}
		errs = append(errs, capstanv1.ValuesError{Path: fmt.Sprintf("/users/%d/password", i), Rule: values.RuleWriteOnly})
	}
	vals = map[string]any{"users": users}
	_, paths = secretValueErrors(errs, vals, nil)
	held = heldSecretInputs(vals, paths)
	if !strings.Contains(held, "users[9].password and 30 more not named here,") || strings.Contains(held, "users[10].password") ||
		!strings.Contains(held, "the 30 not named here, each the same way") || len(held) > 2000 {
		t.Errorf("the warning of 40 secret inputs held (%d bytes):\n%s\nwant the first 10 named and 30 counted", len(held), held)
	}
}

// TestRefusalOfAKeptListSaysToClearIt: when a save's values make a list,
// or its items, writeOnly, the form drawn again keeps the list as a plain
// field (TestRedrawKeepsAListTheSaveMakesSecret), which has no secret
// field and whose value need not be in the YAML: the refusal says to clear
// that list field and give the list in a Secret named in valuesFrom, not
// to take it out of the YAML or type it into a secret field. A scalar
// beside it keeps its own advice.
func TestRefusalOfAKeptListSaysToClearIt(t *testing.T) {
	for _, tc := range []struct{ name, then string }{
		{"the list", `{"properties": {"ldap": {"properties": {"servers": {"writeOnly": true}}}}}`},
		{"its items", `{"properties": {"ldap": {"properties": {"servers": {"items": {"writeOnly": true}}}}}}`},
	} {
		archive, err := testcontroller.ChartArchive("ldap", map[string]string{
			"Chart.yaml": "apiVersion: v2\nname: ldap\nversion: 1.0.0\n",
			"values.schema.json": `{"type": "object",
  "if": {"required": ["mode"], "properties": {"mode": {"const": "ldap"}}},
  "then": ` + tc.then + `,
  "properties": {
    "mode": {"type": "string", "enum": ["local", "ldap"]},
    "apiKey": {"type": "string", "writeOnly": true},
    "ldap": {"type": "object", "properties": {"servers": {"type": "array", "items": {"type": "string"}}}}}}`,
		})
		if err != nil {
			t.Fatal(err)
		}
		ch, err := loader.LoadArchive(bytes.NewReader(archive))
		if err != nil {
			t.Fatal(err)
		}
		art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "ldap", Version: "1.0.0"}}
		for _, withScalar := range []bool{false, true} {
			fields, err := chartForm(ch, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			vals := map[string]any{"mode": "ldap", "ldap": map[string]any{"servers": []any{"a.example", "b.example"}}}
			if withScalar {
				vals["apiKey"] = "k"
			}
			errs, err := checkFormValues(art, "web", vals, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, set := secretValueErrors(errs, vals, nil)
			var turned, lists []string
			_, turned, lists = remarkSecretFields(fields, ch, vals, nil, nil)
			if !slices.Equal(lists, []string{"ldap.servers"}) {
				t.Fatalf("%s: the lists kept plain are %q; want ldap.servers", tc.name, lists)
			}
			page := secretValuesMessage(set, vals, turned, lists, "nothing was saved")
			want := "for ldap.servers, clear the list field of ldap.servers (kept as it was, so that the list is not lost), and any of it in the YAML, then " + addons.WholeSecret
			if !strings.Contains(page, want) || !strings.HasSuffix(page, "; nothing was saved.") || strings.Contains(page, "a.example") {
				t.Errorf("%s, scalar beside it %t: the refusal:\n%s\nwant it to hold %q, end saying nothing was saved, and quote no value", tc.name, withScalar, page, want)
			}
			if withScalar != strings.Contains(page, "for apiKey, type it into its secret field") ||
				strings.Contains(page, "ldap.servers[0], type it") || strings.Contains(page, "ldap.servers is an object or a list") {
				t.Errorf("%s, scalar beside it %t: the refusal:\n%s\nwant only apiKey sent to a secret field, and the list given no other advice", tc.name, withScalar, page)
			}
			if !withScalar && strings.Contains(page, "take it out of the YAML") {
				t.Errorf("%s: the refusal:\n%s\nwant no \"take it out of the YAML\" for a list the form holds", tc.name, page)
			}
		}
	}
}
