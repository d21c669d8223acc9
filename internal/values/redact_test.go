package values

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

func TestComposeSecretPathsAndRedaction(t *testing.T) {
	schema, err := os.ReadFile("testdata/postgresql.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	in := Inputs{
		Chart:     testChart(t, "postgresql", `{auth: {username: app, database: app}, primary: {persistence: {size: 8Gi}}}`, string(schema)),
		Generated: ymap(t, `{auth: {postgresPassword: GENERATEDpw0001, replicationPassword: GENERATEDpw0002}}`),
		Sources: Sources{
			Spec: ymap(t, `{primary: {extraEnv: [{name: PUBLIC, value: null}]}}`),
			From: indexed(
				docLayer("Secret", "pg-values-a", `{auth: {password: SECRETdocpw1}, smtp: {user: mailer, pass: SECRETsmtp1}}`),
				pathLayer("Secret", "pg-values-b", "metrics.token", "SECRETtoken1"),
				docLayer("ConfigMap", "pg-values-c", `{readReplicas: {replicaCount: 1}}`),
			),
		},
		Platform: Platform{Namespace: "platform"}.Values(),
	}
	res, err := Compose(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/auth/password",
		"/auth/postgresPassword",
		"/auth/replicationPassword",
		"/metrics/token",
		"/smtp/pass",
		"/smtp/user",
	}
	if !reflect.DeepEqual(res.SecretPaths, want) {
		t.Fatalf("SecretPaths = %v, want %v", res.SecretPaths, want)
	}
	shown := fmt.Sprint(res.Redacted())
	for _, secret := range []string{"GENERATEDpw0001", "GENERATEDpw0002", "SECRETdocpw1", "SECRETsmtp1", "SECRETtoken1"} {
		if strings.Contains(shown, secret) {
			t.Errorf("redacted values show %q: %s", secret, shown)
		}
	}
	for _, public := range []string{"8Gi", "platform", "replicaCount:1"} {
		if !strings.Contains(shown, public) {
			t.Errorf("redacted values lost the public %q: %s", public, shown)
		}
	}
	got := res.SecretValues()
	for _, secret := range []string{"GENERATEDpw0001", "SECRETdocpw1", "SECRETtoken1", "mailer"} {
		found := false
		for _, g := range got {
			found = found || g == secret
		}
		if !found {
			t.Errorf("SecretValues misses %q", secret)
		}
	}
	// Redact copies: the effective values keep their secrets.
	if res.Effective["auth"].(map[string]any)["password"] != "SECRETdocpw1" {
		t.Fatal("Redacted changed the effective values")
	}
}

// TestComposeSecretPathsOfATargetPathIntoAList checks that a Secret's
// targetPath into a list another source wrote marks only the value it set:
// the other elements and keys stay visible.
func TestComposeSecretPathsOfATargetPathIntoAList(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		from  []Layer
		paths []string
		shown string // the redacted effective values
	}{
		{
			name:  "after spec.values",
			spec:  `{servers: [{host: a, port: 1}, {host: b, port: 2}]}`,
			from:  []Layer{pathLayer("Secret", "s", "servers[1].token", "SECRETtoken1")},
			paths: []string{"/servers/1/token"},
			shown: `{servers: [{host: a, port: 1}, {host: b, port: 2, token: "(redacted)"}]}`,
		},
		{
			name: "after a ConfigMap document",
			from: []Layer{
				docLayer("ConfigMap", "c", `{servers: [{host: a}, {host: b}]}`),
				pathLayer("Secret", "s", "servers[1].token", "SECRETtoken1"),
			},
			paths: []string{"/servers/1/token"},
			shown: `{servers: [{host: a}, {host: b, token: "(redacted)"}]}`,
		},
		{
			name:  "a whole element",
			spec:  `{hosts: [public, other]}`,
			from:  []Layer{pathLayer("Secret", "s", "hosts[1]", "SECRETtoken1")},
			paths: []string{"/hosts/1"},
			shown: `{hosts: [public, "(redacted)"]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Compose(Inputs{Sources: Sources{Spec: ymap(t, tt.spec), From: indexed(tt.from...)}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.SecretPaths, tt.paths) {
				t.Fatalf("SecretPaths = %v, want %v", res.SecretPaths, tt.paths)
			}
			assertYAML(t, "redacted", res.Redacted(), tt.shown)
			if got := res.SecretValues(); !reflect.DeepEqual(got, []string{"SECRETtoken1"}) {
				t.Errorf("SecretValues = %v, want only the token", got)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	v := ymap(t, `{a: {b: s1, c: keep}, l: [x, {k: s2}], top: s3}`)
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{name: "nested key", paths: []string{"/a/b"}, want: `{a: {b: "(redacted)", c: keep}, l: [x, {k: s2}], top: s3}`},
		{name: "list element and key in one", paths: []string{"/l/0", "/l/1/k"}, want: `{a: {b: s1, c: keep}, l: ["(redacted)", {k: "(redacted)"}], top: s3}`},
		{name: "a whole map", paths: []string{"/a"}, want: `{a: "(redacted)", l: [x, {k: s2}], top: s3}`},
		{name: "missing paths are ignored", paths: []string{"/nope", "/l/9", "/a/b/c"}, want: `{a: {b: s1, c: keep}, l: [x, {k: s2}], top: s3}`},
		{name: "the root hides everything", paths: []string{"/"}, want: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertYAML(t, "redacted", Redact(v, tt.paths), tt.want)
		})
	}
	assertYAML(t, "original", v, `{a: {b: s1, c: keep}, l: [x, {k: s2}], top: s3}`)
}

// manyEnv returns n items, each with a name and a value.
func manyEnv(n int) []any {
	env := make([]any, n)
	for i := range env {
		env[i] = map[string]any{"name": fmt.Sprintf("VAR_%d", i), "value": "plaintext"}
	}
	return env
}

// envCharts is a chart whose schema and whose subchart db's schema both
// make db.env[*].value writeOnly: each value is found by both parts.
func envCharts(t testing.TB) *Schema {
	const env = `{"items": {"properties": {"value": {"writeOnly": true}}}}`
	sub := testChart(t, "db", `{}`, `{"properties": {"env": `+env+`}}`)
	parent := testChart(t, "app", `{}`, `{"properties": {"db": {"properties": {"env": `+env+`}}}}`, sub)
	s, err := SchemaForChart(parent)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFindWriteOnlyOnManyValues: each of many writeOnly values is found
// once, in the values' order, whether one part or two find it, and a
// part's path below another's is dropped.
func TestFindWriteOnlyOnManyValues(t *testing.T) {
	const n = 75000 // about 1 MiB of values, the most a document may hold
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("/primary/extraEnv/%d/value", i)
	}
	var got []string
	loadSchema(t, "postgresql.schema.json").findWriteOnly(map[string]any{"primary": map[string]any{"extraEnv": manyEnv(n)}},
		func(p []string) { got = append(got, pointer(p)) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the postgresql fixture: found %d writeOnly values, want %d in order", len(got), n)
	}

	got = nil
	envCharts(t).findWriteOnly(map[string]any{"db": map[string]any{"env": manyEnv(n)}}, func(p []string) { got = append(got, pointer(p)) })
	for i := range want {
		want[i] = fmt.Sprintf("/db/env/%d/value", i)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("two parts: found %d writeOnly values, want %d in order, once each", len(got), n)
	}

	// The parent's writeOnly db.users hides the subchart's
	// db.users[*].token with it.
	sub := testChart(t, "db", `{}`, `{"properties": {"password": {"writeOnly": true}, "users": {"items": {"properties": {"token": {"writeOnly": true}}}}}}`)
	parent := testChart(t, "app", `{}`, `{"properties": {"api": {"writeOnly": true}, "db": {"properties": {"users": {"writeOnly": true}}}}}`, sub)
	ps, err := SchemaForChart(parent)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	ps.findWriteOnly(ymap(t, `{api: k, db: {password: a, users: [{token: b}, {token: c}]}}`), func(p []string) { got = append(got, pointer(p)) })
	if want := []string{"/api", "/db/users", "/db/password"}; !reflect.DeepEqual(got, want) {
		t.Errorf("found %v, want %v", got, want)
	}
}

// BenchmarkFindWriteOnly times findWriteOnly on as many as 75000 writeOnly
// values, the list items 1 MiB of values can hold, which a tenant chooses
// and which are matched on every reconcile: with one part (the postgresql
// fixture) and with two parts that find each value.
func BenchmarkFindWriteOnly(b *testing.B) {
	doc, err := os.ReadFile("testdata/postgresql.schema.json")
	if err != nil {
		b.Fatal(err)
	}
	pg, err := ParseSchema("postgresql", doc, nil)
	if err != nil {
		b.Fatal(err)
	}
	two := envCharts(b)
	for _, n := range []int{10000, 40000, 75000} {
		v := map[string]any{"primary": map[string]any{"extraEnv": manyEnv(n)}}
		b.Run(fmt.Sprintf("postgresql/%d", n), func(b *testing.B) {
			for b.Loop() {
				pg.findWriteOnly(v, func([]string) {})
			}
		})
		v = map[string]any{"db": map[string]any{"env": manyEnv(n)}}
		b.Run(fmt.Sprintf("two-parts/%d", n), func(b *testing.B) {
			for b.Loop() {
				two.findWriteOnly(v, func([]string) {})
			}
		})
	}
}

// A number from a Secret is hidden in each form a template prints it: Go's
// %v, and the digits toYaml, toJson, int and printf "%d" print.
func TestSecretValuesHoldNumbersAsTemplatesPrintThem(t *testing.T) {
	ch := testChart(t, "app", "smtp:\n  host: x\n", "")
	res, err := Compose(Inputs{Chart: ch, Sources: Sources{From: indexed(
		docLayer("Secret", "app-values-a", "smtp:\n  password: 20240917\n  ratio: 1234.5\n  big: 1e21\n"))}})
	if err != nil {
		t.Fatal(err)
	}
	got := res.SecretValues()
	for _, want := range []string{"20240917", "2.0240917e+07", "1234.5", "1e+21", "1000000000000000000000"} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretValues = %q, misses %q", got, want)
		}
	}
}

// TestComposeBoundsTheSecretValues: a writeOnly schema over a list in the
// chart's own defaults makes every element a secret value, which the
// controller would hide in every message of every reconcile. Past the
// bound the values are refused, naming the path that holds them, and
// below it they are composed.
func TestComposeBoundsTheSecretValues(t *testing.T) {
	schema := `{"properties": {"junk": {"writeOnly": true}, "auth": {"properties": {"password": {"writeOnly": true}}}}}`
	chartWith := func(junk []any) Inputs {
		ch := testChart(t, "app", "", schema)
		ch.Values = map[string]any{"junk": junk}
		return Inputs{Chart: ch, Sources: Sources{From: indexed(
			docLayer("Secret", "app-values-a", "auth: {password: s3cret-pw}\n"))}}
	}
	many := func(n, size int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("aaaa%0*d", size-4, i)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		junk []any
	}{
		{"100,000 values", many(100_000, 10)},
		{"one more value than the bound", many(MaxSecretValues, 10)},
		{"values of more bytes than the bound", many(3, MaxSecretBytes/3+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compose(chartWith(tc.junk))
			var inv *InvalidError
			if !errors.As(err, &inv) || len(inv.Errors) != 1 {
				t.Fatalf("Compose = %v, want an *InvalidError with one error", err)
			}
			e := inv.Errors[0]
			if e.Rule != RuleTooManySecrets || e.Path != "/junk" {
				t.Errorf("error = %+v, want rule %s at /junk", e, RuleTooManySecrets)
			}
			if strings.Contains(e.Message, "aaaa") || strings.Contains(e.Message, "s3cret") || !strings.Contains(e.Message, "writeOnly") {
				t.Errorf("message %q should say what to do and quote no value", e.Message)
			}
		})
	}
	// The secret values of a real add-on, a CA bundle among them, compose.
	res, err := Compose(chartWith(append(many(MaxSecretValues-2, 10), strings.Repeat("ca-bundle\n", 20<<10))))
	if err != nil {
		t.Fatalf("Compose of values within the bound: %v", err)
	}
	if got := len(res.SecretValues()); got != MaxSecretValues {
		t.Errorf("SecretValues holds %d values, want %d", got, MaxSecretValues)
	}
}

// TestTooManySecretsNamesTheSourceToChange: past the bound, the error
// names what a person changes and counts what they see. A values Secret of
// 5000 leaves is named by its valuesFrom entry, not by one of its leaves;
// a writeOnly list of numbers counts each number once, though a mask
// hides it in each form a template prints it in.
func TestTooManySecretsNamesTheSourceToChange(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("config:\n")
	for i := range 5000 {
		fmt.Fprintf(&doc, "  key%05d: value-%05d\n", i, i)
	}
	schema := `{"properties": {"pins": {"writeOnly": true}, "auth": {"properties": {"password": {"writeOnly": true}}}}}`
	in := Inputs{Chart: testChart(t, "app", "", schema), Sources: Sources{From: indexed(
		docLayer("Secret", "app-values-small", "auth: {password: s3cret-pw}\n"),
		docLayer("Secret", "demo-values-big", doc.String()))}}
	_, err := Compose(in)
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Errors) != 1 {
		t.Fatalf("Compose = %v, want an *InvalidError with one error", err)
	}
	e := inv.Errors[0]
	if e.Rule != RuleTooManySecrets || e.Path != "spec.valuesFrom[1]" ||
		!strings.Contains(e.Message, "the values hold 5001 secret values") ||
		!strings.Contains(e.Message, "spec.valuesFrom[1] (Secret demo-values-big, key values.yaml) holds 5000 of them") ||
		strings.Contains(e.Message, "value-0") {
		t.Errorf("a values Secret of 5000 leaves: %+v", e)
	}

	numbers := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = float64(20_240_000 + i) // printed 2.024e+07 and 20240000
		}
		return out
	}
	ch := testChart(t, "app", "", schema)
	ch.Values = map[string]any{"pins": numbers(2100)}
	if _, err := Compose(Inputs{Chart: ch}); err != nil {
		t.Errorf("2100 writeOnly numbers, within the bound: %v", err)
	}
	ch.Values = map[string]any{"pins": numbers(MaxSecretValues + 4)}
	_, err = Compose(Inputs{Chart: ch})
	if !errors.As(err, &inv) || inv.Errors[0].Path != "/pins" || !strings.Contains(err.Error(), "the values hold 4100 secret values") ||
		!strings.Contains(err.Error(), "/pins holds 4100 of them") {
		t.Errorf("4100 writeOnly numbers: %v", err)
	}
}

// TestComposePastTheBoundKeepsTheWriteOnlyErrors: values past the secret
// bound are refused with the writeOnly rule's errors beside the bound's, so
// a writer that checks spec.values for secret inputs still finds them.
func TestComposePastTheBoundKeepsTheWriteOnlyErrors(t *testing.T) {
	schema := `{"properties": {"junk": {"writeOnly": true}, "auth": {"properties": {"password": {"writeOnly": true}}}}}`
	ch := testChart(t, "app", "", schema)
	junk := make([]any, MaxSecretValues+1)
	for i := range junk {
		junk[i] = fmt.Sprintf("junk-%05d", i)
	}
	ch.Values = map[string]any{"junk": junk}
	_, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: map[string]any{"auth": map[string]any{"password": "hunter2"}}}})
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Compose = %v, want an *InvalidError", err)
	}
	var rules []string
	for _, e := range inv.Errors {
		rules = append(rules, e.Path+" "+e.Rule)
	}
	if want := []string{"/junk " + RuleTooManySecrets, "/auth/password " + RuleWriteOnly}; !slices.Equal(rules, want) {
		t.Errorf("errors %q, want %q", rules, want)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error quotes a value: %v", err)
	}
}

// TestSecretInputBrokenForEveryBranchIsStillRefused: a value that no
// oneOf branch takes breaks the schema, and is refused as a secret input
// wherever a branch could make it one, so that a mistyped secret is never
// let into spec.values for want of a branch that applies.
func TestSecretInputBrokenForEveryBranchIsStillRefused(t *testing.T) {
	schema := `{"type": "object", "properties": {"password": {"oneOf": [
	  {"type": "string", "minLength": 12, "writeOnly": true},
	  {"type": "object", "properties": {"secretName": {"type": "string"}}, "additionalProperties": false}]}}}`
	res, err := Compose(Inputs{Chart: testChart(t, "app", "", schema), Sources: Sources{Spec: ymap(t, "password: hunter2\n")}})
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, e := range res.Errors {
		rules = append(rules, e.Path+" "+e.Rule)
	}
	if !slices.Contains(rules, "/password "+RuleWriteOnly) {
		t.Errorf("errors %q, want /password %s among them", rules, RuleWriteOnly)
	}
}

// TestSubchartGlobalWriteOnlyAppliesToTheTopLevelGlobal: Helm gives every
// subchart the top-level global as its own, so a writeOnly under a
// subchart's global is a secret input there: refused in spec.values and
// hidden when shown.
func TestSubchartGlobalWriteOnlyAppliesToTheTopLevelGlobal(t *testing.T) {
	sub := testChart(t, "sub", "", `{"properties": {"global": {"properties": {"dbPassword": {"type": "string", "writeOnly": true}}}}}`)
	parent := func() *chartv2.Chart { return testChart(t, "app", "", "", sub) }
	res, err := Compose(Inputs{Chart: parent(), Sources: Sources{Spec: ymap(t, "global:\n  dbPassword: hunter2hunter2\n  region: eu\n")}})
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, e := range res.Errors {
		rules = append(rules, e.Path+" "+e.Rule)
	}
	if want := []string{"/global/dbPassword " + RuleWriteOnly}; !slices.Equal(rules, want) {
		t.Errorf("errors %q, want %q", rules, want)
	}
	if !slices.Contains(res.SecretPaths, "/global/dbPassword") {
		t.Errorf("SecretPaths = %v, want /global/dbPassword among them", res.SecretPaths)
	}
	if shown := fmt.Sprint(res.Redacted()); strings.Contains(shown, "hunter2hunter2") || !strings.Contains(shown, "eu") {
		t.Errorf("redacted values %s: want the password hidden and the region shown", shown)
	}
	// A chart's own default for it is no secret input, but is hidden.
	ch := parent()
	ch.Values = map[string]any{"global": map[string]any{"dbPassword": "default-pw-000"}}
	res, err = Compose(Inputs{Chart: ch})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 0 {
		t.Errorf("errors %v for a chart's default, want none", res.Errors)
	}
	if shown := fmt.Sprint(res.Redacted()); strings.Contains(shown, "default-pw-000") {
		t.Errorf("redacted values show the default password: %s", shown)
	}
}

// TestConfigMapSecretInputWhereTheConditionIsElsewhere: a ConfigMap entry
// with a targetPath holds its one value; the if or the dependentSchemas
// property that makes it a secret input comes from spec.values or the
// chart's defaults, which validation sees beside it, and the ConfigMap's
// value is refused all the same.
func TestConfigMapSecretInputWhereTheConditionIsElsewhere(t *testing.T) {
	const ifThen = `{"type": "object", "properties": {"db": {"type": "object",
	  "properties": {"mode": {"type": "string"}, "token": {"type": "string"}},
	  "if": {"properties": {"mode": {"const": "external"}}, "required": ["mode"]},
	  "then": {"properties": {"token": {"writeOnly": true}}}}}}`
	for _, tt := range []struct {
		name, schema, defaults, spec string
	}{
		{name: "if holds in spec.values", schema: ifThen, spec: "db:\n  mode: external\n"},
		{name: "if holds in the chart's defaults", schema: ifThen, defaults: "db:\n  mode: external\n"},
		{name: "dependentSchemas' property in spec.values", spec: "db:\n  auth: basic\n",
			schema: `{"type": "object", "properties": {"db": {"type": "object",
			  "dependentSchemas": {"auth": {"properties": {"token": {"writeOnly": true}}}}}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Compose(Inputs{Chart: testChart(t, "app", tt.defaults, tt.schema), Sources: Sources{
				Spec: ymap(t, tt.spec),
				From: indexed(pathLayer("ConfigMap", "cm", "db.token", "Sup3rS3cretPw")),
			}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range res.Errors {
				got = append(got, e.Path+" "+e.Rule)
				if strings.Contains(e.Message, "Sup3rS3cretPw") {
					t.Errorf("the error quotes the value: %s", e.Message)
				}
			}
			if want := []string{"/db/token " + RuleWriteOnly}; !reflect.DeepEqual(got, want) {
				t.Errorf("values errors %q, want %q", got, want)
			}
			if !slices.Contains(res.SecretPaths, "/db/token") {
				t.Errorf("SecretPaths = %v, want /db/token among them", res.SecretPaths)
			}
		})
	}
}

// TestSubchartGlobalSecretInputWhereTheConditionIsADefault: a subchart's
// if on its global, met by the parent chart's default for the top-level
// global, makes the token given at the top-level global a secret input, as
// validation applies the subchart's then to the global Helm gives it.
func TestSubchartGlobalSecretInputWhereTheConditionIsADefault(t *testing.T) {
	sub := testChart(t, "sub", "", `{"properties": {"global": {"type": "object",
	  "if": {"properties": {"mode": {"const": "external"}}, "required": ["mode"]},
	  "then": {"properties": {"token": {"type": "string", "writeOnly": true}}}}}}`)
	parent := testChart(t, "app", "global:\n  mode: external\n", "", sub)
	res, err := Compose(Inputs{Chart: parent, Sources: Sources{Spec: ymap(t, "global:\n  token: Sup3rS3cretPw\n")}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.Errors {
		got = append(got, e.Path+" "+e.Rule)
	}
	if want := []string{"/global/token " + RuleWriteOnly}; !slices.Equal(got, want) {
		t.Errorf("values errors %q, want %q", got, want)
	}
}

// TestSecretInputWhereAValuesSecretMeetsTheCondition: the if that makes a
// token in spec.values a secret input may hold only in a values Secret,
// which the controller reads and a writer cannot; validation sees the
// Secret's mode, and so does the check.
func TestSecretInputWhereAValuesSecretMeetsTheCondition(t *testing.T) {
	schema := `{"type": "object", "properties": {"db": {"type": "object",
	  "properties": {"mode": {"type": "string"}, "token": {"type": "string"}},
	  "if": {"properties": {"mode": {"const": "external"}}, "required": ["mode"]},
	  "then": {"properties": {"token": {"writeOnly": true}}}}}}`
	res, err := Compose(Inputs{Chart: testChart(t, "app", "", schema), Sources: Sources{
		Spec: ymap(t, "db:\n  token: Sup3rS3cretPw\n"),
		From: indexed(docLayer("Secret", "db-mode", `{db: {mode: external}}`)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.Errors {
		got = append(got, e.Path+" "+e.Rule)
	}
	if want := []string{"/db/token " + RuleWriteOnly}; !slices.Equal(got, want) {
		t.Errorf("values errors %q, want %q", got, want)
	}
}

// TestSecretInputUnderAnEmptyKeyIsJudgedApart: the schema's root and the
// value at the top-level empty key are different places, though both are
// "/" as pointers; a branch decided at the root must not stand for the
// same branch at the empty key, where a chart default selects it.
func TestSecretInputUnderAnEmptyKeyIsJudgedApart(t *testing.T) {
	schema := `{"type": "object", "properties": {"": {"$ref": "#"}, "mode": {"type": "string"}, "token": {"type": "string"}},
	  "if": {"properties": {"mode": {"const": "external"}}, "required": ["mode"]},
	  "then": {"properties": {"token": {"writeOnly": true}}}}`
	res, err := Compose(Inputs{Chart: testChart(t, "app", "\"\":\n  mode: external\n", schema),
		Sources: Sources{Spec: ymap(t, "\"\":\n  token: Sup3rS3cretPw\n")}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.Errors {
		got = append(got, e.Path+" "+e.Rule)
	}
	if want := []string{"//token " + RuleWriteOnly}; !slices.Equal(got, want) {
		t.Errorf("values errors %q, want %q", got, want)
	}
}
