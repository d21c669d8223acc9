package cli

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/netguard"
)

// checkNamedFlags refuses the controller's flags that name things (its
// namespaces, service account and ConfigMap, its label selector, its
// addresses, files and guard entries) when they cannot, before anything
// starts: without it a bad one was found only after the wait for
// Capstan's CRDs, or never.
func (o *controllerOptions) checkNamedFlags() error {
	if err := checkPlanConfig(&o.config, "--namespace"); err != nil {
		return err
	}
	if _, err := shardOptions(o.watchSelector); err != nil {
		return err
	}
	// NOTE: an empty --http-bind-address serves the API on a port the
	// system picks, as net.Listen reads it, as it always did.
	if o.httpAddr != "0" && o.httpAddr != "" {
		if _, _, err := net.SplitHostPort(o.httpAddr); err != nil {
			return fmt.Errorf("--http-bind-address %q is not host:port, such as :8080 or 127.0.0.1:8080 (0 disables it): %w", o.httpAddr, err)
		}
	}
	// NOTE: the TLS files are read only for the API, as newManager reads
	// them: with the API off, a chart's extra TLS flags start as before.
	if o.httpAddr != "0" {
		switch {
		case (o.tlsCertFile == "") != (o.tlsKeyFile == ""):
			return fmt.Errorf("give --tls-cert-file and --tls-private-key-file together, or neither for a self-signed certificate")
		case o.tlsCertFile != "":
			if _, err := tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile); err != nil {
				return fmt.Errorf("--tls-cert-file and --tls-private-key-file: %w", err)
			}
		}
	}
	if o.caFile != "" {
		if _, err := os.ReadFile(o.caFile); err != nil {
			return fmt.Errorf("reading --ca-file: %w", err)
		}
	}
	if _, err := netguard.New(o.guard); err != nil {
		return fmt.Errorf("the fetch guard's settings: %w", err)
	}
	if _, err := newNotifyGuard(o.guard, o.notifyAllow); err != nil {
		return fmt.Errorf("--notify-allow: %w", err)
	}
	if _, err := remoteGuard(o.config.RemoteGuard.Allow, o.guard); err != nil {
		return err
	}
	return nil
}

// checkPlanConfig trims and checks the flags of the controller's
// configuration that an add-on's plan depends on (addPlanConfigFlags) and
// its namespace, which namespaceFlag names: `capstan controller` and
// `capstan plan` both read them here, so that the same flags give the
// same plan, with its hash. The entries of --trusted-namespaces are
// trimmed: "a, b" means a and b, not " b", which no namespace matches,
// so that b's add-ons would silently get the restricted profile. An
// empty entry ("a,", "a,,b") matches no namespace, and is dropped; a
// list of empty entries alone, which would trust no namespace, not even
// the controller's own, is refused. An empty namespace or service account
// is the default, as it always was.
func checkPlanConfig(c *controller.Config, namespaceFlag string) error {
	label := func(flag, value string) error {
		if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
			return fmt.Errorf("%s %q is not a namespace's name: %s", flag, value, strings.Join(errs, "; "))
		}
		return nil
	}
	defaults := controller.Config{}.WithDefaults()
	if c.Namespace == "" {
		c.Namespace = defaults.Namespace
	}
	if err := label(namespaceFlag, c.Namespace); err != nil {
		return err
	}
	var trusted []string
	for _, ns := range c.TrustedNamespaces {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if err := label("--trusted-namespaces", ns); err != nil {
			return err
		}
		trusted = append(trusted, ns)
	}
	if len(c.TrustedNamespaces) > 0 && len(trusted) == 0 {
		return fmt.Errorf("--trusted-namespaces %q names no namespace: give the namespaces whose Addons use the cluster profile, or leave the flag out for the controller's own", strings.Join(c.TrustedNamespaces, ","))
	}
	c.TrustedNamespaces = trusted
	if c.AddonsServiceAccount == "" {
		c.AddonsServiceAccount = defaults.AddonsServiceAccount
	}
	if errs := validation.IsDNS1123Subdomain(c.AddonsServiceAccount); len(errs) > 0 {
		return fmt.Errorf("--addons-service-account %q is not a service account's name: %s", c.AddonsServiceAccount, strings.Join(errs, "; "))
	}
	if cm := c.PlatformConfigMap; cm != "" {
		if errs := validation.IsDNS1123Subdomain(cm); len(errs) > 0 {
			return fmt.Errorf("--platform-configmap %q is not a ConfigMap's name: %s", cm, strings.Join(errs, "; "))
		}
	}
	return nil
}
