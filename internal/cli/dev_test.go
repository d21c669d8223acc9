package cli

import (
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
