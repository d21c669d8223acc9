package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"capstan.dev/capstan/internal/gitops/gitserver"
)

func runAddon(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	parent := &cobra.Command{Use: "addon", SilenceUsage: true, SilenceErrors: true}
	parent.AddCommand(newAddonGitopsCommands()...)
	var out bytes.Buffer
	parent.SetOut(&out)
	parent.SetErr(&out)
	parent.SetIn(strings.NewReader(stdin))
	parent.SetArgs(args)
	err := parent.Execute()
	return out.String(), err
}

func TestAddonGitopsCommands(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	gitserver.Clone(t, url).Write("README.md", "x\n").CommitAndPush("start")

	def := "name: grafana\nhelm:\n  repo: https://grafana.github.io/helm-charts/\n  chart: grafana\n  version: 8.0.0\n"
	file := filepath.Join(t.TempDir(), "grafana.yaml")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"install", "--gitops", url, "-f", file, "--author", "Ada <ada@example.com>"}, "installed"},
		{"", []string{"suspend", "grafana", "--gitops", url}, "suspend grafana"},
		{"", []string{"suspend", "grafana", "--gitops", url}, "Nothing to commit"},
		{"", []string{"resume", "grafana", "--gitops", url}, "resume grafana"},
		{strings.Replace(def, "8.0.0", "8.1.0", 1), []string{"edit", "grafana", "--gitops", url, "-f", "-"}, "edited grafana"},
		{"", []string{"remove", "grafana", "--gitops", url}, "removed grafana"},
	}
	for _, s := range steps {
		out, err := runAddon(t, s.stdin, s.args...)
		if err != nil || !strings.Contains(out, s.want) {
			t.Fatalf("%v: err=%v out=%q", s.args, err, out)
		}
	}
	w := gitserver.Clone(t, url)
	log := w.Git("log", "--format=%an|%s")
	for _, want := range []string{"Ada|Install add-on grafana", "Suspend add-on grafana", "Resume add-on grafana", "Edit add-on grafana", "Remove add-on grafana"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// Without --gitops the command changes the Addon in the cluster, and
	// says so when there is no cluster to talk to.
	if _, err := runAddon(t, "", "suspend", "grafana", "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("suspend without --gitops and without a cluster: %v", err)
	}
	if _, err := runAddon(t, "", "suspend", "missing", "--gitops", url); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("suspending a missing add-on: %v", err)
	}
}
