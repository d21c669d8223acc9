// Package dev tests `capstan dev`, what `make dev` runs on a newcomer's
// first day: the local control plane comes up, the sample add-ons install,
// the walkthrough it prints works as printed, and Ctrl-C leaves nothing
// running and nothing behind. A port another program holds stops it before
// anything starts, with the flag to change.
package dev
