package addons

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/testcontroller"
	"capstan.dev/capstan/internal/values"
)

// TestSecretValuesNameTargetPaths: the secret inputs a write would put into
// spec.values are named as targetPaths, as secretInputs and --secret-input
// take them, so one under a list or at a key that holds a dot, given back
// as told, lands where the chart's schema marks it writeOnly. One that the
// stored values hold already, unchanged, is named apart.
func TestSecretValuesNameTargetPaths(t *testing.T) {
	archive, err := testcontroller.ChartArchive("pin", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: pin\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","properties":{` +
			`"auth":{"type":"object","properties":{"password":{"type":"string","writeOnly":true}}},` +
			`"servers":{"type":"array","items":{"type":"object","properties":{"pin":{"type":"integer","writeOnly":true}}}},` +
			`"a.b":{"type":"integer","writeOnly":true}}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(context.Context, capstanv1.AddonSpec) (*source.Artifact, error) {
		return &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "pin", Version: "1.0.0"}}, nil
	}
	spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "http://127.0.0.1/pin-1.0.0.tgz"},
		Values: &apiextensionsv1.JSON{Raw: []byte(`{"a.b":1,"servers":[{"pin":2}],"auth":{"password":"kept"}}`)}}
	old := &apiextensionsv1.JSON{Raw: []byte(`{"auth":{"password":"kept"}}`)}

	setPaths, heldPaths, err := SecretValuesChanged(context.Background(), fetch, spec, old)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := SecretInputNames(setPaths)
	held, _ := SecretInputNames(heldPaths)
	slices.Sort(set)
	if want := []string{`a\.b`, `servers[0].pin`}; !slices.Equal(set, want) {
		t.Errorf("set = %q; want %q", set, want)
	}
	if want := []string{"auth.password"}; !slices.Equal(held, want) {
		t.Errorf("held = %q; want %q", held, want)
	}
	// Each path, given back as a secret input, lands where it was found.
	for _, p := range set {
		l, err := values.SecretInputLayer(0, "inputs", p, "1")
		if err != nil || (l.Pointer() != "/a.b" && l.Pointer() != "/servers/0/pin") {
			t.Errorf("the secret input %q lands at %q (%v); want /a.b or /servers/0/pin", p, l.Pointer(), err)
		}
	}
}

// TestGitValuesCheckGivesAnEmptyKeyWhole: a commit whose values hold a
// secret input at a path with an empty key is refused naming the path by
// its JSON pointer, saying once how to give it in a Secret that valuesFrom
// merges whole (EmptyKeySecrets), which no targetPath can name.
func TestGitValuesCheckGivesAnEmptyKeyWhole(t *testing.T) {
	archive, err := testcontroller.ChartArchive("pins", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: pins\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","properties":{"pins":{"type":"object","additionalProperties":{"type":"string","writeOnly":true}}}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(context.Context, capstanv1.AddonSpec) (*source.Artifact, error) {
		return &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "pins", Version: "1.0.0"}}, nil
	}
	check := GitValuesCheck(fetch, func(string) {})
	def := &gitops.Definition{Name: "web", Namespace: "apps",
		Helm:   &gitops.HelmSource{Repo: "https://charts.example/", Chart: "pins", Version: "1.0.0"},
		Values: map[string]any{"pins": map[string]any{"": "1234"}}}
	err = check(context.Background(), def, nil)
	var refused *SecretValuesError
	if !errors.As(err, &refused) {
		t.Fatalf("a commit with a secret input at /pins/: %v; want a SecretValuesError", err)
	}
	msg := err.Error()
	if want := EmptyKeySecrets([]string{"/pins/"}); !strings.Contains(msg, want) || strings.Count(msg, "empty key") != 1 || strings.Contains(msg, "1234") {
		t.Errorf("refusal: %s; want it to say once %q, quoting no secret", msg, want)
	}
	if want := []string{"/pins/"}; !slices.Equal(refused.Paths, want) {
		t.Errorf("paths %q; want %q", refused.Paths, want)
	}
}

// TestGitValuesCheckSaysWhatToDoWithEachHeld: a commit's warning of
// secret inputs the file in git holds already says, for several, to move
// each, which one Secret may hold, not "move it" after a list; many are
// named by the first few and the rest counted.
func TestGitValuesCheckSaysWhatToDoWithEachHeld(t *testing.T) {
	archive, err := testcontroller.ChartArchive("pins", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: pins\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer"},"pins":{"type":"object","additionalProperties":{"type":"string","writeOnly":true}}}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(context.Context, capstanv1.AddonSpec) (*source.Artifact, error) {
		return &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "pins", Version: "1.0.0"}}, nil
	}
	for _, tc := range []struct {
		pins int
		want []string
		not  []string
	}{
		{1, []string{"holds pins.k00 in its values", "Blocks the Addon for it: move it to a Secret named in valuesFrom"}, []string{"each"}},
		{2, []string{"holds pins.k00, pins.k01 in its values", "Blocks the Addon for them: move each of them to a Secret named in valuesFrom (one Secret may hold them all)"}, []string{"move it"}},
		{25, []string{"pins.k09 and 15 more not named here in its values", "move each of them"}, []string{"pins.k10", "move it"}},
	} {
		pins := map[string]any{}
		for i := range tc.pins {
			pins[fmt.Sprintf("k%02d", i)] = "1234"
		}
		var warned []string
		check := GitValuesCheck(fetch, func(msg string) { warned = append(warned, msg) })
		cur := &gitops.Definition{Name: "web", Namespace: "apps",
			Helm:   &gitops.HelmSource{Repo: "https://charts.example/", Chart: "pins", Version: "1.0.0"},
			Values: map[string]any{"pins": pins}}
		next := *cur
		next.Values = map[string]any{"pins": pins, "replicas": 2}
		if err := check(context.Background(), &next, cur); err != nil {
			t.Fatalf("%d pins held: %v", tc.pins, err)
		}
		if len(warned) != 1 {
			t.Fatalf("%d pins held: warnings %q; want one", tc.pins, warned)
		}
		for _, w := range tc.want {
			if !strings.Contains(warned[0], w) {
				t.Errorf("%d pins held: %s\nwant it to hold %q", tc.pins, warned[0], w)
			}
		}
		for _, n := range append(tc.not, "1234") {
			if strings.Contains(warned[0], n) {
				t.Errorf("%d pins held: %s\nwant no %q", tc.pins, warned[0], n)
			}
		}
	}
}
