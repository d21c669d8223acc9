package values

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func loadSchema(t *testing.T, file string) *Schema {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSchema(strings.TrimSuffix(file, ".schema.json"), doc, nil)
	if err != nil {
		t.Fatalf("ParseSchema(%s): %v", file, err)
	}
	return s
}

func TestSchemaValidate(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		values string
		want   []capstanv1.ValuesError // Path and Rule are compared; Message must name the path
		secret string                  // a value that no message may contain
	}{
		{name: "postgresql: valid", schema: "postgresql.schema.json",
			values: `{architecture: replication, auth: {username: app, database: app, password: s3cretpassw0rd}, primary: {persistence: {size: 8Gi}, resources: {requests: {cpu: 100m, memory: 128}}}, readReplicas: {replicaCount: 2}}`},
		{name: "postgresql: pattern, enum, bounds, required", schema: "postgresql.schema.json",
			values: `{architecture: cluster-of-doom, auth: {username: "Robert'); DROP TABLE", password: hunter2}, primary: {persistence: {size: lots}}, readReplicas: {replicaCount: 17}, metrics: {port: 0}}`,
			secret: "hunter2",
			want: []capstanv1.ValuesError{
				{Path: "/architecture", Rule: "enum"},
				{Path: "/auth/database", Rule: "required"},
				{Path: "/auth/password", Rule: "minLength"},
				{Path: "/auth/username", Rule: "pattern"},
				{Path: "/metrics/port", Rule: "exclusiveMinimum"},
				{Path: "/primary/persistence/size", Rule: "pattern"},
				{Path: "/readReplicas/replicaCount", Rule: "maximum"},
			}},
		{name: "postgresql: types and list items", schema: "postgresql.schema.json",
			values: `{auth: {username: app, database: app, enablePostgresUser: "yes"}, primary: {extraEnv: [{value: topsecretvalue}], resources: {limits: {cpu: [1]}}}}`,
			secret: "topsecretvalue",
			want: []capstanv1.ValuesError{
				{Path: "/auth/enablePostgresUser", Rule: "type"},
				{Path: "/primary/extraEnv/0/name", Rule: "required"},
				{Path: "/primary/resources/limits/cpu", Rule: "type"},
			}},
		{name: "grafana: valid", schema: "grafana.schema.json",
			values: `{replicas: 2, image: {repository: grafana/grafana, tag: "11.0.0", pullPolicy: Always}, ingress: {enabled: true, hosts: [grafana.example.com]}, persistence: {type: pvc, size: 10Gi}, capstan: {namespace: platform}}`},
		{name: "grafana: additionalProperties, oneOf, if/then, uniqueItems", schema: "grafana.schema.json",
			values: `{replicas: 0, image: {repository: "", registry: docker.io}, ingress: {enabled: true}, persistence: {type: nfs}, unknownTop: s3cr3t-top}`,
			secret: "s3cr3t-top",
			want: []capstanv1.ValuesError{
				{Path: "/image/registry", Rule: "additionalProperties"},
				{Path: "/image/repository", Rule: "minLength"},
				{Path: "/ingress/hosts", Rule: "required"},
				{Path: "/persistence", Rule: "oneOf"},
				{Path: "/replicas", Rule: "minimum"},
				{Path: "/unknownTop", Rule: "additionalProperties"},
			}},
		{name: "grafana: duplicate hosts and too many", schema: "grafana.schema.json",
			values: `{ingress: {enabled: true, hosts: [a.example, a.example, b.example, c.example, d.example]}}`,
			want: []capstanv1.ValuesError{
				{Path: "/ingress/hosts", Rule: "maxItems"},
				{Path: "/ingress/hosts", Rule: "uniqueItems"},
			}},
		{name: "traefik draft-04: patternProperties and required", schema: "traefik-draft4.schema.json",
			values: `{deployment: {}, ports: {web: {port: 70000}}, logs: {level: TRACE}}`,
			want: []capstanv1.ValuesError{
				{Path: "/deployment/replicas", Rule: "required"},
				{Path: "/logs/level", Rule: "enum"},
				{Path: "/ports/web/port", Rule: "maximum"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loadSchema(t, tt.schema)
			got := s.Validate(ymap(t, tt.values))
			sortErrors(got)
			var gotPR []capstanv1.ValuesError
			for _, e := range got {
				gotPR = append(gotPR, capstanv1.ValuesError{Path: e.Path, Rule: e.Rule})
				if tt.secret != "" && strings.Contains(e.Message, tt.secret) {
					t.Errorf("message %q shows the value", e.Message)
				}
				if e.Message == "" || !strings.Contains(e.Message, dotted(splitPointer(e.Path))) {
					t.Errorf("message %q does not name the path %s", e.Message, e.Path)
				}
			}
			if !reflect.DeepEqual(gotPR, tt.want) {
				t.Fatalf("errors:\n got  %v\n want %v\n(full: %+v)", gotPR, tt.want, got)
			}
		})
	}
}

func TestSchemaMessagesNeverCarryTheValue(t *testing.T) {
	// Every keyword whose validator message quotes the value (pattern,
	// enum, const, format) gets a message of ours.
	s, err := ParseSchema("secrets", []byte(`{
		"type": "object",
		"properties": {
			"p": {"type": "string", "pattern": "^x+$"},
			"e": {"enum": ["a", "b"]},
			"c": {"const": "fixed"},
			"f": {"type": "string", "format": "email"},
			"n": {"not": {"type": "string"}}
		}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "Sup3r-Secret-Value"
	errs := s.Validate(map[string]any{"p": secret, "e": secret, "c": secret, "f": secret, "n": secret})
	if len(errs) < 4 {
		t.Fatalf("want an error for p, e, c and n at least, got %v", errs)
	}
	for _, e := range errs {
		if strings.Contains(e.Message, secret) || strings.Contains(e.Path, secret) {
			t.Errorf("%+v shows the value", e)
		}
	}
}

func TestSchemaRefusesBadSchemas(t *testing.T) {
	tests := []struct {
		name, file, doc string
		files           map[string][]byte
		wantErr         string
	}{
		{name: "remote $ref", file: "remote-ref.schema.json", wantErr: "outside the chart is refused"},
		{name: "not a JSON Schema", file: "not-a-schema.schema.json", wantErr: "not a valid JSON Schema"},
		{name: "not JSON", doc: `{"type": "object",`, wantErr: "is not JSON"},
		{name: "file $ref outside the chart", doc: `{"properties": {"a": {"$ref": "file:///etc/passwd"}}}`, wantErr: "no file"},
		{name: "relative $ref to a missing chart file", doc: `{"properties": {"a": {"$ref": "schemas/image.json"}}}`, wantErr: "no file \"schemas/image.json\""},
		{name: "generate under additionalProperties", doc: `{"additionalProperties": {"x-capstan-generate": true}}`, wantErr: "fixed path"},
		{name: "generate with an unknown alphabet", doc: `{"properties": {"a": {"x-capstan-generate": {"alphabet": "emoji"}}}}`, wantErr: "alphabet must be one of"},
		{name: "generate with a bad length", doc: `{"properties": {"a": {"x-capstan-generate": {"length": 0}}}}`, wantErr: "length must be"},
		{name: "generate with an unknown option", doc: `{"properties": {"a": {"x-capstan-generate": {"size": 3}}}}`, wantErr: "unknown option"},
		{name: "generate as a string", doc: `{"properties": {"a": {"x-capstan-generate": "yes"}}}`, wantErr: "must be true or an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := []byte(tt.doc)
			if tt.file != "" {
				var err error
				if doc, err = os.ReadFile(filepath.Join("testdata", tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ParseSchema("demo", doc, tt.files)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseSchema error = %v, want one containing %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), "chart demo") {
				t.Errorf("error %q does not name the chart", err)
			}
		})
	}
}

func TestSchemaRefToChartFile(t *testing.T) {
	files := map[string][]byte{"schemas/image.json": []byte(`{"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}`)}
	s, err := ParseSchema("demo", []byte(`{"properties": {"image": {"$ref": "schemas/image.json"}}}`), files)
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	errs := s.Validate(map[string]any{"image": map[string]any{}})
	if len(errs) != 1 || errs[0].Path != "/image/tag" || errs[0].Rule != "required" {
		t.Fatalf("errors = %+v, want /image/tag required", errs)
	}
}

func TestSchemaFindsWriteOnlyAndGenerated(t *testing.T) {
	pg := loadSchema(t, "postgresql.schema.json")
	wo := writeOnlyAt(t, pg, `{auth: {username: app, password: a, postgresPassword: b},
		primary: {extraEnv: [{name: A, value: c}, {name: B, value: d}]}}`)
	if want := []string{"auth.password", "auth.postgresPassword", "primary.extraEnv[0].value", "primary.extraEnv[1].value"}; !reflect.DeepEqual(wo, want) {
		t.Errorf("writeOnly = %v, want %v", wo, want)
	}
	gen := pg.Generated()
	want := []Generate{
		{Path: []string{"auth", "postgresPassword"}, Length: 24, Alphabet: "alphanumeric"},
		{Path: []string{"auth", "replicationPassword"}, Length: DefaultGenerateLength, Alphabet: DefaultGenerateAlphabet},
	}
	if !reflect.DeepEqual(gen, want) {
		t.Errorf("generated = %+v, want %+v", gen, want)
	}

	gf := loadSchema(t, "grafana.schema.json")
	if got := gf.Generated(); len(got) != 1 || pointer(got[0].Path) != "/admin/password" || got[0].Length != 40 || got[0].Alphabet != "base64url" {
		t.Errorf("grafana generated = %+v, want admin.password through $ref, 40 base64url", got)
	}
}

func TestSchemaRecursiveRefTerminates(t *testing.T) {
	s, err := ParseSchema("tree", []byte(`{
		"$defs": {"node": {"type": "object", "properties": {"secret": {"writeOnly": true}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
		"$ref": "#/$defs/node"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	v := ymap(t, `{secret: a, children: [{secret: b, children: [{secret: c, children: [{secret: d}]}]}]}`)
	paths := s.SecretPaths(v)
	want := []string{"/children/0/children/0/children/0/secret", "/children/0/children/0/secret", "/children/0/secret", "/secret"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("SecretPaths = %v, want %v", paths, want)
	}
}

func TestSchemaForChartValidatesSubchartsUnderTheirKey(t *testing.T) {
	pgSchema, err := os.ReadFile("testdata/postgresql.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	sub := testChart(t, "postgresql", `{auth: {username: app, database: app}}`, string(pgSchema))
	parent := testChart(t, "app", `{}`, `{"type": "object", "properties": {"replicas": {"type": "integer"}}}`, sub)
	s, err := SchemaForChart(parent)
	if err != nil {
		t.Fatal(err)
	}
	errs := s.Validate(ymap(t, `{replicas: two, postgresql: {auth: {username: "Bad Name", database: app}}}`))
	sortErrors(errs)
	got := []string{}
	for _, e := range errs {
		got = append(got, e.Path+" "+e.Rule)
	}
	if want := []string{"/postgresql/auth/username pattern", "/replicas type"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("errors = %v, want %v", got, want)
	}
	if gen := s.Generated(); len(gen) != 2 || pointer(gen[0].Path) != "/postgresql/auth/postgresPassword" {
		t.Fatalf("subchart generated = %+v, want paths under postgresql", gen)
	}
	if errs := s.Validate(ymap(t, `{postgresql: "off"}`)); len(errs) != 1 || errs[0].Path != "/postgresql" {
		t.Fatalf("a subchart's values that are not a map: errors = %+v", errs)
	}
	none, err := SchemaForChart(testChart(t, "plain", `{}`, ""))
	if err != nil || none != nil {
		t.Fatalf("a chart without schema: got %v, %v; want nil, nil", none, err)
	}
}

// schemaChart is a chart with no defaults whose values.schema.json is a
// file of testdata.
func schemaChart(t *testing.T, file string) *chartv2.Chart {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return testChart(t, strings.TrimSuffix(file, ".schema.json"), `{}`, string(doc))
}

func TestComposeRefusesWriteOnlyOutsideSecrets(t *testing.T) {
	ch := schemaChart(t, "postgresql.schema.json")
	tests := []struct {
		name     string
		src      Sources
		wantPath []string
	}{
		{name: "in a Secret it is fine", src: Sources{From: indexed(
			docLayer("Secret", "pg-values-a", `{auth: {password: longenoughpw}}`),
			pathLayer("Secret", "pg-values-a", "auth.postgresPassword", "longenoughpw"),
		)}},
		{name: "in spec.values", src: Sources{Spec: ymapNoT(`{auth: {password: longenoughpw, username: app}}`)}, wantPath: []string{"/auth/password"}},
		{name: "a null in spec.values is no secret", src: Sources{Spec: ymapNoT(`{auth: {password: null}}`)}},
		{name: "in a list item in spec.values", src: Sources{Spec: ymapNoT(`{primary: {extraEnv: [{name: A, value: x}, {name: B}]}}`)}, wantPath: []string{"/primary/extraEnv/0/value"}},
		{name: "in a ConfigMap document", src: Sources{From: indexed(docLayer("ConfigMap", "pg-values-c", `{auth: {postgresPassword: longenoughpw}}`))}, wantPath: []string{"/auth/postgresPassword"}},
		{name: "through a ConfigMap targetPath", src: Sources{From: indexed(pathLayer("ConfigMap", "pg-values-c", "auth.password", "longenoughpw"))}, wantPath: []string{"/auth/password"}},
		{name: "a whole object holding one", src: Sources{Spec: ymapNoT(`{auth: {username: app, database: app, password: longenoughpw}}`)}, wantPath: []string{"/auth/password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Compose(Inputs{Chart: ch, Sources: tt.src})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range res.Errors {
				if e.Rule == "writeOnly" {
					got = append(got, e.Path)
					if !strings.Contains(e.Message, "Secret") || strings.Contains(e.Message, "longenoughpw") {
						t.Errorf("message %q must say to use a Secret and never show the value", e.Message)
					}
				}
			}
			if !reflect.DeepEqual(got, tt.wantPath) {
				t.Fatalf("writeOnly errors at %v, want %v", got, tt.wantPath)
			}
		})
	}
}

// writeOnlyAt lists, dotted and sorted, the paths of the values (YAML) that
// a writeOnly property of s applies to.
func writeOnlyAt(t *testing.T, s *Schema, values string) []string {
	t.Helper()
	out := []string{}
	s.findWriteOnly(ymap(t, values), func(p []string) { out = append(out, dotted(p)) })
	sort.Strings(out)
	return out
}

func TestSchemaSiblingRefsEachFindTheirSecrets(t *testing.T) {
	s, err := ParseSchema("db", []byte(`{
		"$defs": {"cred": {"type": "object", "properties": {
			"password": {"type": "string", "writeOnly": true},
			"token": {"type": "string", "x-capstan-generate": {"length": 16}}}}},
		"properties": {
			"primary": {"$ref": "#/$defs/cred"},
			"replica": {"$ref": "#/$defs/cred"},
			"metrics": {"$ref": "#/$defs/cred"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := writeOnlyAt(t, s, `{primary: {password: a, token: b}, replica: {password: a}, metrics: {password: a}}`),
		[]string{"metrics.password", "primary.password", "replica.password"}; !reflect.DeepEqual(got, want) {
		t.Errorf("writeOnly = %v, want %v", got, want)
	}
	var gen []string
	for _, g := range s.Generated() {
		gen = append(gen, dotted(g.Path))
	}
	sort.Strings(gen)
	if want := []string{"metrics.token", "primary.token", "replica.token"}; !reflect.DeepEqual(gen, want) {
		t.Errorf("generated = %v, want %v", gen, want)
	}
	errs := s.checkWriteOnly(Sources{Spec: ymap(t, `{replica: {password: plaintext}}`)}, nil)
	if len(errs) != 1 || errs[0].Path != "/replica/password" || errs[0].Rule != "writeOnly" {
		t.Errorf("errors = %+v, want one writeOnly error at /replica/password", errs)
	}
}

// fanOutSchema is a schema whose refs branch wide levels deep: the root has
// width properties each referring to $defs/l1, which has width properties each
// referring to $defs/l2, and so on down to $defs/l<levels>. With leaf set, the
// last level holds leaf as its one property.
func fanOutSchema(width, levels int, leaf string) []byte {
	props := func(next string) string {
		var p []string
		for i := 0; i < width; i++ {
			p = append(p, fmt.Sprintf(`"p%d": {"$ref": "#/$defs/%s"}`, i, next))
		}
		return `{"type": "object", "properties": {` + strings.Join(p, ", ") + `}}`
	}
	var defs []string
	for l := 1; l < levels; l++ {
		defs = append(defs, fmt.Sprintf(`"l%d": %s`, l, props(fmt.Sprintf("l%d", l+1))))
	}
	last := `{"type": "object"}`
	if leaf != "" {
		last = `{"type": "object", "properties": {"s": ` + leaf + `}}`
	}
	defs = append(defs, fmt.Sprintf(`"l%d": %s`, levels, last))
	root := props("l1")
	return []byte(`{"$defs": {` + strings.Join(defs, ", ") + `}, ` + strings.TrimPrefix(root, "{"))
}

func TestSchemaWalkIsBoundedOnWideRefs(t *testing.T) {
	// Ten levels of ten properties: 10^10 paths if every ref were expanded.
	t.Run("no secret inputs: nothing to expand", func(t *testing.T) {
		start := time.Now()
		s, err := ParseSchema("wide", fanOutSchema(10, 10, ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.parts[0].writeOnly != nil || len(s.Generated()) != 0 {
			t.Errorf("found secret inputs in a schema without any")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("ParseSchema took %v", d)
		}
	})
	// writeOnly is matched against values, not expanded: a secret input
	// at the bottom is found where the values have one.
	t.Run("a secret input at the bottom: found", func(t *testing.T) {
		start := time.Now()
		s, err := ParseSchema("wide", fanOutSchema(10, 10, `{"writeOnly": true}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := writeOnlyAt(t, s, `{p3: {p1: {p4: {p1: {p5: {p9: {p2: {p6: {p5: {p3: {s: a, t: b}}}}}}}}}}, p0: {p0: {s: c}}}`)
		if want := []string{"p3.p1.p4.p1.p5.p9.p2.p6.p5.p3.s"}; !reflect.DeepEqual(got, want) {
			t.Errorf("writeOnly = %v, want %v", got, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("ParseSchema took %v", d)
		}
	})
	// A generated value must be known before there are values, at each of
	// its fixed paths: 10^10 of them are refused.
	t.Run("a generated property at the bottom: refused", func(t *testing.T) {
		start := time.Now()
		_, err := ParseSchema("wide", fanOutSchema(10, 10, `{"x-capstan-generate": true}`), nil)
		if err == nil || !strings.Contains(err.Error(), "chart wide") || !strings.Contains(err.Error(), "more than 10000 schemas") {
			t.Fatalf("ParseSchema error = %v, want one that names the chart and the bound", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("ParseSchema took %v", d)
		}
	})
	t.Run("a generated property under two levels: found", func(t *testing.T) {
		s, err := ParseSchema("wide", fanOutSchema(10, 2, `{"x-capstan-generate": true}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Generated(); len(got) != 100 || dotted(got[0].Path) != "p0.p0.s" {
			t.Errorf("generated = %d paths starting %v, want the 100 of p*.p*.s", len(got), got[:min(len(got), 1)])
		}
	})
}

// TestSchemaBranchingRecursionIsMatched: a recursive schema that branches
// (a tree) has as many paths as the values make, at any depth; they are
// matched, not expanded.
func TestSchemaBranchingRecursionIsMatched(t *testing.T) {
	s, err := ParseSchema("tree", []byte(`{
		"$defs": {"t": {"type": "object", "properties": {
			"l": {"$ref": "#/$defs/t"}, "r": {"$ref": "#/$defs/t"}, "s": {"type": "string", "writeOnly": true}}}},
		"$ref": "#/$defs/t"}`), nil)
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	got := s.SecretPaths(ymap(t, `{s: a, l: {s: b, r: {s: c, l: {l: {r: {s: d}}}}}, r: {l: {s: e}}}`))
	want := []string{"/l/r/l/l/r/s", "/l/r/s", "/l/s", "/r/l/s", "/s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SecretPaths = %v, want %v", got, want)
	}
	errs := s.checkWriteOnly(Sources{Spec: ymap(t, `{l: {r: {s: plaintext}}}`)}, nil)
	if len(errs) != 1 || errs[0].Path != "/l/r/s" || errs[0].Rule != "writeOnly" {
		t.Errorf("errors = %+v, want one writeOnly error at /l/r/s", errs)
	}
}

func TestSchemaFindsSecretInputsInChartFiles(t *testing.T) {
	files := map[string][]byte{
		"schemas/auth.json": []byte(`{"type": "object", "properties": {
			"user": {"type": "string"},
			"password": {"$ref": "common.json#/$defs/secret"},
			"token": {"$ref": "#/$defs/token"}},
			"$defs": {"token": {"type": "string", "x-capstan-generate": {"length": 20}}}}`),
		"schemas/common.json": []byte(`{"$defs": {"secret": {"type": "string", "writeOnly": true}}}`),
	}
	s, err := ParseSchema("demo", []byte(`{"properties": {
		"auth": {"$ref": "schemas/auth.json"},
		"backup": {"$ref": "schemas/auth.json#"}}}`), files)
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	if got, want := writeOnlyAt(t, s, `{auth: {user: app, password: a, token: b}, backup: {password: a}}`),
		[]string{"auth.password", "backup.password"}; !reflect.DeepEqual(got, want) {
		t.Errorf("writeOnly = %v, want %v", got, want)
	}
	var gen []string
	for _, g := range s.Generated() {
		gen = append(gen, fmt.Sprintf("%s %d", dotted(g.Path), g.Length))
	}
	sort.Strings(gen)
	if want := []string{"auth.token 20", "backup.token 20"}; !reflect.DeepEqual(gen, want) {
		t.Errorf("generated = %v, want %v", gen, want)
	}
	errs := s.checkWriteOnly(Sources{Spec: ymap(t, `{auth: {user: app, password: plaintext}}`)}, nil)
	if len(errs) != 1 || errs[0].Path != "/auth/password" || errs[0].Rule != "writeOnly" {
		t.Errorf("errors = %+v, want one writeOnly error at /auth/password", errs)
	}
}

func TestSchemaRefusesARefThatClimbsOutOfTheChart(t *testing.T) {
	// The compiler reads "../schemas/auth.json" as the chart's own
	// schemas/auth.json, since a file URL cannot climb above its root; a
	// path that climbs out of the chart is refused all the same.
	files := map[string][]byte{"schemas/auth.json": []byte(`{"properties": {"password": {"writeOnly": true}}}`)}
	_, err := ParseSchema("demo", []byte(`{"properties": {"auth": {"$ref": "../schemas/auth.json"}}}`), files)
	if err == nil || !strings.Contains(err.Error(), "outside the chart") || !strings.Contains(err.Error(), "chart demo") {
		t.Fatalf("ParseSchema error = %v, want one that says the $ref leaves the chart, naming it", err)
	}
}

// TestSchemaResolvesRefsAgainstTheirID: a $ref resolves against the URI
// the nearest $id sets, as the compiler resolves it, and a $ref the walk
// cannot follow but the compiler accepts (a meta-schema's definition) does
// not make the chart's schema an error.
func TestSchemaResolvesRefsAgainstTheirID(t *testing.T) {
	for _, tt := range []struct{ name, doc string }{
		{"a meta-schema's definition", `{"properties": {"replicas": {"$ref": "http://json-schema.org/draft-07/schema#/definitions/nonNegativeInteger"}}}`},
		{"the root's $id in full", `{"$id": "https://example.com/values.json", "definitions": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "https://example.com/values.json#/definitions/a"}}}`},
		{"relative to the root's $id", `{"$id": "https://example.com/values.json", "definitions": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "values.json#/definitions/a"}}}`},
		{"an embedded schema's $id", `{"$defs": {"c": {"$id": "child.json", "type": "string"}}, "properties": {"x": {"$ref": "child.json"}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSchema("demo", []byte(tt.doc), nil)
			if err != nil {
				t.Fatalf("ParseSchema: %v", err)
			}
			if errs := s.Validate(map[string]any{}); len(errs) != 0 {
				t.Errorf("errors = %+v, want none", errs)
			}
		})
	}

	s, err := ParseSchema("demo", []byte(`{
		"$id": "https://example.com/charts/values.json",
		"definitions": {"cred": {"type": "object", "properties": {"password": {"type": "string", "writeOnly": true}}}},
		"$defs": {"token": {"$id": "parts/token.json", "type": "object", "properties": {
			"value": {"type": "string", "writeOnly": true},
			"more": {"$ref": "../values.json#/definitions/cred"}}}},
		"properties": {
			"auth": {"$ref": "values.json#/definitions/cred"},
			"api": {"$ref": "parts/token.json"}}}`), nil)
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	if got, want := writeOnlyAt(t, s, `{auth: {password: a}, api: {value: b, more: {password: c}}}`),
		[]string{"api.more.password", "api.value", "auth.password"}; !reflect.DeepEqual(got, want) {
		t.Errorf("writeOnly = %v, want %v", got, want)
	}
}

// TestSchemaIgnoresIDBesideRefBeforeDraft2019: before draft 2019-09 the
// compiler ignores a $ref's siblings, its $id (or id) among them, and
// resolves the $ref against the schema around it; the walk must follow it
// there too, or the writeOnly property behind it is accepted in spec.values
// and shown.
func TestSchemaIgnoresIDBesideRefBeforeDraft2019(t *testing.T) {
	const draft7 = `"$schema": "http://json-schema.org/draft-07/schema#"`
	for _, tt := range []struct {
		name, doc string
		files     map[string][]byte
		values    string
		want      string
	}{
		{name: "a relative $id", values: `{auth: plaintext}`, want: "/auth",
			doc: `{` + draft7 + `, "definitions": {"pw": {"writeOnly": true}}, "properties": {"auth": {"$id": "auth", "$ref": "#/definitions/pw"}}}`},
		{name: "a jsonschema.net $id", values: `{auth: {password: plaintext}}`, want: "/auth/password",
			doc: `{` + draft7 + `, "definitions": {"secret": {"type": "string", "writeOnly": true}}, "properties": {"auth": {"type": "object", "properties": {
				"password": {"$id": "/properties/auth/properties/password", "$ref": "#/definitions/secret"}}}}}`},
		{name: "a draft-04 id", values: `{auth: {password: plaintext}}`, want: "/auth/password",
			doc: `{"$schema": "http://json-schema.org/draft-04/schema#", "definitions": {"secret": {"type": "string", "writeOnly": true}}, "properties": {"auth": {"type": "object", "properties": {
				"password": {"id": "/properties/auth/properties/password", "$ref": "#/definitions/secret"}}}}}`},
		{name: "a draft-06 $id", values: `{auth: plaintext}`, want: "/auth",
			doc: `{"$schema": "https://json-schema.org/draft-06/schema", "definitions": {"pw": {"writeOnly": true}}, "properties": {"auth": {"$id": "auth.json", "$ref": "#/definitions/pw"}}}`},
		{name: "writeOnly beside a $ref", values: `{auth: plaintext}`, want: "/auth",
			doc: `{` + draft7 + `, "definitions": {"s": {"type": "string"}}, "properties": {"auth": {"$id": "auth", "$ref": "#/definitions/s", "writeOnly": true}}}`},
		{name: "in a chart file of draft-07", values: `{auth: {password: plaintext}}`, want: "/auth/password",
			doc: `{"properties": {"auth": {"$ref": "schemas/auth.json"}}}`,
			files: map[string][]byte{"schemas/auth.json": []byte(`{` + draft7 + `, "definitions": {"pw": {"writeOnly": true}}, "properties": {
				"password": {"$id": "password.json", "$ref": "#/definitions/pw"}}}`)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSchema("demo", []byte(tt.doc), tt.files)
			if err != nil {
				t.Fatalf("ParseSchema: %v", err)
			}
			errs := s.checkWriteOnly(Sources{Spec: ymap(t, tt.values)}, nil)
			if len(errs) != 1 || errs[0].Path != tt.want || errs[0].Rule != "writeOnly" {
				t.Errorf("errors = %+v, want one writeOnly error at %s", errs, tt.want)
			}
			if got := s.SecretPaths(ymap(t, tt.values)); !reflect.DeepEqual(got, []string{tt.want}) {
				t.Errorf("SecretPaths = %v, want [%s]", got, tt.want)
			}
		})
	}
}

// TestSchemaIDBesideRefFollowsTheDraft: whether an $id beside a $ref sets
// the base the $ref resolves against depends on the draft, as it does for
// the compiler: from 2019-09 on (and without $schema, which is 2020-12) it
// does, before it does not.
func TestSchemaIDBesideRefFollowsTheDraft(t *testing.T) {
	for _, tt := range []struct{ schema, want string }{
		{`"$schema": "https://json-schema.org/draft/2020-12/schema",`, "auth.b"},
		{`"$schema": "https://json-schema.org/draft/2019-09/schema",`, "auth.b"},
		{``, "auth.b"},
		{`"$schema": "http://json-schema.org/draft-07/schema#",`, "auth.a"},
	} {
		t.Run(tt.want+" "+tt.schema, func(t *testing.T) {
			// The root's pw wants a writeOnly a; the one under the $id
			// "https://example.com/auth.json" wants a writeOnly b.
			s, err := ParseSchema("demo", []byte(`{`+tt.schema+`
				"$id": "https://example.com/values.json",
				"$defs": {"pw": {"type": "object", "required": ["a"], "properties": {"a": {"writeOnly": true}}}},
				"properties": {"auth": {"$id": "https://example.com/auth.json", "$ref": "#/$defs/pw",
					"$defs": {"pw": {"type": "object", "required": ["b"], "properties": {"b": {"writeOnly": true}}}}}}}`), nil)
			if err != nil {
				t.Fatalf("ParseSchema: %v", err)
			}
			if got := writeOnlyAt(t, s, `{auth: {a: x, b: y}}`); !reflect.DeepEqual(got, []string{tt.want}) {
				t.Errorf("writeOnly = %v, want [%s]", got, tt.want)
			}
			// Validation resolved the $ref to the same schema: it requires
			// the writeOnly property found.
			errs := s.Validate(ymap(t, `{auth: {}}`))
			if len(errs) != 1 || errs[0].Rule != "required" || dotted(splitPointer(errs[0].Path)) != tt.want {
				t.Errorf("errors = %+v, want one required error at %s", errs, tt.want)
			}
		})
	}
}

// TestSchemaFindsSecretsBehindAnchors: a $ref to an anchor (#name), a
// $dynamicRef, and a part of the schema that sets its own draft are
// followed as the compiler resolves them; a writeOnly property behind one
// that the walk missed was accepted in spec.values and shown.
func TestSchemaFindsSecretsBehindAnchors(t *testing.T) {
	const (
		draft7  = `"$schema": "http://json-schema.org/draft-07/schema#"`
		draft4  = `"$schema": "http://json-schema.org/draft-04/schema#"`
		draft19 = `"$schema": "https://json-schema.org/draft/2019-09/schema"`
		draft20 = `"$schema": "https://json-schema.org/draft/2020-12/schema"`
		auth    = `"properties": {"auth": {"type": "object", "properties": {"password": {"$ref": "#secret"}}}}`
	)
	for _, tt := range []struct {
		name, doc string
		files     map[string][]byte
	}{
		{name: "a 2020-12 $anchor",
			doc: `{"$defs": {"s": {"$anchor": "secret", "type": "string", "writeOnly": true}}, ` + auth + `}`},
		{name: "a 2019-09 $anchor",
			doc: `{` + draft19 + `, "$defs": {"s": {"$anchor": "secret", "type": "string", "writeOnly": true}}, ` + auth + `}`},
		{name: "a draft-07 $id that is a fragment",
			doc: `{` + draft7 + `, "definitions": {"s": {"$id": "#secret", "type": "string", "writeOnly": true}}, ` + auth + `}`},
		{name: "a draft-04 id that is a fragment",
			doc: `{` + draft4 + `, "definitions": {"s": {"id": "#secret", "type": "string", "writeOnly": true}}, ` + auth + `}`},
		{name: "an anchor of an embedded schema's $id",
			doc: `{"$defs": {"cred": {"$id": "https://example.com/cred.json", "$defs": {"s": {"$anchor": "secret", "writeOnly": true}}}},
				"properties": {"auth": {"properties": {"password": {"$ref": "https://example.com/cred.json#secret"}}}}}`},
		{name: "an anchor in a chart file",
			doc:   `{"properties": {"auth": {"properties": {"password": {"$ref": "schemas/common.json#secret"}}}}}`,
			files: map[string][]byte{"schemas/common.json": []byte(`{"$defs": {"s": {"$anchor": "secret", "writeOnly": true}}}`)}},
		{name: "an anchor in a chart file reached through its root",
			doc: `{"properties": {"auth": {"$ref": "schemas/auth.json"}}}`,
			files: map[string][]byte{"schemas/auth.json": []byte(`{` + draft7 + `, "definitions": {"s": {"$id": "#secret", "writeOnly": true}},
				"properties": {"password": {"$ref": "#secret"}}}`)}},
		{name: "a $dynamicRef to a $dynamicAnchor",
			doc: `{"$defs": {"s": {"$dynamicAnchor": "secret", "type": "string", "writeOnly": true}},
				"properties": {"auth": {"properties": {"password": {"$dynamicRef": "#secret"}}}}}`},
		{name: "a $dynamicRef to an $anchor",
			doc: `{"$defs": {"s": {"$anchor": "secret", "type": "string", "writeOnly": true}},
				"properties": {"auth": {"properties": {"password": {"$dynamicRef": "#secret"}}}}}`},
		{name: "a $dynamicRef to a pointer",
			doc: `{"$defs": {"s": {"type": "string", "writeOnly": true}},
				"properties": {"auth": {"properties": {"password": {"$dynamicRef": "#/$defs/s"}}}}}`},
		{name: "a 2019-09 $recursiveRef",
			doc: `{` + draft19 + `, "$recursiveAnchor": true, "properties": {"password": {"writeOnly": true}, "auth": {"$recursiveRef": "#"}}}`},
		{name: "a $dynamicRef that recurses",
			doc: `{"$dynamicAnchor": "node", "properties": {"password": {"writeOnly": true}, "auth": {"$dynamicRef": "#node"}}}`},
		{name: "a draft-07 part of a 2020-12 file",
			// Read as 2020-12, the $id beside the $ref would send it to
			// https://example.com/elsewhere, where there is no anchor.
			doc: `{` + draft20 + `, "$defs": {"legacy": {` + draft7 + `, "$id": "https://example.com/legacy.json",
					"definitions": {"s": {"$id": "#secret", "writeOnly": true}},
					"properties": {"password": {"$id": "/elsewhere", "$ref": "#secret"}}}},
				"properties": {"auth": {"$ref": "https://example.com/legacy.json"}}}`},
		{name: "an anchor in a definition named default",
			// A definition's name is not a keyword: the schema under it
			// declares its anchor as any other does.
			doc: `{"$defs": {"default": {"$anchor": "secret", "writeOnly": true}}, ` + auth + `}`},
		{name: "an $id on a property named enum",
			doc: `{"properties": {
				"enum": {"$id": "https://example.com/cred.json", "$defs": {"s": {"writeOnly": true}}},
				"auth": {"properties": {"password": {"$ref": "https://example.com/cred.json#/$defs/s"}}}}}`},
		{name: "an anchor that a decoy under an unknown keyword does not shadow",
			// The compiler looks for anchors only where schemas are; the
			// object under "!d" is no schema, and sorts before $defs.
			doc: `{"!d": {"$anchor": "secret"}, "$defs": {"s": {"$anchor": "secret", "writeOnly": true}}, ` + auth + `}`},
		{name: "an anchor that a $ref into an unknown keyword makes known",
			// The compiler reads the anchor under x-cred once the root's
			// $ref to it is compiled, which is before the one to #cred.
			doc: `{"$ref": "#/x-cred", "x-cred": {"$anchor": "cred", "properties": {"password": {"writeOnly": true}}},
				"properties": {"auth": {"$ref": "#cred"}}}`},
		{name: "a 2020-12 part of a draft-07 file",
			doc: `{` + draft7 + `, "definitions": {"modern": {` + draft20 + `, "$id": "https://example.com/modern.json",
					"$defs": {"s": {"$anchor": "secret", "writeOnly": true}},
					"properties": {"password": {"$ref": "#secret"}}}},
				"properties": {"auth": {"$ref": "https://example.com/modern.json"}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSchema("demo", []byte(tt.doc), tt.files)
			if err != nil {
				t.Fatalf("ParseSchema: %v", err)
			}
			const values = `{auth: {password: plaintext}}`
			errs := s.checkWriteOnly(Sources{Spec: ymap(t, values)}, nil)
			if len(errs) != 1 || errs[0].Path != "/auth/password" || errs[0].Rule != "writeOnly" {
				t.Errorf("errors = %+v, want one writeOnly error at /auth/password", errs)
			}
			if got := s.SecretPaths(ymap(t, values)); !reflect.DeepEqual(got, []string{"/auth/password"}) {
				t.Errorf("SecretPaths = %v, want [/auth/password]", got)
			}
		})
	}
}

// TestSchemaDraftOfAPartNeedsItsOwnID: the compiler takes a part's $schema
// only where the part sets its own URI with an $id; elsewhere the part
// keeps the draft around it, and so does the walk. Here the part is
// 2020-12, in which an $id beside a $ref sets the base it resolves against.
func TestSchemaDraftOfAPartNeedsItsOwnID(t *testing.T) {
	s, err := ParseSchema("demo", []byte(`{
		"$id": "https://example.com/values.json",
		"$defs": {"pw": {"type": "object", "required": ["a"], "properties": {"a": {"writeOnly": true}}}},
		"properties": {"auth": {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {
			"x": {"$id": "https://example.com/auth.json", "$ref": "#/$defs/pw",
				"$defs": {"pw": {"type": "object", "required": ["b"], "properties": {"b": {"writeOnly": true}}}}}}}}}`), nil)
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	if got := writeOnlyAt(t, s, `{auth: {x: {a: s, b: t}}}`); !reflect.DeepEqual(got, []string{"auth.x.b"}) {
		t.Errorf("writeOnly = %v, want [auth.x.b]", got)
	}
	errs := s.Validate(ymap(t, `{auth: {x: {}}}`))
	if len(errs) != 1 || errs[0].Rule != "required" || errs[0].Path != "/auth/x/b" {
		t.Errorf("errors = %+v, want one required error at /auth/x/b", errs)
	}
}

// TestSchemaRefusesAMissingAnchor: a $ref or $dynamicRef to an anchor that
// no schema declares makes the schema invalid, as one to a missing
// definition does.
func TestSchemaRefusesAMissingAnchor(t *testing.T) {
	files := map[string][]byte{"schemas/common.json": []byte(`{"$defs": {"s": {"$anchor": "secret", "writeOnly": true}}}`)}
	for _, ref := range []string{
		`"$ref": "#/$defs/nosuch"`,
		`"$ref": "#nosuch"`,
		`"$dynamicRef": "#nosuch"`,
		`"$ref": "schemas/common.json#/$defs/nosuch"`,
		`"$ref": "schemas/common.json#nosuch"`,
	} {
		t.Run(ref, func(t *testing.T) {
			_, err := ParseSchema("demo", []byte(`{"$defs": {"s": {"$anchor": "secret", "writeOnly": true}}, "properties": {"a": {`+ref+`}}}`), files)
			if err == nil || !strings.Contains(err.Error(), "the values.schema.json of chart demo is not a valid JSON Schema") {
				t.Fatalf("ParseSchema error = %v, want one that says the chart's schema is not valid", err)
			}
			if !strings.Contains(err.Error(), "nosuch") {
				t.Errorf("error %q does not name the missing target", err)
			}
		})
	}
}

// TestSchemaAnchorsKeepTheWalkBounded: refs to anchors, static or dynamic,
// name the same schemas as refs to their pointers, and the walk keeps its
// bounds on them: writeOnly matched against the values, generated paths
// refused past the budget, and x-capstan-generate found behind an anchor.
func TestSchemaAnchorsKeepTheWalkBounded(t *testing.T) {
	anchored := func(doc []byte, ref, anchor string) []byte {
		ref, anchor = strings.ReplaceAll(ref, "$", "$$"), strings.ReplaceAll(anchor, "$", "$$")
		doc = regexp.MustCompile(`"\$ref": "#/\$defs/(l\d+)"`).ReplaceAll(doc, []byte(`"`+ref+`": "#$1"`))
		return regexp.MustCompile(`"(l\d+)": \{`).ReplaceAll(doc, []byte(`"$1": {"`+anchor+`": "$1", `))
	}
	for _, kw := range [][2]string{{"$ref", "$anchor"}, {"$dynamicRef", "$dynamicAnchor"}} {
		t.Run(kw[0], func(t *testing.T) {
			start := time.Now()
			s, err := ParseSchema("wide", anchored(fanOutSchema(10, 10, `{"writeOnly": true}`), kw[0], kw[1]), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := writeOnlyAt(t, s, `{p3: {p1: {p4: {p1: {p5: {p9: {p2: {p6: {p5: {p3: {s: a, t: b}}}}}}}}}}, p0: {p0: {s: c}}}`)
			if want := []string{"p3.p1.p4.p1.p5.p9.p2.p6.p5.p3.s"}; !reflect.DeepEqual(got, want) {
				t.Errorf("writeOnly = %v, want %v", got, want)
			}
			_, err = ParseSchema("wide", anchored(fanOutSchema(10, 10, `{"x-capstan-generate": true}`), kw[0], kw[1]), nil)
			if err == nil || !strings.Contains(err.Error(), "more than 10000 schemas") {
				t.Errorf("ParseSchema error = %v, want one that names the bound", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("ParseSchema took %v", d)
			}
			s, err = ParseSchema("wide", anchored(fanOutSchema(10, 2, `{"x-capstan-generate": true}`), kw[0], kw[1]), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Generated(); len(got) != 100 || dotted(got[0].Path) != "p0.p0.s" {
				t.Errorf("generated = %d paths starting %v, want the 100 of p*.p*.s", len(got), got[:min(len(got), 1)])
			}
		})
	}
}

// wideDefinitionSchema is a schema whose root has refs properties, each
// referring to $defs/big, which holds props plain properties and one
// generated property, token.
func wideDefinitionSchema(refs, props int) []byte {
	var b strings.Builder
	b.WriteString(`{"$defs": {"big": {"type": "object", "properties": {"token": {"type": "string", "x-capstan-generate": true}`)
	for i := 0; i < props; i++ {
		fmt.Fprintf(&b, `, "f%d": {"type": "string"}`, i)
	}
	b.WriteString(`}}}, "type": "object", "properties": {`)
	for i := 0; i < refs; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d": {"$ref": "#/$defs/big"}`, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// TestSchemaWalkPaysOnlyForLiveSchemas: the walk for x-capstan-generate
// visits a definition once per property that refers to it, and each visit
// costs only the steps that lead to a generated property, never one per
// plain property beside it. Before, each visit of $defs/big went over all
// its properties, so 1000 refs to 20000 properties (287 KB of schema) took
// some 36 seconds. The work is counted in allocations, which the compiler
// makes in proportion to the schema and the walk in proportion to its steps.
func TestSchemaWalkPaysOnlyForLiveSchemas(t *testing.T) {
	const props = 2000
	parse := func(refs int) float64 {
		doc := wideDefinitionSchema(refs, props)
		return testing.AllocsPerRun(1, func() {
			s, err := ParseSchema("wide", doc, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(s.Generated()); got != refs {
				t.Fatalf("generated %d values, want %d", got, refs)
			}
		})
	}
	once, many := parse(1), parse(300)
	if extra := many - once; extra > once/2 {
		t.Errorf("300 refs to a definition of %d properties cost %.0f allocations more than 1 ref, which costs %.0f; want less than half that",
			props, extra, once)
	}
	// The bound still holds: each ref is a visit of the property, of the
	// definition and of its generated property.
	_, err := ParseSchema("wide", wideDefinitionSchema(4000, 10), nil)
	if err == nil || !strings.Contains(err.Error(), "chart wide") || !strings.Contains(err.Error(), "more than 10000 schemas") {
		t.Errorf("ParseSchema error = %v, want one that names the chart and the bound", err)
	}
}

// BenchmarkParseSchemaWideDefinition times ParseSchema on a definition of
// 2000 properties, one of them generated, that 1000 and 2500 properties
// refer to: the walk for generated properties visits it once per ref. The
// schemas stay under the 20000 that ParseSchema compiles.
func BenchmarkParseSchemaWideDefinition(b *testing.B) {
	for _, refs := range []int{1, 1000, 2500} {
		doc := wideDefinitionSchema(refs, 2000)
		b.Run(fmt.Sprintf("refs=%d/%dKB", refs, len(doc)/1000), func(b *testing.B) {
			for b.Loop() {
				if _, err := ParseSchema("wide", doc, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// flatSchema is a schema that holds n schemas, as countSchemas counts them:
// the root, its properties map and n-2 properties of one type each.
func flatSchema(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type": "object", "properties": {`)
	for i := 0; i < n-2; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"f%d": {"type": "string"}`, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// TestSchemaObjectsAreBounded: a schema past maxSchemaObjects is refused
// before it is compiled, with an error that names the chart, the count and
// the bound; one at the bound compiles. The compiler's time grows with the
// square of the schemas it is given, 7 to 10 seconds for 20,000.
func TestSchemaObjectsAreBounded(t *testing.T) {
	const maxSchemaObjects = 20000 // the bound docs/values.md gives
	if _, err := ParseSchema("wide", flatSchema(maxSchemaObjects), nil); err != nil {
		t.Fatalf("a schema of %d schemas, the bound, is refused: %v", maxSchemaObjects, err)
	}
	_, err := ParseSchema("wide", flatSchema(maxSchemaObjects+1), nil)
	want := fmt.Sprintf("the values.schema.json of chart wide holds %d schemas (JSON objects and true/false values) more than the %d", maxSchemaObjects+1, maxSchemaObjects)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "simplify the schema") {
		t.Fatalf("ParseSchema error = %v, want one with %q that says what to do", err, want)
	}
	// The chart's files that a $ref loads count with the schema.
	_, err = ParseSchema("wide", []byte(`{"$ref": "big.json"}`), map[string][]byte{"big.json": flatSchema(maxSchemaObjects)})
	want = fmt.Sprintf("the file big.json that a $ref names holds %d schemas (JSON objects and true/false values), %d with the other schemas of chart wide", maxSchemaObjects, maxSchemaObjects+1)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ParseSchema error = %v, want one with %q", err, want)
	}
	// A chart's and its subcharts' schemas count together.
	half := string(flatSchema(maxSchemaObjects / 2))
	ch := testChart(t, "parent", "", half, testChart(t, "sub", "", half))
	if _, err := SchemaForChart(ch); err != nil {
		t.Fatalf("a chart and subchart of %d schemas together, the bound, are refused: %v", maxSchemaObjects, err)
	}
	ch = testChart(t, "parent", "", half, testChart(t, "sub", "", string(flatSchema(maxSchemaObjects/2+1))))
	_, err = SchemaForChart(ch)
	want = fmt.Sprintf("the values.schema.json of chart sub holds %d schemas (JSON objects and true/false values), %d with the other schemas of chart parent and its subcharts, more than the %d", maxSchemaObjects/2+1, maxSchemaObjects+1, maxSchemaObjects)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("SchemaForChart error = %v, want one with %q", err, want)
	}
}

// BenchmarkParseSchemaAtTheBound times ParseSchema on a schema of
// 20000 schemas, the bound, and of half as many.
func BenchmarkParseSchemaAtTheBound(b *testing.B) {
	for _, n := range []int{10000, 20000} {
		doc := flatSchema(n)
		b.Run(fmt.Sprintf("schemas=%d/%dKB", n, len(doc)/1000), func(b *testing.B) {
			for b.Loop() {
				if _, err := ParseSchema("wide", doc, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// writeOnly is found wherever validation applies the schema that holds it:
// under draft-07's schema form of dependencies (dependentSchemas' older
// name) and under unevaluatedProperties and unevaluatedItems.
func TestWriteOnlyUnderDependenciesAndUnevaluated(t *testing.T) {
	tests := []struct {
		name, schema, values string
		want                 []string
	}{
		{
			name: "draft-07 dependencies",
			schema: `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
			  "properties": {"db": {"type": "object",
			    "properties": {"external": {"type": "boolean"}},
			    "dependencies": {"external": {"properties": {"password": {"type": "string", "writeOnly": true}}},
			                     "host": ["external"]}}}}`,
			values: "db:\n  external: true\n  password: Sup3rS3cretPw\n",
			want:   []string{"/db/password"},
		},
		{
			name: "unevaluatedProperties",
			schema: `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
			  "properties": {"tokens": {"type": "object", "unevaluatedProperties": {"type": "string", "writeOnly": true}}}}`,
			values: "tokens:\n  ci: Sup3rS3cretPw\n",
			want:   []string{"/tokens/ci"},
		},
		{
			name: "unevaluatedItems",
			schema: `{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object",
			  "properties": {"keys": {"type": "array", "unevaluatedItems": {"type": "string", "writeOnly": true}}}}`,
			values: "keys: [Sup3rS3cretPw]\n",
			want:   []string{"/keys/0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := testChart(t, "app", "", tt.schema)
			res, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: ymap(t, tt.values)}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range res.Errors {
				if e.Rule == "writeOnly" {
					got = append(got, e.Path)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("writeOnly errors at %v, want %v (all errors: %v)", got, tt.want, res.Errors)
			}
			for _, p := range tt.want {
				if !slices.Contains(res.SecretPaths, p) {
					t.Errorf("SecretPaths = %v, want %s among them", res.SecretPaths, p)
				}
			}
		})
	}
}

// A writeOnly schema under additionalProperties, patternProperties or a
// tuple refuses a value in spec.values only where validation applies it:
// a declared plain property or another index is a valid value. Such values
// are still hidden, since hiding errs on the side of hiding.
//
// A conditional branch applies where it applies to the value in spec.values
// or to the value validation sees at the same path, with the chart's
// defaults: a mode or an auth kind that a default sets makes the token
// given beside it a secret input.
func TestSecretInputsAreWhereValidationAppliesTheSchema(t *testing.T) {
	tests := []struct {
		name, schema, defaults, values string
		want                           []string
	}{
		{
			name: "additionalProperties leaves declared properties alone",
			schema: `{"type": "object", "properties": {"env": {"type": "object",
			  "properties": {"LOG_LEVEL": {"type": "string"}},
			  "patternProperties": {"^PUBLIC_": {"type": "string"}},
			  "additionalProperties": {"type": "string", "writeOnly": true}}}}`,
			values: "env:\n  LOG_LEVEL: debug\n  PUBLIC_URL: https://x\n  API_KEY: Sup3rS3cretPw\n",
			want:   []string{"/env/API_KEY"},
		},
		{
			name: "a pattern takes the keys it matches",
			schema: `{"type": "object", "properties": {"env": {"type": "object",
			  "patternProperties": {"_TOKEN$": {"type": "string", "writeOnly": true}}}}}`,
			values: "env:\n  LOG_LEVEL: debug\n  CI_TOKEN: Sup3rS3cretPw\n",
			want:   []string{"/env/CI_TOKEN"},
		},
		{
			name: "prefixItems take their index, items the rest",
			schema: `{"type": "object", "properties": {"args": {"type": "array",
			  "prefixItems": [{"type": "string", "writeOnly": true}], "items": {"type": "string"}}}}`,
			values: "args: [Sup3rS3cretPw, --verbose]\n",
			want:   []string{"/args/0"},
		},
		{
			name: "unevaluatedProperties leaves what allOf declares",
			schema: `{"type": "object", "properties": {"env": {"type": "object",
			  "allOf": [{"properties": {"LOG_LEVEL": {"type": "string"}}}],
			  "unevaluatedProperties": {"type": "string", "writeOnly": true}}}}`,
			values: "env:\n  LOG_LEVEL: debug\n  API_KEY: Sup3rS3cretPw\n",
			want:   []string{"/env/API_KEY"},
		},
		{
			name: "unevaluatedProperties takes what only a branch that did not apply declares",
			schema: `{"type": "object", "properties": {"cfg": {"type": "object",
			  "properties": {"mode": {"type": "string"}},
			  "if": {"properties": {"mode": {"const": "managed"}}},
			  "else": {"properties": {"token": {"type": "string"}}},
			  "unevaluatedProperties": {"type": "string", "writeOnly": true}}}}`,
			values: "cfg:\n  mode: managed\n  token: Sup3rS3cretPw\n",
			want:   []string{"/cfg/token"},
		},
		{
			name: "unevaluatedProperties takes what only an anyOf branch declares",
			schema: `{"type": "object", "properties": {"cfg": {"type": "object",
			  "properties": {"mode": {"type": "string"}},
			  "anyOf": [{"required": ["mode"]}, {"properties": {"token": {"type": "string"}}, "required": ["url"]}],
			  "unevaluatedProperties": {"type": "string", "writeOnly": true}}}}`,
			values: "cfg:\n  mode: managed\n  token: Sup3rS3cretPw\n",
			want:   []string{"/cfg/token"},
		},
		{
			name: "unevaluatedItems takes nothing after items",
			schema: `{"type": "object", "properties": {"args": {"type": "array",
			  "prefixItems": [{"type": "string"}], "items": {"type": "string"},
			  "unevaluatedItems": {"type": "string", "writeOnly": true}}}}`,
			values: "args: [--verbose, --debug]\n",
		},
		{
			name: "a oneOf branch the value does not validate against makes no secret input",
			schema: `{"type": "object", "properties": {"password": {"oneOf": [
			  {"type": "string", "writeOnly": true},
			  {"type": "object", "properties": {"secretName": {"type": "string"}}, "additionalProperties": false}]}}}`,
			values: "password:\n  secretName: my-db\n",
		},
		{
			name: "the oneOf branch the value validates against does",
			schema: `{"type": "object", "properties": {"password": {"oneOf": [
			  {"type": "string", "writeOnly": true},
			  {"type": "object", "properties": {"secretName": {"type": "string"}}, "additionalProperties": false}]}}}`,
			values: "password: Sup3rS3cretPw\n",
			want:   []string{"/password"},
		},
		{
			name: "an anyOf branch applies only where the value validates against it",
			schema: `{"type": "object", "properties": {"db": {"anyOf": [
			  {"required": ["kind"], "properties": {"kind": {"const": "dsn"}, "url": {"type": "string", "writeOnly": true}}},
			  {"required": ["kind"], "properties": {"kind": {"const": "host"}}}]}}}`,
			values: "db:\n  kind: host\n  url: https://db.example/status\n",
		},
		{
			name: "then applies when if holds, else when it does not",
			schema: `{"type": "object", "properties": {"a": {"$ref": "#/$defs/cfg"}, "b": {"$ref": "#/$defs/cfg"}},
			  "$defs": {"cfg": {"type": "object", "properties": {"mode": {"type": "string"}, "token": {"type": "string"}},
			    "if": {"properties": {"mode": {"const": "external"}}},
			    "then": {"properties": {"token": {"writeOnly": true}}},
			    "else": {"properties": {"mode": {"writeOnly": false}}}}}}`,
			values: "a:\n  mode: external\n  token: Sup3rS3cretPw\nb:\n  mode: managed\n  token: public-label\n",
			want:   []string{"/a/token"},
		},
		{
			name: "dependentSchemas applies when its property is there",
			schema: `{"type": "object", "properties": {"a": {"$ref": "#/$defs/cfg"}, "b": {"$ref": "#/$defs/cfg"}},
			  "$defs": {"cfg": {"type": "object", "dependentSchemas": {"auth": {"properties": {"token": {"writeOnly": true}}}}}}}`,
			values: "a:\n  auth: basic\n  token: Sup3rS3cretPw\nb:\n  token: public-label\n",
			want:   []string{"/a/token"},
		},
		{
			name: "then applies when a chart default makes if hold",
			schema: `{"type": "object", "properties": {"db": {"type": "object",
			  "properties": {"mode": {"type": "string"}, "token": {"type": "string"}},
			  "if": {"properties": {"mode": {"const": "external"}}, "required": ["mode"]},
			  "then": {"properties": {"token": {"writeOnly": true}}}}}}`,
			defaults: "db:\n  mode: external\n",
			values:   "db:\n  token: Sup3rS3cretPw\n",
			want:     []string{"/db/token"},
		},
		{
			name: "dependentSchemas applies when a chart default has its property",
			schema: `{"type": "object", "properties": {"db": {"type": "object",
			  "dependentSchemas": {"auth": {"properties": {"token": {"writeOnly": true}}}}}}}`,
			defaults: "db:\n  auth: basic\n",
			values:   "db:\n  token: Sup3rS3cretPw\n",
			want:     []string{"/db/token"},
		},
		{
			name: "an anyOf branch applies when the value with the chart's defaults validates against it",
			schema: `{"type": "object", "properties": {"db": {"type": "object", "anyOf": [
			  {"required": ["kind"], "properties": {"kind": {"const": "dsn"}, "url": {"type": "string", "writeOnly": true}}},
			  {"properties": {"kind": {"const": "host"}}}]}}}`,
			defaults: "db:\n  kind: dsn\n",
			values:   "db:\n  url: postgres://u:Sup3rS3cretPw@db/x\n",
			want:     []string{"/db/url"},
		},
		{
			name: "a reference to a Secret over a chart's empty default makes no secret input",
			schema: `{"type": "object", "properties": {"password": {"oneOf": [
			  {"type": "string", "writeOnly": true},
			  {"type": "object", "properties": {"secretName": {"type": "string"}}, "additionalProperties": false}]}}}`,
			defaults: "password: {}\n",
			values:   "password:\n  secretName: my-db\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := testChart(t, "app", tt.defaults, tt.schema)
			res, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: ymap(t, tt.values)}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range res.Errors {
				got = append(got, e.Path+" "+e.Rule)
			}
			var want []string
			for _, p := range tt.want {
				want = append(want, p+" writeOnly")
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("values errors %v, want %v", got, want)
			}
			for _, p := range tt.want {
				if !slices.Contains(res.SecretPaths, p) {
					t.Errorf("SecretPaths = %v, want %s among them", res.SecretPaths, p)
				}
			}
		})
	}
}
