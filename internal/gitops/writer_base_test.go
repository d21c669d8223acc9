package gitops

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
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

// TestWriterRead: Read gives a definition as the branch holds it, .yml
// too, with the blob hash git gives it, which Edit takes as its base.
func TestWriterRead(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	head := w.Write("addons/grafana.yaml", "# the team's dashboards\n"+string(def("grafana", ""))).
		Write("addons/loki.yml", string(def("loki", ""))).CommitAndPush("grafana and loki")

	writer := &Writer{URL: url}
	for _, file := range []string{"addons/grafana.yaml", "addons/loki.yml"} {
		name := strings.TrimSuffix(strings.TrimSuffix(path.Base(file), ".yaml"), ".yml")
		got, err := writer.Read(ctx, name)
		if err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		blob := strings.TrimSpace(w.Git("rev-parse", "HEAD:"+file))
		if got.File != file || got.Blob != blob || got.Branch != "main" || !strings.HasPrefix(got.Commit, head) || string(got.Content) != w.Git("show", "HEAD:"+file) {
			t.Errorf("Read(%s) = %s, blob %s, branch %s, commit %s, content %q; want %s, blob %s at %s", name, got.File, got.Blob, got.Branch, got.Commit, got.Content, file, blob, head)
		}
	}
	got, err := writer.Read(ctx, "grafana")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Edit(ctx, "grafana", def("grafana", "suspend: true\n"), got.Blob); err != nil {
		t.Fatalf("an edit with the base Read gave: %v", err)
	}
	if _, err := writer.Read(ctx, "tempo"); err == nil || !strings.Contains(err.Error(), "addons/tempo.yaml or addons/tempo.yml does not exist") {
		t.Fatalf("reading a definition that is not there: %v", err)
	}
}

// TestWriterKeepsTheLastDefinition: with KeepLast, a removal that would
// leave the folder with no definition, which the syncer would refuse
// unless the repository allows an empty folder, is refused before any
// commit; one that leaves another definition, or one with KeepLast unset,
// is committed.
func TestWriterKeepsTheLastDefinition(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("addons/grafana.yaml", string(def("grafana", ""))).Write("addons/loki.yaml", string(def("loki", ""))).
		Write("addons/more/tempo.yaml", string(def("tempo", ""))).
		// A hidden file is no definition to the syncer, so none to the writer.
		Write("addons/.ci.yaml", "lint: true\n").
		CommitAndPush("two add-ons, one in a subfolder, and a hidden file")

	keep := &Writer{URL: url, KeepLast: true}
	if _, err := keep.Remove(ctx, "grafana"); err != nil {
		t.Fatalf("removing one of two: %v", err)
	}
	head := strings.TrimSpace(w.Git("ls-remote", url, "refs/heads/main"))
	if _, err := keep.Remove(ctx, "loki"); !errors.Is(err, ErrLastDefinition) || !strings.Contains(err.Error(), "spec.allowEmpty") {
		t.Fatalf("removing the last one: %v; want ErrLastDefinition", err)
	}
	if now := strings.TrimSpace(w.Git("ls-remote", url, "refs/heads/main")); now != head {
		t.Fatalf("the refused removal moved the branch from %s to %s", head, now)
	}
	if _, err := (&Writer{URL: url}).Remove(ctx, "loki"); err != nil {
		t.Fatalf("removing the last one without KeepLast: %v", err)
	}
}

// TestRefusesEmpty: the syncer refuses a commit that empties the folder
// only while the repository prunes and does not allow an empty folder;
// writers to such a repository keep the last definition.
func TestRefusesEmpty(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name string
		spec capstanv1.AddonRepositorySpec
		want bool
	}{
		{"the defaults", capstanv1.AddonRepositorySpec{}, true},
		{"prune set", capstanv1.AddonRepositorySpec{Prune: &yes}, true},
		{"allowEmpty", capstanv1.AddonRepositorySpec{AllowEmpty: true}, false},
		{"prune false", capstanv1.AddonRepositorySpec{Prune: &no}, false},
	} {
		if got := RefusesEmpty(tc.spec); got != tc.want {
			t.Errorf("%s: RefusesEmpty = %v, want %v", tc.name, got, tc.want)
		}
	}
}
