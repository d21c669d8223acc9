// Package config embeds the kustomize manifests that install Capstan, so
// `capstan dev` and the tests install exactly what a cluster gets.
package config

import "embed"

// FS holds the CRDs, the RBAC, the user roles and the manager manifests,
// and the kustomizations that put them together.
//
//go:embed crd rbac manager roles base default
var FS embed.FS
