package cli

import (
	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/controller"
)

// warnTrustedNamespaces logs, once at start, each trusted namespace other
// than the controller's own: an Addon there is applied as the add-ons'
// account, so whoever may create or change Addons (or AddonRepositories)
// in it acts with that account's rights, cluster-admin as the chart binds
// it.
//
// NOTE: the user roles capstan-edit and capstan-admin are aggregated into
// Kubernetes' edit and admin, so a namespace's editors may write its
// Addons without any RoleBinding naming Capstan. The controller cannot
// tell who wrote an Addon, so it says so where the cluster admin looks
// when trusting a namespace: the docs and this log.
func warnTrustedNamespaces(cfg controller.Config, log logr.Logger) {
	cfg = cfg.WithDefaults()
	for _, ns := range cfg.TrustedNamespaces {
		if ns == cfg.Namespace {
			continue
		}
		log.Info("Trusting a namespace other than the controller's own: whoever may write Addons or AddonRepositories there, "+
			"as Kubernetes' edit and admin roles may by aggregation, acts with the add-ons account's rights (cluster-admin by default); "+
			"bind edit and admin in it only to those you would make cluster admins, or leave it out of --trusted-namespaces",
			"namespace", ns, "addonsUser", cfg.AddonsUser())
	}
}
