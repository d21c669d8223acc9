package addons

import (
	"fmt"
	"strings"

	"capstan.dev/capstan/internal/values"
)

// WholeSecret is how to give a secret input that no secret input can
// carry: in a Secret of one's own that valuesFrom merges whole.
const WholeSecret = "write it as YAML at its path in a Secret of your own (key values.yaml), and name that Secret in the add-on's valuesFrom with no targetPath, " +
	"which merges it whole"

// NonScalarSecrets says how to give secret inputs at paths that are an
// object or a list, which no secret field, secretInputs entry nor
// --secret-input can carry: each of those is one string, typed to a
// number or a boolean at most.
func NonScalarSecrets(paths []string) string {
	return fmt.Sprintf("%s is an object or a list, which a secret field or a secret input cannot hold (each is one string): %s", strings.Join(paths, ", "), WholeSecret)
}

// EmptyKeySecrets says how to give secret inputs at paths (JSON pointers)
// with an empty key, which no targetPath can name, and so no secret field,
// secretInputs entry nor --secret-input either.
func EmptyKeySecrets(paths []string) string {
	return fmt.Sprintf("%s is a path with an empty key, which no targetPath, and so no secret input, can name: %s", strings.Join(paths, ", "), WholeSecret)
}

// BoundHeld returns the first maxUnknownWarnings of paths, the secret
// inputs a warning names one by one, each name cut to maxWarnedPath
// bytes, and how many more there were: a list of many secret inputs held
// already (one a list item) would otherwise make a warning no Warning
// header, log line or terminal takes.
func BoundHeld(paths []values.SecretInputPath) (named []values.SecretInputPath, more int) {
	if len(paths) > maxUnknownWarnings {
		paths, more = paths[:maxUnknownWarnings], len(paths)-maxUnknownWarnings
	}
	named = make([]values.SecretInputPath, len(paths))
	for i, p := range paths {
		p.Name = cutPath(p.Name)
		named[i] = p
	}
	return named, more
}

// MoreHeld says the secret inputs held already that BoundHeld left out of
// a warning, after the names it kept, or "" for none.
func MoreHeld(more int) string {
	if more == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more not named here", more)
}
