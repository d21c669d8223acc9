package render

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
)

// onlyLoopback keeps this test process from reaching anything but
// loopback, whatever a test renders. kustomize fetches a remote resource
// with Go's default transport and clones a git base with the git command;
// refuseRemote stops both before a build, and the tests of folders that
// name remotes check that it does. Should it ever let one through, the
// build fails here instead of sending a request off the machine.
func onlyLoopback() {
	base := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	base.Proxy = nil
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := loopbackOnly(addr); err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, addr)
	}
	http.DefaultTransport = base
	// git refuses every transport but local files: no https, ssh or git
	// protocol clone can start.
	os.Setenv("GIT_ALLOW_PROTOCOL", "file")
}

// loopbackOnly refuses an address that is not a loopback IP or
// localhost, before any name is resolved.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("the render tests dial only loopback, not %s", addr)
}

func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:80":         true,
		"[::1]:443":            true,
		"localhost:8080":       true,
		"github.com:443":       false,
		"10.0.0.1:80":          false,
		"169.254.169.254:80":   false,
		"[::ffff:10.0.0.1]:80": false,
	} {
		if err := loopbackOnly(addr); (err == nil) != ok {
			t.Errorf("loopbackOnly(%q) = %v, want allowed %v", addr, err, ok)
		}
	}
}
