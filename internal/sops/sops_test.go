package sops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v3"
)

// The files in testdata were encrypted, and decrypted for comparison, by
// the real sops (hack/sops-fixtures.sh): these tests check that Capstan
// reads SOPS's format as SOPS does.

func keys(t *testing.T, name string) []age.Identity {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ParseKeys(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// parseAll parses every document of a YAML stream.
func parseAll(t *testing.T, data []byte) []any {
	t.Helper()
	var out []any
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			break
		}
		out = append(out, v)
	}
	return out
}

func TestDecryptAsSOPSDoes(t *testing.T) {
	ids := keys(t, "age.agekey")
	for _, tc := range []struct{ enc, dec string }{
		{"secret.enc.yaml", "secret.dec.yaml"},
		{"all.enc.yaml", "all.dec.yaml"},
		{"config.enc.yaml", "config.dec.yaml"},
		{"multi.enc.yaml", "multi.dec.yaml"},
		{"maconly.enc.yaml", "maconly.dec.yaml"},
		{"dated.enc.yaml", "dated.dec.yaml"},
		{"secret.enc.json", "secret.dec.json"},
	} {
		t.Run(tc.enc, func(t *testing.T) {
			out, secrets, err := Decrypt(read(t, tc.enc), ids)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(parseAll(t, read(t, tc.dec)), parseAll(t, out)); diff != "" {
				t.Errorf("Capstan's decryption differs from sops's (-sops +capstan):\n%s\n%s", diff, out)
			}
			if strings.Contains(string(out), "sops") || strings.Contains(string(out), "ENC[") {
				t.Errorf("the output keeps SOPS's mapping or an encrypted value:\n%s", out)
			}
			if len(secrets) == 0 {
				t.Error("no decrypted value is reported to be hidden")
			}
		})
	}
	// A value of several types keeps its type, and a decrypted string
	// that looks like a number stays a string.
	out, secrets, err := Decrypt(read(t, "all.enc.yaml"), ids)
	if err != nil {
		t.Fatal(err)
	}
	got := parseAll(t, out)[0].(map[string]any)
	if got["replicas"] != 3 || got["ratio"] != 0.25 || got["enabled"] != true || got["data"].(map[string]any)["note"] != "0755" {
		t.Errorf("types: %#v", got)
	}
	if !strings.Contains(strings.Join(secrets, "\n"), "https://db.internal:5432/app") {
		t.Errorf("secrets %q", secrets)
	}
}

func TestDecryptRefuses(t *testing.T) {
	ids := keys(t, "age.agekey")
	for _, tc := range []struct {
		name string
		data []byte
		ids  []age.Identity
		want string
	}{
		{"changed after encryption", read(t, "tampered.enc.yaml"), ids, "changed after SOPS encrypted it"},
		{"another key", read(t, "other.enc.yaml"), ids, "no age key of the Secret opens it: it is encrypted for age1"},
		{"no key at all", read(t, "secret.enc.yaml"), nil, "no age key of the Secret opens it"},
		{"a value moved", []byte(strings.Replace(string(read(t, "secret.enc.yaml")), "    password:", "    passwd:", 1)), ids,
			"stringData.passwd: the value does not decrypt"},
		{"pgp only", []byte("a: ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]\nsops:\n  pgp:\n    - fp: X\n  mac: x\n  lastmodified: '2020-01-01T00:00:00Z'\n"), ids,
			"encrypted for PGP only"},
		{"comment rule", []byte("a: b\nsops:\n  age: [{recipient: x, enc: y}]\n  encrypted_comment_regex: x\n  mac: x\n"), ids, "comment rule"},
		{"aliases", []byte("a: &x b\nc: *x\nsops:\n  mac: x\n"), ids, "anchors or aliases"},
		{"not encrypted", []byte("a: b\n"), ids, "no sops mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decrypt(tc.data, tc.ids)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := ParseKeys("age.agekey", []byte("AGE-SECRET-KEY-1NOTAKEY")); err == nil || strings.Contains(err.Error(), "NOTAKEY") {
		t.Errorf("a bad key: %v (the entry must not be quoted)", err)
	}
}

func TestDecrypter(t *testing.T) {
	d := &Decrypter{IDs: keys(t, "age.agekey")}
	out, err := d.File("/app/secret.json", read(t, "secret.enc.json"))
	if err != nil || !json.Valid(out) || strings.Contains(string(out), "ENC[") {
		t.Errorf("a JSON file decrypts to JSON: %v\n%s", err, out)
	}
	plain := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n")
	if out, err := d.File("app/plain.yaml", plain); err != nil || string(out) != string(plain) {
		t.Errorf("an unencrypted file: %v %s", err, out)
	}
	// An object meant to be applied encrypted keeps its ciphertext.
	kept := []byte(strings.Replace(string(read(t, "secret.enc.yaml")), "metadata:\n", "metadata:\n    annotations:\n        kustomize.toolkit.fluxcd.io/decrypt: disabled\n", 1))
	if out, err := d.File("app/kept.yaml", kept); err != nil || string(out) != string(kept) {
		t.Errorf("an annotated file: %v", err)
	}
	if _, err := d.File("app/secret.yaml", read(t, "secret.enc.yaml")); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.Secrets, "hunter2-correct-horse") || d.Err() != nil {
		t.Errorf("secrets %q, problems %v", d.Secrets, d.Err())
	}
	if _, err := d.File("/app/tampered.yaml", read(t, "tampered.enc.yaml")); err == nil {
		t.Error("a changed file decrypted")
	}
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "decrypt: app/tampered.yaml: it was changed after SOPS encrypted it") {
		t.Errorf("problems: %v", err)
	}
}

// TestDecryptEdges checks files the real sops writes that the fixtures
// above do not hold: a comment inside an encrypted list, an unencrypted
// date the MAC covers, empty documents, and names a whole-file encryption
// hides, which Capstan shows.
func TestDecryptEdges(t *testing.T) {
	ids := keys(t, "age.agekey")
	out, secrets, err := Decrypt(read(t, "edges.enc.yaml"), ids)
	if err != nil {
		t.Fatal(err)
	}
	// NOTE: sops writes the two empty documents as {}; Capstan leaves
	// them out, as a document with no object.
	if diff := cmp.Diff(parseAll(t, read(t, "edges.dec.yaml"))[:1], parseAll(t, out)); diff != "" {
		t.Errorf("Capstan's decryption differs from sops's (-sops +capstan):\n%s\n%s", diff, out)
	}
	if slices.Contains(secrets, "edges") || slices.Contains(secrets, "ConfigMap") {
		t.Errorf("a name or a kind is to be hidden: %q", secrets)
	}
}

// FuzzDecrypt feeds any file to Decrypt, with the test key: it never
// panics, and what it decrypts has no sops mapping left.
func FuzzDecrypt(f *testing.F) {
	for _, name := range []string{"secret.enc.yaml", "all.enc.yaml", "multi.enc.yaml", "secret.enc.json", "tampered.enc.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	keyData, err := os.ReadFile(filepath.Join("testdata", "age.agekey"))
	if err != nil {
		f.Fatal(err)
	}
	ids, err := ParseKeys("age.agekey", keyData)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, err := Decrypt(data, ids)
		if err == nil && strings.Contains(string(out), "\nsops:") {
			t.Fatalf("the sops mapping is left:\n%s", out)
		}
	})
}

func TestSecretParts(t *testing.T) {
	got := secretParts("https://app:S3cretPassw0rd@${host}/db${tail")
	want := []string{"https://app:S3cretPassw0rd@${host}/db${tail", "https://app:S3cretPassw0rd@", "/db", "tail", "${host}", "${host}", "${tail", "${tail"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := secretParts("plain"); !slices.Equal(got, []string{"plain"}) {
		t.Errorf("%q", got)
	}
}
