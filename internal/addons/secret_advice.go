package addons

import (
	"fmt"
	"strings"
)

// wholeSecret is how to give a secret input that no secret input can
// carry: in a Secret of one's own that valuesFrom merges whole.
const wholeSecret = "write it as YAML at its path in a Secret of your own (key values.yaml), and name that Secret in the add-on's valuesFrom with no targetPath, " +
	"which merges it whole"

// NonScalarSecrets says how to give secret inputs at paths that are an
// object or a list, which no secret field, secretInputs entry nor
// --secret-input can carry: each of those is one string, typed to a
// number or a boolean at most.
func NonScalarSecrets(paths []string) string {
	return fmt.Sprintf("%s is an object or a list, which a secret field or a secret input cannot hold (each is one string): %s", strings.Join(paths, ", "), wholeSecret)
}

// EmptyKeySecrets says how to give secret inputs at paths (JSON pointers)
// with an empty key, which no targetPath can name, and so no secret field,
// secretInputs entry nor --secret-input either.
func EmptyKeySecrets(paths []string) string {
	return fmt.Sprintf("%s is a path with an empty key, which no targetPath, and so no secret input, can name: %s", strings.Join(paths, ", "), wholeSecret)
}
