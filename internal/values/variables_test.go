package values

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestReadVariables checks ReadVariables' decisions: the order of its
// sources, which keys are variables, which values are secret, and what it
// refuses. A fake reader stands in for the API server, as in read_test.go.
func TestReadVariables(t *testing.T) {
	r := fake.NewClientBuilder().WithObjects(
		configMap("cluster", nil, map[string]string{"cluster": "prod", "domain": "example.org", "app.properties": "x=1"}),
		secret("cluster-secrets", nil, map[string]string{"domain": "secret.example.org", "token": "t0ken-value"}),
	).Build()
	a := addonWith("app", "")
	a.Spec.Substitute = map[string]string{"cluster": "override"}
	a.Spec.SubstituteFrom = []capstanv1.SubstituteReference{
		{Kind: "ConfigMap", Name: "cluster"},
		{Kind: "Secret", Name: "cluster-secrets"},
		{Kind: "ConfigMap", Name: "absent", Optional: true},
	}
	vars, err := ReadVariables(context.Background(), r, a, capstanv1.ProfileCluster)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cluster": "override", "domain": "secret.example.org", "token": "t0ken-value"}
	if diff := cmp.Diff(want, vars.Values); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
	if got := slices.Sorted(slices.Values(vars.Secret)); !slices.Equal(got, []string{"secret.example.org", "t0ken-value"}) {
		t.Errorf("secret values %q", got)
	}

	a.Spec.SubstituteFrom = append(a.Spec.SubstituteFrom, capstanv1.SubstituteReference{Kind: "Secret", Name: "absent"})
	_, err = ReadVariables(context.Background(), r, a, capstanv1.ProfileCluster)
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Errors[0].Path != "spec.substituteFrom[3]" || !strings.Contains(err.Error(), "Secret absent does not exist; create it, or mark the entry optional") {
		t.Errorf("a missing object: %v", err)
	}
	if _, err := ReadVariables(context.Background(), r, a, capstanv1.ProfileRestricted); !errors.As(err, &inv) || !strings.Contains(err.Error(), "spec.substitute only") {
		t.Errorf("restricted substituteFrom: %v", err)
	}
	if vars, err := ReadVariables(context.Background(), r, addonWith("plain", ""), capstanv1.ProfileCluster); vars != nil || err != nil {
		t.Errorf("no substitution asked for: %v %v", vars, err)
	}
}

// TestReadVariablesDropsNewlines: a value loses every newline, from a
// ConfigMap, a Secret (kubectl create secret --from-file ends one with a
// newline) and spec.substitute alike, as Flux reads them, and a value
// from a Secret is hidden as it is substituted.
func TestReadVariablesDropsNewlines(t *testing.T) {
	r := fake.NewClientBuilder().WithObjects(
		configMap("settings", nil, map[string]string{"region": "eu-west-1\n", "banner": "line one\nline two\n"}),
		secret("db", nil, map[string]string{"db_host": "db.internal\n"}),
	).Build()
	a := addonWith("app", "")
	a.Spec.SubstituteFrom = []capstanv1.SubstituteReference{{Kind: "ConfigMap", Name: "settings"}, {Kind: "Secret", Name: "db"}}
	a.Spec.Substitute = map[string]string{"cluster": "prod\n", "crlf": "a\r\nb", "plain": "as is"}
	vars, err := ReadVariables(context.Background(), r, a, capstanv1.ProfileCluster)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"region":  "eu-west-1",
		"banner":  "line oneline two",
		"db_host": "db.internal",
		"cluster": "prod",
		"crlf":    "a\rb",
		"plain":   "as is",
	}
	if diff := cmp.Diff(want, vars.Values); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
	if !slices.Equal(vars.Secret, []string{"db.internal"}) {
		t.Errorf("secret values %q", vars.Secret)
	}
}

// TestReadVariablesBoundsSecretValues: Secret variables are hidden as a
// chart's secret values are, within the same bound; past it the error
// names spec.substituteFrom and says what to move. ConfigMap variables
// are not secret, and do not count.
func TestReadVariablesBoundsSecretValues(t *testing.T) {
	many := map[string]string{}
	for i := range MaxSecretValues + 1 {
		many[fmt.Sprintf("KEY_%05d", i)] = fmt.Sprintf("value-%05d", i)
	}
	r := fake.NewClientBuilder().WithObjects(configMap("plain", nil, many), secret("secret", nil, many)).Build()
	a := addonWith("app", "")
	a.Spec.SubstituteFrom = []capstanv1.SubstituteReference{{Kind: "ConfigMap", Name: "plain"}}
	if _, err := ReadVariables(context.Background(), r, a, capstanv1.ProfileCluster); err != nil {
		t.Errorf("ConfigMap variables: %v", err)
	}
	a.Spec.SubstituteFrom = []capstanv1.SubstituteReference{{Kind: "Secret", Name: "secret"}}
	_, err := ReadVariables(context.Background(), r, a, capstanv1.ProfileCluster)
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Errors[0].Path != "spec.substituteFrom" || inv.Errors[0].Rule != RuleTooManySecrets ||
		!strings.Contains(err.Error(), "hold 4097 secret values (45 KiB) as variables, more than the 4096 values and 256 KiB") ||
		strings.Contains(err.Error(), "value-0") {
		t.Errorf("Secret variables past the bound: %v", err)
	}
}
