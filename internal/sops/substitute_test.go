package sops_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"capstan.dev/capstan/internal/mask"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/sops"
)

// TestDecryptedTextLeavesNoTraceInSubstitutionErrors: a decrypted value
// whose ${…} the substitution cannot take fails the render, and the error,
// once its secrets are hidden as the controller hides them before a status,
// an event or a notification, holds no piece of the value, in a kustomize
// folder and a plain one.
func TestDecryptedTextLeavesNoTraceInSubstitutionErrors(t *testing.T) {
	long := "Zq8${Kd93!fPx" + strings.Repeat("Rt7mW", 14) + "}Lm2v"
	for _, secret := range []string{
		"Zq8${Kd93fPxLm2v}Wq",                 // not defined
		"Zq8${Kd93!fPx}Lm2v",                  // not a variable
		"Zq8${Kd93fPx:=${Lm2v}}Wq",            // a nested default
		"Zq8${Kd93fPxLm2vWq",                  // no closing brace
		"Zq8${Kd93fP\nxLm2vWq",                // no closing brace, cut at its line
		long,                                  // quoted cut to 60 bytes
		"Zq8Ab${Kd93fPxLm2v}Wq${Rt7m!W}Lm2vX", // two
	} {
		for _, kustomize := range []bool{false, true} {
			cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata:\n  password: " + strconvQuote(secret) + "\n"
			fsys := fstest.MapFS{"app/cm.yaml": {Data: []byte(cm)}}
			if kustomize {
				fsys["app/kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources: [cm.yaml]\n")}
			}
			_, err := render.FolderWith(fsys, "app", render.SourceIdentity{}, render.FolderInputs{Variables: map[string]string{}})
			if err == nil {
				t.Fatalf("%q: the render took it", secret)
			}
			msg := mask.New(sops.SecretParts(secret)).String(err.Error())
			if !strings.Contains(msg, "ConfigMap db: ") {
				t.Errorf("%q: the error does not name the object: %s", secret, msg)
			}
			for _, piece := range pieces(secret) {
				if strings.Contains(msg, piece) {
					t.Errorf("%q (kustomize %v): %q shows in %s", secret, kustomize, piece, msg)
					break
				}
			}
		}
	}
}

// pieces is every three characters of secret that hold no $, { or },
// which the error's own advice (${name:=default}, $${) holds.
func pieces(secret string) []string {
	var out []string
	for i := 0; i+3 <= len(secret); i++ {
		if p := secret[i : i+3]; !strings.ContainsAny(p, "${}\n") {
			out = append(out, p)
		}
	}
	return out
}

// strconvQuote writes s as a YAML double-quoted scalar.
func strconvQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
