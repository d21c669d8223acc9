// Package samples embeds the sample add-ons that `capstan dev` installs.
package samples

import "embed"

// FS holds addons.yaml and the gitops folders it points at.
//
//go:embed addons.yaml gitops
var FS embed.FS
