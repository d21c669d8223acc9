// Package install tests how a cluster admin installs Capstan: the Helm
// chart in charts/capstan, rendered by capstan render as by helm template,
// and installed on the local control plane until its controller runs.
package install
