package values

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
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
