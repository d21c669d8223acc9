package netguard

import (
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// AddFlags binds the guard's settings to controller flags:
//
//	--fetch-allow                 CIDR, IP, IP:port or host[:port]; repeatable
//	--fetch-deny                  extra addresses to refuse, such as the API server's
//	--fetch-deny-private          also refuse private addresses
//	--fetch-dial-timeout          one TCP connect
//	--fetch-tls-timeout           one TLS handshake
//	--fetch-header-timeout        the wait for response headers
//	--fetch-timeout               one request, body included
//	--fetch-max-response-bytes    the cap on every response body
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.Allow, "fetch-allow", c.Allow,
		"Addresses the fetch guard lets through although it would refuse them: CIDR, IP, IP:port or host[:port]. The only way past the guard, for mirrors and tests.")
	fs.StringSliceVar(&c.Deny, "fetch-deny", c.Deny,
		"Addresses the fetch guard always refuses, in the forms of --fetch-allow. The API server's own addresses are added automatically.")
	fs.BoolVar(&c.DenyPrivate, "fetch-deny-private", c.DenyPrivate,
		"Also refuse private (RFC 1918, fc00::/7, 100.64.0.0/10) addresses unless allow-listed.")
	fs.DurationVar(&c.DialTimeout, "fetch-dial-timeout", DefaultDialTimeout, "Timeout of one TCP connect of a fetch.")
	fs.DurationVar(&c.TLSHandshakeTimeout, "fetch-tls-timeout", DefaultTLSHandshakeTimeout, "Timeout of one TLS handshake of a fetch.")
	fs.DurationVar(&c.ResponseHeaderTimeout, "fetch-header-timeout", DefaultResponseHeaderTimeout, "Timeout of the wait for a response's headers.")
	fs.DurationVar(&c.Timeout, "fetch-timeout", DefaultTimeout, "Timeout of one request of a fetch, body included.")
	fs.Int64Var(&c.MaxResponseBytes, "fetch-max-response-bytes", DefaultMaxResponseBytes, "Cap on every response body of a fetch.")
}

// APIServerDenyEntries returns deny-list entries for the cluster API server:
// the host and port of apiServerURL (a rest.Config's Host) and, in a pod, the
// kubernetes Service's address from KUBERNETES_SERVICE_HOST and _PORT. A name
// is matched as a name when dialled; add its IPs too when they are known.
// The servers behind the Service have addresses of their own, which a
// DenyList (Config.DenyLive) holds.
func APIServerDenyEntries(apiServerURL string) []string {
	var out []string
	if apiServerURL != "" {
		raw := apiServerURL
		if !strings.Contains(raw, "://") {
			raw = "https://" + raw
		}
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80"}[u.Scheme]
				if port == "" {
					port = "443"
				}
			}
			out = append(out, net.JoinHostPort(u.Hostname(), port))
		}
	}
	if h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"); h != "" && p != "" {
		out = append(out, net.JoinHostPort(h, p))
	}
	return out
}
