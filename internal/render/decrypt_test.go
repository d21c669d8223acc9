package render

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"capstan.dev/capstan/internal/sops"
)

func sopsFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "sops", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFolderDecryptsWhatItReads: the build decrypts the files it reads,
// through a kustomization's base too, and never a file it does not
// reach, which another key encrypted or which was changed.
func TestFolderDecryptsWhatItReads(t *testing.T) {
	ids, err := sops.ParseKeys("age.agekey", sopsFixture(t, "age.agekey"))
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"base/secret.yaml":         {Data: sopsFixture(t, "secret.enc.yaml")},
		"base/kustomization.yaml":  {Data: []byte("resources: [secret.yaml]\n")},
		"app/kustomization.yaml":   {Data: []byte("resources: [../base, config.yaml]\nnamespace: apps\n")},
		"app/config.yaml":          {Data: sopsFixture(t, "config.enc.yaml")},
		"plain/config.yaml":        {Data: sopsFixture(t, "config.enc.yaml")},
		"elsewhere/foreign.yaml":   {Data: sopsFixture(t, "other.enc.yaml")},
		"elsewhere/tampered.yaml":  {Data: sopsFixture(t, "tampered.enc.yaml")},
		"operator/sopssecret.yaml": {Data: []byte("apiVersion: isindir.github.com/v1alpha3\nkind: SopsSecret\nmetadata: {name: s}\nspec:\n  x: ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]\nsops: {mac: x}\n")},
	}
	for _, dir := range []string{"app", "plain"} {
		d := &sops.Decrypter{IDs: ids}
		res, err := FolderWith(fsys, dir, SourceIdentity{}, FolderInputs{Decrypt: d.File})
		if err != nil || d.Err() != nil {
			t.Fatalf("%s: %v %v", dir, err, d.Err())
		}
		for _, o := range res.Objects {
			if _, ok := o.Object["sops"]; ok {
				t.Errorf("%s: %s %s keeps its sops field", dir, o.GetKind(), o.GetName())
			}
			if o.GetName() == "conn" {
				if url := o.Object["data"].(map[string]any)["url"]; url != "https://app:db-pass-9876@db.internal/app" {
					t.Errorf("%s: conn's url %v", dir, url)
				}
			}
		}
	}
	if _, err := Folder(fsys, "plain", SourceIdentity{}); err == nil || !strings.Contains(err.Error(), "ConfigMap conn is encrypted with SOPS (it has a sops field): set spec.decryption") {
		t.Errorf("an encrypted file without decryption: %v", err)
	}
	if _, err := Folder(fsys, "operator", SourceIdentity{}); err != nil {
		t.Errorf("a custom resource applied encrypted: %v", err)
	}
}

// TestDecryptedVariables: a variable inside an encrypted file is
// substituted after the build, with the type an unquoted scalar takes,
// and the decrypted text around it is what is hidden.
func TestDecryptedVariables(t *testing.T) {
	ids, err := sops.ParseKeys("age.agekey", sopsFixture(t, "age.agekey"))
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"app/web.yaml": {Data: sopsFixture(t, "vars.enc.yaml")}}
	d := &sops.Decrypter{IDs: ids}
	res, err := FolderWith(fsys, "app", SourceIdentity{}, FolderInputs{Decrypt: d.File, Variables: map[string]string{"replicas": "3", "host": "db.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	web := res.Objects[0].Object
	if r := web["spec"].(map[string]any)["replicas"]; r != int64(3) {
		t.Errorf("replicas %#v, want the number 3", r)
	}
	env := web["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"].([]any)[0].(map[string]any)
	if env["value"] != "https://app:S3cretPassw0rd@db.internal/db" {
		t.Errorf("env value %v", env["value"])
	}
	if !slices.Contains(d.Secrets, "https://app:S3cretPassw0rd@") {
		t.Errorf("the text around the variable is not to be hidden: %q", d.Secrets)
	}
}

// TestGeneratorReadsDecryptedFiles: a secretGenerator that reads a file
// SOPS encrypted whole (a certificate, by its binary store) gets the file
// itself, and one that reads a dotenv file SOPS encrypted stops the build
// rather than generate a Secret of ciphertext.
func TestGeneratorReadsDecryptedFiles(t *testing.T) {
	ids, err := sops.ParseKeys("age.agekey", sopsFixture(t, "age.agekey"))
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"tls/tls.crt":            {Data: sopsFixture(t, "tls.enc.crt")},
		"tls/kustomization.yaml": {Data: []byte("secretGenerator:\n  - name: db-tls\n    files: [tls.crt]\n")},
		"env/secret.env":         {Data: sopsFixture(t, "secret.enc.env")},
		"env/kustomization.yaml": {Data: []byte("secretGenerator:\n  - name: db-env\n    envs: [secret.env]\n")},
	}
	d := &sops.Decrypter{IDs: ids}
	res, err := FolderWith(fsys, "tls", SourceIdentity{}, FolderInputs{Decrypt: d.File})
	if err != nil || d.Err() != nil {
		t.Fatalf("%v %v", err, d.Err())
	}
	pem, err := base64.StdEncoding.DecodeString(res.Objects[0].Object["data"].(map[string]any)["tls.crt"].(string))
	if err != nil || string(pem) != string(sopsFixture(t, "tls.dec.crt")) {
		t.Errorf("the Secret's tls.crt is not the certificate SOPS encrypted: %v\n%s", err, pem)
	}
	d = &sops.Decrypter{IDs: ids}
	if _, err := FolderWith(fsys, "env", SourceIdentity{}, FolderInputs{Decrypt: d.File}); err == nil || d.Err() == nil ||
		!strings.Contains(d.Err().Error(), "env/secret.env: it is a dotenv file that SOPS encrypted") {
		t.Errorf("a dotenv file SOPS encrypted: %v; problems: %v", err, d.Err())
	}
}

// TestFolderFailedBuildListsEachProblemOnce: a loose file of a folder built
// Flux's way that cannot be decrypted (another key encrypted it) fails the
// build, and is one problem, not one for the build and one for the check
// that follows a failed build.
func TestFolderFailedBuildListsEachProblemOnce(t *testing.T) {
	ids, err := sops.ParseKeys("age.agekey", sopsFixture(t, "age.agekey"))
	if err != nil {
		t.Fatal(err)
	}
	fsys := fleetRepo()
	fsys["fleet/infra/foreign.yaml"] = &fstest.MapFile{Data: sopsFixture(t, "other.enc.yaml")}
	fsys["fleet/infra/config.yaml"] = &fstest.MapFile{Data: sopsFixture(t, "config.enc.yaml")}
	d := &sops.Decrypter{IDs: ids}
	if _, err := FolderWith(fsys, "fleet", SourceIdentity{}, FolderInputs{Decrypt: d.File}); err == nil {
		t.Fatal("a folder with a file another key encrypted built")
	}
	if len(d.Problems) != 1 || !strings.HasPrefix(d.Problems[0], "fleet/infra/foreign.yaml: ") {
		t.Errorf("problems = %q, want fleet/infra/foreign.yaml once", d.Problems)
	}
	if n := len(d.Secrets); n == 0 {
		t.Error("config.yaml's secrets were not taken")
	}
	once := len(slices.Compact(slices.Sorted(slices.Values(d.Secrets))))
	if once != len(d.Secrets) {
		t.Errorf("secrets taken more than once: %d of %d distinct", once, len(d.Secrets))
	}
}
