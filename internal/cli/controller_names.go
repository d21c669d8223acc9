package cli

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"capstan.dev/capstan/internal/netguard"
)

// checkNamedFlags refuses the controller's flags that name things (its
// namespaces, service account and ConfigMap, its label selector, its
// addresses, files and guard entries) when they cannot, before anything
// starts: without it a bad one was found only after the wait for
// Capstan's CRDs, or never. The entries of --trusted-namespaces are
// trimmed first: "a, b" means a and b, not " b", which no namespace
// matches, so that b's add-ons would silently get the restricted profile.
func (o *controllerOptions) checkNamedFlags() error {
	label := func(flag, value string) error {
		if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
			return fmt.Errorf("%s %q is not a namespace's name: %s", flag, value, strings.Join(errs, "; "))
		}
		return nil
	}
	if err := label("--namespace", o.config.Namespace); err != nil {
		return err
	}
	for i, ns := range o.config.TrustedNamespaces {
		o.config.TrustedNamespaces[i] = strings.TrimSpace(ns)
		if err := label("--trusted-namespaces", o.config.TrustedNamespaces[i]); err != nil {
			return err
		}
	}
	if errs := validation.IsDNS1123Subdomain(o.config.AddonsServiceAccount); len(errs) > 0 {
		return fmt.Errorf("--addons-service-account %q is not a service account's name: %s", o.config.AddonsServiceAccount, strings.Join(errs, "; "))
	}
	if cm := o.config.PlatformConfigMap; cm != "" {
		if errs := validation.IsDNS1123Subdomain(cm); len(errs) > 0 {
			return fmt.Errorf("--platform-configmap %q is not a ConfigMap's name: %s", cm, strings.Join(errs, "; "))
		}
	}
	if _, err := shardOptions(o.watchSelector); err != nil {
		return err
	}
	if o.httpAddr != "0" {
		if _, _, err := net.SplitHostPort(o.httpAddr); err != nil {
			return fmt.Errorf("--http-bind-address %q is not host:port, such as :8080 or 127.0.0.1:8080 (0 disables it): %w", o.httpAddr, err)
		}
	}
	switch {
	case (o.tlsCertFile == "") != (o.tlsKeyFile == ""):
		return fmt.Errorf("give --tls-cert-file and --tls-private-key-file together, or neither for a self-signed certificate")
	case o.tlsCertFile != "":
		if _, err := tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile); err != nil {
			return fmt.Errorf("--tls-cert-file and --tls-private-key-file: %w", err)
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
	return nil
}
