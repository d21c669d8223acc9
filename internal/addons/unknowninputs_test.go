package addons

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/testcontroller"
)

// pinFetch returns a ChartFetch of a chart whose schema marks
// auth.password writeOnly, and the count of its fetches.
func pinFetch(t *testing.T) (ChartFetch, *int) {
	t.Helper()
	archive, err := testcontroller.ChartArchive("pin", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: pin\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer"},` +
			`"auth":{"type":"object","properties":{"password":{"type":"string","writeOnly":true}}}}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	return func(context.Context, capstanv1.AddonSpec) (*source.Artifact, error) {
		n++
		return &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "pin", Version: "1.0.0"}}, nil
	}, &n
}

// TestChartCheckFetchesAndCompilesOnce: a write that checks its values for
// secret inputs and warns of unknown secret inputs fetches the chart once
// (one access review and one fetch, on the server) and compiles its schema
// once, the warning taking the schema the check compiled.
func TestChartCheckFetchesAndCompilesOnce(t *testing.T) {
	fetch, fetches := pinFetch(t)
	spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "http://127.0.0.1/pin-1.0.0.tgz"},
		Values: &apiextensionsv1.JSON{Raw: []byte(`{"replicas":2}`)}}
	c := NewChartCheck(fetch)
	if _, _, err := c.SecretValuesChanged(context.Background(), spec, nil); err != nil {
		t.Fatal(err)
	}
	compiled := c.schemas[schemaKey(spec)]
	if compiled == nil {
		t.Fatal("the check kept no schema")
	}
	msgs, err := c.UnknownSecretInputs(context.Background(), spec, map[string]string{"auth.pasword": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0], "did you mean auth.password?") {
		t.Errorf("warnings %q; want one naming auth.password", msgs)
	}
	if *fetches != 1 {
		t.Errorf("the check and the warning fetched the chart %d times; want once", *fetches)
	}
	if len(c.schemas) != 1 || c.schemas[schemaKey(spec)] != compiled {
		t.Errorf("the warning compiled the schema again; want the check's")
	}
}

// TestUnknownSecretInputsBoundTheWarnings: a write of many unknown secret
// inputs, or of long ones, is warned of by the first maxUnknownWarnings,
// each path cut to maxWarnedPath bytes, and one more warning counts the
// rest: one warning a path would make an answer's headers too large for
// clients and proxies to take.
func TestUnknownSecretInputsBoundTheWarnings(t *testing.T) {
	fetch, _ := pinFetch(t)
	spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "http://127.0.0.1/pin-1.0.0.tgz"}}
	inputs := map[string]string{"a" + strings.Repeat("é", 400): "x"}
	for i := range 24 {
		inputs[fmt.Sprintf("k%02d", i)] = "x"
	}
	msgs, err := UnknownSecretInputs(context.Background(), fetch, spec, inputs)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != maxUnknownWarnings+1 {
		t.Fatalf("%d unknown secret inputs gave %d warnings; want %d", len(inputs), len(msgs), maxUnknownWarnings+1)
	}
	for _, m := range msgs[:maxUnknownWarnings] {
		if len(m) > maxWarnedPath+300 {
			t.Errorf("a warning of %d bytes: %.80q…; want the path cut to %d bytes", len(m), m, maxWarnedPath)
		}
	}
	if !strings.Contains(msgs[0], "…: the chart's schema neither marks") || strings.ContainsRune(msgs[0], '\uFFFD') {
		t.Errorf("the long path is warned of as %.300q; want it cut at a character, with …", msgs[0])
	}
	if want := fmt.Sprintf("and %d more secret inputs", len(inputs)-maxUnknownWarnings); !strings.HasPrefix(msgs[maxUnknownWarnings], want) {
		t.Errorf("the last warning is %q; want it to start %q", msgs[maxUnknownWarnings], want)
	}
}
