package sops

import (
	"encoding/json"
	"errors"
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
//
// NOTE: tls.enc.crt, order.enc.json and secret.enc.env, and what
// order.enc.json decrypts to, were written without sops at hand, with the
// same key, following sops's binary, JSON and dotenv stores
// (stores/json, stores/dotenv): the script writes them anew with sops.

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
			out, secrets, err := Decrypt(tc.enc, read(t, tc.enc), ids)
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
	out, secrets, err := Decrypt("all.enc.yaml", read(t, "all.enc.yaml"), ids)
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

// TestDecryptWritesWhatSOPSWrites: a file decrypts to the very bytes
// sops decrypt writes, which a generator reads and hashes into its name:
// a binary file is the file SOPS encrypted whole, and a JSON file keeps
// its members' order, its tabs and SOPS's escapes.
func TestDecryptWritesWhatSOPSWrites(t *testing.T) {
	ids := keys(t, "age.agekey")
	for _, tc := range []struct{ name, enc, dec string }{
		{"tls.crt", "tls.enc.crt", "tls.dec.crt"},
		{"secret.json", "secret.enc.json", "secret.dec.json"},
		{"order.json", "order.enc.json", "order.dec.json"},
		// NOTE: a JSON file named .yaml is YAML to sops, and so here.
		{"secret.yaml", "secret.enc.json", "secret.dec.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, secrets, err := Decrypt(tc.name, read(t, tc.enc), ids)
			if err != nil {
				t.Fatal(err)
			}
			want := read(t, tc.dec)
			if strings.HasSuffix(tc.name, ".yaml") {
				if strings.HasPrefix(string(out), "{") || !cmp.Equal(parseAll(t, want), parseAll(t, out)) {
					t.Errorf("want YAML holding sops's JSON:\n%s", out)
				}
				return
			}
			if string(out) != string(want) {
				t.Errorf("Capstan's decryption differs from sops's:\n%s\nsops:\n%s", out, want)
			}
			if len(secrets) == 0 {
				t.Error("no decrypted value is reported to be hidden")
			}
		})
	}
}

// TestDecryptRefusesYAMLNamedJSON: a .json file that holds YAML (encrypted
// with --input-type yaml) is refused, as sops decrypt refuses it, rather
// than written as JSON with its first document alone.
func TestDecryptRefusesYAMLNamedJSON(t *testing.T) {
	ids := keys(t, "age.agekey")
	for _, tc := range []struct{ enc, want string }{
		{"multi.enc.yaml", "it is named .json but holds YAML, 2 documents, which sops decrypt does not read as JSON"},
		{"secret.enc.yaml", "it is named .json but holds YAML which sops decrypt does not read as JSON"},
	} {
		out, _, err := Decrypt("x.json", read(t, tc.enc), ids)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s named x.json: got %v\n%s\nwant an error with %q", tc.enc, err, out, tc.want)
		}
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
			_, _, err := Decrypt("file.yaml", tc.data, tc.ids)
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

// TestDecrypterFormats: a file SOPS encrypted whole (its binary store, for
// a name it has no other store for) is read as the file it was; a dotenv
// or INI file SOPS encrypted is a problem, never read with its ciphertext.
func TestDecrypterFormats(t *testing.T) {
	d := &Decrypter{IDs: keys(t, "age.agekey")}
	out, err := d.File("/app/tls.crt", read(t, "tls.enc.crt"))
	if err != nil || string(out) != string(read(t, "tls.dec.crt")) {
		t.Errorf("a binary file decrypts to the file SOPS encrypted: %v\n%s", err, out)
	}
	if !slices.Contains(d.Secrets, string(read(t, "tls.dec.crt"))) {
		t.Error("the decrypted file is not to be hidden")
	}
	plain := []byte("# settings\nLOG_LEVEL=debug\n[sops]\n")
	if out, err := d.File("app/plain.env", plain); err != nil || string(out) != string(plain) {
		t.Errorf("an unencrypted dotenv file: %v %s", err, out)
	}
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	ini := []byte("[app]\npassword = ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]\n\n[sops]\nage__list_0__map_recipient = age1x\nmac = ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]\nversion = 3.13.3\n")
	for _, tc := range []struct {
		name  string
		data  []byte
		store string
	}{
		{"app/secret.env", read(t, "secret.enc.env"), "a dotenv file"},
		// Flux reads a secretGenerator's envs file as dotenv whatever its
		// name.
		{"app/secret.txt", read(t, "secret.enc.env"), "a dotenv file"},
		{"app/secret.ini", ini, "an INI file"},
	} {
		out, err := d.File(tc.name, tc.data)
		want := "decrypt: " + tc.name + ": it is " + tc.store + " that SOPS encrypted, which Capstan does not decrypt"
		if out != nil || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v %q, want an error %q", tc.name, err, out, want)
		}
	}
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "app/secret.ini: it is an INI file") || strings.Contains(err.Error(), "env-secret-value") {
		t.Errorf("problems: %v", err)
	}
}

// TestDecryptEdges checks files the real sops writes that the fixtures
// above do not hold: a comment inside an encrypted list, an unencrypted
// date the MAC covers, empty documents, and names a whole-file encryption
// hides, which Capstan shows.
func TestDecryptEdges(t *testing.T) {
	ids := keys(t, "age.agekey")
	out, secrets, err := Decrypt("edges.enc.yaml", read(t, "edges.enc.yaml"), ids)
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

// FuzzDecrypt feeds any file, by any name, to Decrypt, with the test key:
// it never panics, and what it decrypts has no sops mapping left.
func FuzzDecrypt(f *testing.F) {
	for _, name := range []string{"secret.enc.yaml", "all.enc.yaml", "multi.enc.yaml", "secret.enc.json", "tampered.enc.yaml", "tls.enc.crt", "order.enc.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(name, data)
	}
	keyData, err := os.ReadFile(filepath.Join("testdata", "age.agekey"))
	if err != nil {
		f.Fatal(err)
	}
	ids, err := ParseKeys("age.agekey", keyData)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		out, _, err := Decrypt(name, data, ids)
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

// TestDecrypterAdmit: a file whose values Admit refuses is a problem that
// says why, its data is not read, and its values do not join Secrets.
func TestDecrypterAdmit(t *testing.T) {
	d := &Decrypter{IDs: keys(t, "age.agekey"), Admit: func(secrets []string) error {
		if len(secrets) > 0 {
			return errors.New("too many secret values")
		}
		return nil
	}}
	if out, err := d.File("/app/secret.yaml", read(t, "secret.enc.yaml")); out != nil || err == nil {
		t.Errorf("a refused file: %v\n%s", err, out)
	}
	if len(d.Secrets) != 0 {
		t.Errorf("a refused file's values joined Secrets: %d", len(d.Secrets))
	}
	if err := d.Err(); err == nil || err.Error() != "decrypt: app/secret.yaml: too many secret values" {
		t.Errorf("problems: %v", err)
	}
}
