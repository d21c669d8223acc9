// Package remote turns a kubeconfig from a Secret into a client
// configuration for another cluster, safely. A kubeconfig is outside input:
// whoever writes the Secret must not be able to make the controller run a
// program, read its own files, skip TLS, go through a proxy, or reach an
// address the egress guard refuses. And Capstan never acts there as the
// kubeconfig's own user: it impersonates the account the kubeconfig names
// (`as:`), whose RBAC on that cluster bounds what the add-on may do, as the
// add-ons account does on the controller's own cluster.
package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"capstan.dev/capstan/internal/netguard"
)

// MaxKubeconfigBytes bounds a kubeconfig read from a Secret.
const MaxKubeconfigBytes = 256 << 10

// RequestTimeout bounds each single request to a remote API server, so an
// unresponsive one fails the reconcile instead of holding it. Watches are
// not single requests: see WatchConfig.
const RequestTimeout = 30 * time.Second

// Config is what Load returns: the client configuration, and the facts a
// message names.
type Config struct {
	*rest.Config
	// Server is the remote API server's URL.
	Server string
	// As is the account Capstan impersonates there.
	As string
}

// Identity names the cluster a kubeconfig reaches and the account Capstan
// acts as there, for a plan's hash (whether the inventory is in another
// cluster is Endpoint's to say): an approval given for one cluster must
// not apply to another that a repointed Secret names, even where the other
// holds what the first did (an empty cluster gives an install the same
// objects to create). It is the API server's URL, the name and the
// certificate authority that its certificate is checked against (one URL
// can reach another cluster through another DNS), and the account
// impersonated, with its groups and extra fields. It holds no credential,
// so a rotated token or client certificate leaves approvals valid.
func (c *Config) Identity() string {
	tls, imp := c.TLSClientConfig, c.Impersonate
	parts := []any{"server", c.Server, "tls-server-name", tls.ServerName, "ca", tls.CAData,
		"as", imp.UserName, "as-uid", imp.UID, "as-groups", imp.Groups}
	for _, k := range slices.Sorted(maps.Keys(imp.Extra)) {
		parts = append(parts, "as-user-extra", k, imp.Extra[k])
	}
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Endpoint names the cluster a kubeconfig reaches, without the account:
// the API server's URL (NormalServer) and the name its certificate is
// checked against, the two that decide which API server answers. Capstan
// compares it to tell whether an add-on's inventory is in another
// cluster, as Argo CD keys its clusters by their server URL. The account,
// its groups and extra fields, and the certificate authority are left
// out: an administrator who edits them in the Secret still points at the
// same cluster, whose objects are the add-on's as before (the plan's hash,
// Identity, still covers them, so approvals go stale).
func (c *Config) Endpoint() string {
	return Endpoint(c.Server, c.ServerName)
}

// Endpoint is Config.Endpoint of a server URL and TLS server name. A TLS
// server name that is the URL's own host is the one the client sends
// anyway, and counts as none.
func Endpoint(server, tlsServerName string) string {
	sni := strings.ToLower(tlsServerName)
	if u, err := url.Parse(server); err == nil && strings.EqualFold(u.Hostname(), sni) {
		sni = ""
	}
	b, _ := json.Marshal([]string{"server", NormalServer(server), "tls-server-name", sni})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NormalServer is an API server's URL written one way, so that two
// spellings of one server compare equal: the scheme and host in lower
// case, the default port 443 dropped, no trailing slash, and no user
// information or fragment. Its path is kept: one host can front many
// clusters under their own paths (as Rancher's proxy does). A URL that
// does not parse is returned as it is.
func NormalServer(server string) string {
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil || u.Host == "" {
		return server
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" && !(port == "443" && strings.EqualFold(u.Scheme, "https")) {
		host += ":" + port
	}
	// NOTE: the path as the client sends it, escapes kept: /a%2Fb and
	// /a/b are two paths to a proxy in front of several clusters.
	n := strings.ToLower(u.Scheme) + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		n += "?" + u.RawQuery
	}
	return n
}

// Load reads a kubeconfig and returns a client configuration for its current
// context, dialling only through guard. It refuses what the kubeconfig may
// not do, with a message that says what to change.
func Load(data []byte, guard *netguard.Guard) (*Config, error) {
	if len(data) == 0 {
		return nil, errors.New("the kubeconfig is empty")
	}
	if len(data) > MaxKubeconfigBytes {
		return nil, fmt.Errorf("the kubeconfig is %d bytes, over the limit of %d", len(data), MaxKubeconfigBytes)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig cannot be read: %v", err)
	}
	if err := Check(kc); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig cannot be used: %v", err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	// NOTE: Check refuses user information in the server URL, so the
	// redaction only guards the messages and the plan should that ever
	// change: Server is shown in the status, the plan and events.
	out := &Config{Config: cfg, Server: netguard.Redact(kc.Clusters[ctx.Cluster].Server), As: cfg.Impersonate.UserName}
	// NOTE: every connection is dialled by the guard, and never through a
	// proxy, so the guard checks the API server's own address.
	cfg.Dial = guard.DialContext
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	cfg.Timeout = RequestTimeout
	cfg.UserAgent = "capstan"
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return out, nil
}

// WatchConfig is cfg for a watch cache: the same server, credentials and
// guarded dialling, without the time bound on a whole request.
//
// NOTE: rest.Config.Timeout becomes http.Client.Timeout, which also ends a
// watch's streaming response: with it, every informer's watch would be cut
// at RequestTimeout and restarted, and a list that takes longer would never
// sync. A watch is bounded by the API server instead (the timeoutSeconds
// the informers send), and a list by the transport's dial and TLS handshake
// bounds and the informers' retries.
func WatchConfig(cfg *rest.Config) *rest.Config {
	w := rest.CopyConfig(cfg)
	w.Timeout = 0
	return w
}

// Check refuses what a kubeconfig from a Secret may not do. It is the
// decision alone: nothing is read or dialled.
func Check(kc *clientcmdapi.Config) error {
	if kc.CurrentContext == "" {
		return errors.New("the kubeconfig has no current-context; set it to the context to use")
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return fmt.Errorf("the kubeconfig's current-context %q is not one of its contexts", kc.CurrentContext)
	}
	cluster, ok := kc.Clusters[ctx.Cluster]
	if !ok {
		return fmt.Errorf("the kubeconfig's context %q names cluster %q, which it does not hold", kc.CurrentContext, ctx.Cluster)
	}
	user, ok := kc.AuthInfos[ctx.AuthInfo]
	if !ok {
		return fmt.Errorf("the kubeconfig's context %q names user %q, which it does not hold", kc.CurrentContext, ctx.AuthInfo)
	}
	var refused []string
	// The server is named in messages without its user information: a
	// refused URL may still carry a password, and the message goes into
	// the Addon's status.
	server := netguard.Redact(cluster.Server)
	u, err := url.Parse(cluster.Server)
	switch {
	case err != nil || u.Host == "":
		refused = append(refused, fmt.Sprintf("server %q is not an https:// URL", server))
	case u.Scheme != "https":
		refused = append(refused, "server "+server+" is not https: credentials are only sent over TLS")
	}
	if err == nil && u.User != nil {
		refused = append(refused, "server "+server+" carries a user name or password in its URL, which would be shown wherever the server is named: put the credentials in the user instead (token, or client-certificate-data and client-key-data)")
	}
	if cluster.InsecureSkipTLSVerify {
		refused = append(refused, "insecure-skip-tls-verify: give certificate-authority-data instead")
	}
	if cluster.CertificateAuthority != "" {
		refused = append(refused, "certificate-authority names a file: embed it as certificate-authority-data")
	}
	if cluster.ProxyURL != "" {
		refused = append(refused, "proxy-url: the remote API server is dialled directly, through the egress guard")
	}
	if user.Exec != nil {
		refused = append(refused, "an exec credential plugin: the controller runs no program a Secret names; use a token or a client certificate")
	}
	if user.AuthProvider != nil {
		refused = append(refused, "an auth-provider: use a token or a client certificate")
	}
	if user.TokenFile != "" {
		refused = append(refused, "tokenFile names a file: embed the token")
	}
	if user.ClientCertificate != "" || user.ClientKey != "" {
		refused = append(refused, "client-certificate or client-key names a file: embed them as client-certificate-data and client-key-data")
	}
	if user.Impersonate == "" {
		refused = append(refused, "the user names no account to act as: add as: (for example system:serviceaccount:capstan:installer), the account whose RBAC bounds what the add-on may do there")
	}
	if len(refused) > 0 {
		return fmt.Errorf("the kubeconfig cannot be used by Capstan: %s", strings.Join(refused, "; "))
	}
	return nil
}
