// Package config embeds the kustomize manifests that install Capstan, so
// `capstan dev` and the tests install exactly what a cluster gets.
package config

import "embed"

// FS holds the CRDs, the RBAC and the manager manifests.
//
//go:embed crd rbac manager default
var FS embed.FS
