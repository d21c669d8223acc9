package gitops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/gitops/gitserver"
)

// TestWriterEditBase: an edit made from a version of the file that is no
// longer the branch's is refused, and commits nothing; one made from the
// branch's version, whole or abbreviated, is committed.
func TestWriterEditBase(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	read := w.Write("addons/grafana.yaml", string(def("grafana", ""))).CommitAndPush("grafana")
	base := strings.TrimSpace(w.Git("rev-parse", "HEAD:addons/grafana.yaml"))

	// A colleague changes the file after it was read.
	colleague := w.Write("addons/grafana.yaml", string(def("grafana", "prune: true\n"))).CommitAndPush("a colleague's change")
	writer := &Writer{URL: url, AuthorName: "Ada", AuthorEmail: "ada@example.com"}
	var conflict *ConflictError
	if _, err := writer.Edit(ctx, "grafana", def("grafana", "suspend: true\n"), base); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "nothing was overwritten") {
		t.Fatalf("an edit from the version before a colleague's commit: %v; want a conflict", err)
	}
	if head := strings.TrimSpace(w.Git("ls-remote", url, "refs/heads/main")); !strings.HasPrefix(head, colleague) {
		t.Fatalf("the refused edit moved the branch to %s (read at %s)", head, read)
	}
	if _, err := writer.Edit(ctx, "grafana", def("grafana", "suspend: true\n"), "not-a-hash"); err == nil || !strings.Contains(err.Error(), "git rev-parse HEAD:addons/grafana.yaml") {
		t.Fatalf("a base that is no hash: %v", err)
	}

	w.Pull()
	now := strings.TrimSpace(w.Git("rev-parse", "HEAD:addons/grafana.yaml"))
	if _, err := writer.Edit(ctx, "grafana", def("grafana", "prune: true\nsuspend: true\n"), strings.ToUpper(now[:7])); err != nil {
		t.Fatalf("an edit from the branch's version: %v", err)
	}
	w.Pull()
	if got := w.Git("show", "HEAD:addons/grafana.yaml"); !strings.Contains(got, "prune: true\nsuspend: true") {
		t.Fatalf("edited definition:\n%s", got)
	}
}
