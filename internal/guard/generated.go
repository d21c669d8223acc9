package guard

import (
	"fmt"
	"strings"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// generatedSuffix ends the name of the Secret where the controller keeps
// an Addon's generated values: "<addon>-generated", in the Addon's
// namespace.
const generatedSuffix = "-generated"

// checkGeneratedName refuses a Secret whose name ends in -generated. Such
// a name is the generated values Secret of the Addon named by its prefix,
// in this namespace: a chart that renders it, labelled as its own, keeps
// that add-on from installing until the chart stops. The other Addon need
// not exist yet, so every such name is refused, not just those of the
// Addons there now. The Addon's own name is refused by the reserved names
// already.
func (ck *checker) checkGeneratedName(ref capstanv1.ObjectRef, name string) {
	if !strings.HasSuffix(name, generatedSuffix) || ck.c.ReservedNames.reserves(name) {
		return
	}
	ck.add(ref, "metadata.name", RuleNameReserved,
		fmt.Sprintf("Secret name %q ends in %s, which Capstan keeps for the generated values of the Addon %q of this namespace; rename the Secret",
			name, generatedSuffix, strings.TrimSuffix(name, generatedSuffix)))
}
