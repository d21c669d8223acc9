package netguard

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCheckLoopbackOnly checks the decision of a loopback-only guard on
// hosts as URLs and dial addresses write them. Nothing here resolves or
// dials.
func TestCheckLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.2", true},
		{"127.255.255.254", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"localhost", true},
		{"LocalHost.", true},
		{"charts.longhorn.io", false},
		{"charts.longhorn.io.", false},
		{"sub.localhost", false},
		{"localhost.example.com", false},
		{"127.0.0.1.nip.io", false},
		{"127.1", false},      // not an IP literal; a resolver could read it as one
		{"2130706433", false}, // 127.0.0.1 as one number, which a resolver could read too
		{"0.0.0.0", false},
		{"::", false},
		{"10.0.0.1", false},
		{"192.0.2.1", false},
		{"169.254.169.254", false},
		{"fe80::1%lo", false},
		{"64:ff9b::7f00:1", false}, // loopback through NAT64 is dialled elsewhere
		{"", false},
	} {
		err := CheckLoopbackOnly(tc.host)
		if tc.ok {
			if err != nil {
				t.Errorf("%q: refused: %v; want it dialled", tc.host, err)
			}
			continue
		}
		var r *RefusedError
		if !errors.As(err, &r) || r.Reason != ReasonNotLoopback || !errors.Is(err, ErrRefused) {
			t.Errorf("%q: %v; want a refusal as not loopback", tc.host, err)
		}
	}
}

// noDNS makes the process's resolver unable to reach a DNS server for the
// length of the test, and the test fail if it tried.
// NOTE: a lookup on a cancelled context may still run on after the
// dial returned, so the hook only records the question (it is still
// never sent), and the test's end reads the record.
func noDNS(t *testing.T) {
	t.Helper()
	saved := net.DefaultResolver
	var asked atomic.Bool
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		asked.Store(true)
		return nil, errors.New("no DNS in this test")
	}}
	t.Cleanup(func() {
		net.DefaultResolver = saved
		if asked.Load() {
			t.Error("a DNS question was asked")
		}
	})
}

// TestLoopbackOnlyRefusesBeforeResolving: a loopback-only guard refuses a
// public name and a public address in CheckURL and DialContext before
// the name is looked up, even when the allow-list would open everything,
// and says it is loopback-only. The dials run on a context already
// cancelled, so that nothing could leave the machine even if the guard
// let them through.
func TestLoopbackOnlyRefusesBeforeResolving(t *testing.T) {
	noDNS(t)
	g, err := New(Config{LoopbackOnly: true, Allow: []string{"0.0.0.0/0", "::/0"}})
	if err != nil {
		t.Fatal(err)
	}
	refusedAsNotLoopback := func(what string, err error) {
		t.Helper()
		var r *RefusedError
		if !errors.As(err, &r) || r.Reason != ReasonNotLoopback {
			t.Errorf("%s: %v; want a loopback-only refusal", what, err)
			return
		}
		if msg := err.Error(); !strings.Contains(msg, "loopback-only") || !strings.Contains(msg, "not resolved") {
			t.Errorf("%s: the refusal %q should say the guard is loopback-only and resolved nothing", what, msg)
		}
	}
	for _, raw := range []string{"https://charts.longhorn.io/index.yaml", "http://192.0.2.1/chart.tgz", "https://[2001:db8::1]:8443/x"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		refusedAsNotLoopback("CheckURL "+raw, g.CheckURL(u))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, addr := range []string{"charts.longhorn.io:443", "192.0.2.1:443", "[2001:db8::1]:443"} {
		conn, err := g.DialContext(ctx, "tcp", addr)
		if conn != nil {
			_ = conn.Close()
		}
		refusedAsNotLoopback("DialContext "+addr, err)
	}
	for _, raw := range []string{"https://127.0.0.1:8443/x", "https://[::1]:8443/x", "https://localhost:8443/x"} {
		u, _ := url.Parse(raw)
		if err := g.CheckURL(u); err != nil {
			t.Errorf("CheckURL %s: %v; want it let through", raw, err)
		}
	}

	// A guard that is not loopback-only leaves a name to its addresses.
	open, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.CheckURL(&url.URL{Scheme: "https", Host: "charts.longhorn.io"}); err != nil {
		t.Errorf("a guard that is not loopback-only refused a name before resolving it: %v", err)
	}
}

// TestLoopbackOnlyDialsLocalhost: localhost is dialled, as 127.0.0.1,
// when the allow-list opens it; loopback-only opens nothing by itself.
func TestLoopbackOnlyDialsLocalhost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	closed, err := New(Config{LoopbackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := closed.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port)); !IsRefused(err) {
		t.Errorf("a loopback-only guard without an allow-list entry dialled localhost: %v", err)
	}
	g, err := New(Config{LoopbackOnly: true, Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := g.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	if err != nil {
		t.Fatalf("dialling localhost: %v", err)
	}
	_ = conn.Close()
}
