package cli

import (
	"net"
	"strings"
	"testing"
)

// TestCheckDevAddressesNamesTheFlagOfATakenPort holds a loopback port, as
// another program would, and checks that capstan dev refuses it before
// starting anything, naming the flag and an address to try instead.
func TestCheckDevAddressesNamesTheFlagOfATakenPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	o := &controllerOptions{httpAddr: "127.0.0.1:0", metricsAddr: held.Addr().String(), probeAddr: "0", pprofAddr: "0"}
	err = checkDevAddresses(o)
	if err == nil {
		t.Fatalf("a held port %s passed the check", held.Addr())
	}
	for _, want := range []string{"--metrics-bind-address", held.Addr().String(), "make dev DEV_ARGS=--metrics-bind-address=127.0.0.1:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	held.Close()
	if err := checkDevAddresses(o); err != nil {
		t.Errorf("with the port let go: %v", err)
	}
}

func TestOtherPort(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080":  "127.0.0.1:18080",
		":8443":           ":18443",
		"127.0.0.1:60000": "127.0.0.1:0",
		"no port":         "127.0.0.1:0",
	} {
		if got := otherPort(addr); got != want {
			t.Errorf("otherPort(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestDevWebURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:28080": "https://127.0.0.1:28080",
		":8080":           "https://127.0.0.1:8080",
		"0.0.0.0:9000":    "https://127.0.0.1:9000",
		"[::1]:8080":      "https://[::1]:8080",
		"0":               "",
		"":                "",
	} {
		if got := devWebURL(addr); got != want {
			t.Errorf("devWebURL(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestDevHelpShowsItsOwnDefaults checks that capstan dev --help shows the
// loopback addresses it serves on, not the controller's defaults.
func TestDevHelpShowsItsOwnDefaults(t *testing.T) {
	cmd := newDevCommand()
	for flag, want := range map[string]string{"http-bind-address": "127.0.0.1:8080", "metrics-bind-address": "127.0.0.1:8443", "health-probe-bind-address": "127.0.0.1:8081"} {
		f := cmd.Flags().Lookup(flag)
		if f.DefValue != want || f.Value.String() != want || f.Changed {
			t.Errorf("--%s: default %q, value %q, changed %v; want %q as the default", flag, f.DefValue, f.Value, f.Changed, want)
		}
	}
}
