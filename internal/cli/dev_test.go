package cli

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"capstan.dev/capstan/internal/testcluster"
)

func TestEgressReporterPrintsOneShortLine(t *testing.T) {
	var b strings.Builder
	report := egressReporter(&b)
	report(testcluster.Refusal{
		Time:        time.Now(),
		Caller:      "kube-apiserver (cluster egress)",
		Destination: "10.96.12.4:443",
		Reason:      "a Service's ClusterIP (10.96.0.0/16) (Service gatekeeper-system/gatekeeper-webhook-service)",
	})
	out := b.String()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("printed %q; want one line", out)
	}
	for _, want := range []string{"egress guard", "kube-apiserver", "10.96.12.4:443 refused", "gatekeeper-system/gatekeeper-webhook-service", "logs/egress.log"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed %q; want it to mention %q", out, want)
		}
	}
}

// TestDevHasNoControllerFlagsItIgnores: capstan dev runs the controller in
// the namespace of the control plane it starts, so the controller's
// --namespace and --kubeconfig would be listed in --help and ignored.
func TestDevHasNoControllerFlagsItIgnores(t *testing.T) {
	cmd := newDevCommand()
	for _, flag := range []string{"namespace", "kubeconfig"} {
		if cmd.Flags().Lookup(flag) != nil {
			t.Errorf("capstan dev has --%s, which it ignores", flag)
		}
	}
	if cmd.Flags().Lookup("trusted-namespaces") == nil {
		t.Error("capstan dev lost the controller's other flags")
	}
}

// TestDevRefusesControllerFlagsBeforeStarting: capstan dev takes the
// controller's flags, so it refuses the values the controller refuses,
// before it starts the control plane. The --bin-dir holds no binaries:
// a run that got past the flags would end in testcluster's "run make
// bin" error instead, as the last case shows.
func TestDevRefusesControllerFlagsBeforeStarting(t *testing.T) {
	for _, c := range []struct {
		flag, want string
	}{
		{"--prune-approval-threshold=0", "--prune-approval-threshold 0 is not a share of the inventory"},
		{"--max-objects-per-addon=0", "--max-objects-per-addon 0: give a positive number of objects"},
		{"--git-memory-budget=16Mi", "below 32Mi, too little to fetch a repository"},
		{"--leader-election-id=Not_A_Lease", "is not a Lease's name"},
	} {
		err := runDevCommand(t, c.flag)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("capstan dev %s: %v; want an error saying %q", c.flag, err, c.want)
		}
		if errors.Is(err, testcluster.ErrBinariesMissing) {
			t.Errorf("capstan dev %s went on to start the control plane", c.flag)
		}
	}
	if err := runDevCommand(t, "--prune-approval-threshold=0.001"); !errors.Is(err, testcluster.ErrBinariesMissing) {
		t.Errorf("capstan dev with flags it takes: %v; want the missing binaries of --bin-dir", err)
	}
}

// runDevCommand runs capstan dev with args, a --bin-dir that does not
// exist and no address to listen on.
func runDevCommand(t *testing.T, args ...string) error {
	t.Helper()
	cmd := newDevCommand()
	cmd.SetArgs(append([]string{"--bin-dir=" + filepath.Join(t.TempDir(), "no-bin"),
		"--http-bind-address=0", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage = true
	return cmd.ExecuteContext(t.Context())
}
