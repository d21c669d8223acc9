package cli

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// exactNumbers are numbers that a float64 would round (past 2^53, and
// past int64) or respell (1e+23).
const exactNumbers = `"chatId":9007199254740993,"big":12345678901234567890,"quota":100000000000000000000000`

// TestEditKeepsTheDigitsOfUntouchedNumbers: edit writes spec.values
// whole, and each number the edit does not set keeps its JSON text byte
// for byte, whether -f or --set merges over spec.values or --secret-input
// takes a path out of it.
func TestEditKeepsTheDigitsOfUntouchedNumbers(t *testing.T) {
	values := func() *capstanv1.Addon {
		raw := `{` + exactNumbers + `,"replicas":1,"auth":{"password":"x","ttl":1.50}}`
		return &capstanv1.Addon{Spec: capstanv1.AddonSpec{Values: &apiextensionsv1.JSON{Raw: []byte(raw)}}}
	}
	merged, err := mergeOverSpecValues(values(), map[string]any{"replicas": int64(3)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"auth":{"password":"x","ttl":1.50},"big":12345678901234567890,"chatId":9007199254740993,"quota":100000000000000000000000,"replicas":3}`
	if string(merged) != want {
		t.Errorf("--set replicas=3 over spec.values gives\n %s\nwant\n %s", merged, want)
	}

	a := values()
	if err := dropSecretInputPaths(client.ObjectKey{Namespace: "tenant", Name: "blog"}, a, nil, map[string]string{"auth.password": "s"}); err != nil {
		t.Fatal(err)
	}
	want = `{"auth":{"ttl":1.50},"big":12345678901234567890,"chatId":9007199254740993,"quota":100000000000000000000000,"replicas":1}`
	if got := string(a.Spec.Values.Raw); got != want {
		t.Errorf("--secret-input auth.password takes it out of spec.values as\n %s\nwant\n %s", got, want)
	}

	if _, err := mergeOverSpecValues(&capstanv1.Addon{Spec: capstanv1.AddonSpec{Values: &apiextensionsv1.JSON{Raw: []byte(`[1]`)}}}, map[string]any{"a": 1}); err == nil {
		t.Error("spec.values of a list merged; want it refused as not an object")
	}
	if got, err := mergeOverSpecValues(&capstanv1.Addon{Spec: capstanv1.AddonSpec{Values: &apiextensionsv1.JSON{Raw: []byte(`null`)}}}, map[string]any{"a": 1}); err != nil || string(got) != `{"a":1}` {
		t.Errorf("--set a=1 over spec.values null gives %s, %v; want {\"a\":1}", got, err)
	}
}

// TestAddonEditKeepsAnIDPast2To53: an ID past 2^53 (a chat's or a
// snowflake's), which the API server stores as it was given, is still
// that ID after edit --set of another value and --secret-input of
// another path.
func TestAddonEditKeepsAnIDPast2To53(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	chartURL, fetch := servedChart(t, "blog", writeOnlyChart)
	newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) {
		a.Spec.Chart.URL = chartURL
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"chatId":9007199254740993,"replicas":1,"auth":{"password":"hunter2"}}`)}
	})
	edit := append([]string{"addon", "edit", "blog", "-n", ns}, fetch...)
	if out, err := capstan(t, cluster, append(edit, "--set", "replicas=3")...); err != nil {
		t.Fatalf("edit --set replicas=3: %v\n%s", err, out)
	}
	if got, want := string(getAddon(t, c, ns, "blog").Spec.Values.Raw), `{"auth":{"password":"hunter2"},"chatId":9007199254740993,"replicas":3}`; got != want {
		t.Errorf("after edit --set replicas=3, spec.values is %s; want %s", got, want)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter3"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := capstan(t, cluster, append(edit, "--secret-input", "auth.password=@"+pw)...); err != nil {
		t.Fatalf("edit --secret-input auth.password: %v\n%s", err, out)
	}
	if got, want := string(getAddon(t, c, ns, "blog").Spec.Values.Raw), `{"auth":{},"chatId":9007199254740993,"replicas":3}`; got != want {
		t.Errorf("after edit --secret-input auth.password, spec.values is %s; want %s", got, want)
	}
}
