package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// mainStartTimeout bounds the start in Main. It is longer than a warm start
// needs (under 20 s) because other builds may share the machine.
const mainStartTimeout = 2 * time.Minute

// Main runs a package's tests against one shared control plane. Call it from
// TestMain:
//
//	var cluster *testcluster.Cluster
//
//	func TestMain(m *testing.M) {
//		testcluster.Main(m, func(c *testcluster.Cluster) { cluster = c })
//	}
//
// Main starts the cluster, hands it to setup, runs the tests, stops the
// cluster and exits with the tests' code. If the cluster cannot start (for
// example because `make bin` has not been run), every test fails: Main prints
// why and exits with code 1; it never skips. Ctrl-C or SIGTERM stops the
// cluster before the test binary exits.
func Main(m *testing.M, setup func(*Cluster)) {
	os.Exit(run(m, setup))
}

func run(m *testing.M, setup func(*Cluster)) int {
	ctx, cancel := context.WithTimeout(context.Background(), mainStartTimeout)
	c, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the test cluster did not start: %v\n", err)
		return 1
	}
	defer c.Stop()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		if _, ok := <-signals; ok {
			c.Stop()
			os.Exit(2)
		}
	}()

	setup(c)
	return m.Run()
}
