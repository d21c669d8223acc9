package sops

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"filippo.io/age"
	yaml "go.yaml.in/yaml/v3"
)

// The annotations that leave a file as SOPS encrypted it, for an object
// meant to be applied encrypted (a SopsSecret of an operator that
// decrypts in the cluster): Flux's and Capstan's, with the value
// "disabled".
const (
	FluxDecryptAnnotation = "kustomize.toolkit.fluxcd.io/decrypt"
	DecryptAnnotation     = "capstan.dev/decrypt"
)

// maxProblems is how many files' problems an error lists.
const maxProblems = 5

// Decrypter decrypts the files a render reads, as it reads them: only the
// files the add-on's folder reaches, never the rest of its repository. It
// gathers what it decrypted and the problems it found.
type Decrypter struct {
	IDs []age.Identity
	// Secrets are the values the files held, to be hidden.
	Secrets []string
	// Problems name each file that could not be decrypted, and why.
	Problems []string
	// Admit, when set, is asked about the values each file held before
	// they join Secrets, and refuses them with an error that says why:
	// the file is then a problem, and its data is not read. A mask of the
	// values costs memory as they grow.
	Admit func(secrets []string) error
}

// File returns a file's data, decrypted when SOPS encrypted it and no
// annotation leaves it encrypted. A file it cannot decrypt, or a dotenv
// or INI file SOPS encrypted, is a problem and an error that names it, and
// never quotes a value: nothing is read with SOPS's ciphertext in it.
func (d *Decrypter) File(name string, data []byte) ([]byte, error) {
	if store := unreadStore(data); store != "" {
		return nil, d.problem(name, fmt.Errorf("it is %s that SOPS encrypted, which Capstan does not decrypt: encrypt its values in a YAML or JSON file instead (the Secret itself, or a file a secretGenerator reads)", store))
	}
	if !looksEncrypted(data) || leftEncrypted(data) {
		return data, nil
	}
	out, secrets, err := Decrypt(name, data, d.IDs)
	if err != nil {
		return nil, d.problem(name, err)
	}
	if d.Admit != nil {
		if err := d.Admit(secrets); err != nil {
			return nil, d.problem(name, err)
		}
	}
	d.Secrets = append(d.Secrets, secrets...)
	return out, nil
}

// problem records that the file name could not be decrypted, and why, and
// returns it as an error.
func (d *Decrypter) problem(name string, err error) error {
	p := fmt.Sprintf("%s: %v", strings.TrimPrefix(name, "/"), err)
	d.Problems = append(d.Problems, p)
	return errors.New("decrypt: " + p)
}

// SOPS's dotenv and INI files keep their metadata in lines of their own:
// sops_mac=ENC[…], and a [sops] section with mac = ENC[…]. Each is matched
// at the start of a line, where no YAML or JSON file that merely holds
// such a file as a value has it.
var (
	dotenvMAC  = regexp.MustCompile(`(?m)^sops_mac=ENC\[`)
	iniSection = regexp.MustCompile(`(?m)^\[sops\][ \t]*\r?$`)
	iniMAC     = regexp.MustCompile(`(?m)^mac[ \t]*=[ \t]*ENC\[`)
)

// unreadStore names the kind of a file SOPS encrypted that Capstan does
// not decrypt, a dotenv or an INI file, or is empty.
//
// NOTE: it reads the file, not its name: sops picks these stores by the
// name (.env, .ini) or by --input-type, and Flux reads a secretGenerator's
// envs file as dotenv whatever its name.
func unreadStore(data []byte) string {
	if !bytes.Contains(data, []byte("ENC[")) {
		return "" // both stores keep their MAC as ENC[…]: a plain file is read no further
	}
	switch {
	case dotenvMAC.Match(data):
		return "a dotenv file"
	case iniSection.Match(data) && iniMAC.Match(data):
		return "an INI file"
	}
	return ""
}

// Err is the problems found, up to maxProblems, or nil.
func (d *Decrypter) Err() error {
	if d == nil || len(d.Problems) == 0 {
		return nil
	}
	list, more := d.Problems, ""
	if len(list) > maxProblems {
		more = fmt.Sprintf("; and %d more", len(list)-maxProblems)
		list = list[:maxProblems]
	}
	return errors.New("decrypt: " + strings.Join(list, "; ") + more)
}

// leftEncrypted reports whether the file's first document is annotated
// to be applied as it is.
func leftEncrypted(data []byte) bool {
	var doc struct {
		Metadata struct {
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
	}
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil {
		return false
	}
	for _, key := range []string{FluxDecryptAnnotation, DecryptAnnotation} {
		if strings.EqualFold(doc.Metadata.Annotations[key], "disabled") {
			return true
		}
	}
	return false
}
