package sops

import (
	"bytes"
	"errors"
	"fmt"
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
}

// File returns a file's data, decrypted when SOPS encrypted it and no
// annotation leaves it encrypted. A file it cannot decrypt is a problem
// and an error that names it, and never quotes a value.
func (d *Decrypter) File(name string, data []byte) ([]byte, error) {
	if !looksEncrypted(data) || leftEncrypted(data) {
		return data, nil
	}
	out, secrets, err := Decrypt(data, d.IDs)
	if err != nil {
		p := fmt.Sprintf("%s: %v", strings.TrimPrefix(name, "/"), err)
		d.Problems = append(d.Problems, p)
		return nil, errors.New("decrypt: " + p)
	}
	d.Secrets = append(d.Secrets, secrets...)
	return out, nil
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
