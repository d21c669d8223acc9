// Package shards tests Capstan beyond one controller: shards by
// --watch-label-selector, each add-on reconciled by exactly one of them,
// and leader election, a standby taking over from a killed leader. Every
// controller is a process of its own on the local control plane.
package shards
