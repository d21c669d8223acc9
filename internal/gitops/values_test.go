package gitops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/gitops/gitserver"
)

// TestValueChanges lists the changes between two sets of values, path by
// path.
func TestValueChanges(t *testing.T) {
	from := map[string]any{"replicas": float64(2), "keep": "x", "gone": true, "nested": map[string]any{"a": "1", "b": "2"}}
	to := map[string]any{"replicas": int64(2), "keep": "y", "added": []any{"z"}, "nested": map[string]any{"a": "1", "b": "3"}}
	var got []string
	for _, c := range ValueChanges(from, to) {
		switch {
		case c.Remove:
			got = append(got, "-"+c.String())
		case c.Had:
			got = append(got, "~"+c.String())
		default:
			got = append(got, "+"+c.String())
		}
	}
	want := "+values.added -values.gone ~values.keep ~values.nested.b"
	if strings.Join(got, " ") != want {
		t.Errorf("changes %v; want %s (sorted by path, 2 and 2.0 the same)", got, want)
	}
}

// TestChangeValuesKeepsWhatGitHas changes the values of a definition whose
// replicas were pushed to git after the change was read: the commit
// changes only the paths the change made, so the pushed replicas stay, as
// do the comments and the order of the keys; a change of replicas itself,
// made from the old value, is refused and commits nothing.
func TestChangeValuesKeepsWhatGitHas(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("addons/grafana.yaml", string(def("grafana", "values:\n  # how many\n  replicas: 2 # pods\n  zeta: 1\n  alpha:\n    b: x\n  old: drop\n"))).CommitAndPush("start")
	seen := map[string]any{"replicas": float64(2), "zeta": float64(1), "alpha": map[string]any{"b": "x"}, "old": "drop"}
	w.Write("addons/grafana.yaml", string(def("grafana", "values:\n  # how many\n  replicas: 3 # pods\n  zeta: 1\n  alpha:\n    b: x\n  old: drop\n"))).CommitAndPush("a colleague's replicas")

	writer := &Writer{URL: url, AuthorName: "Ada"}
	next := map[string]any{"replicas": float64(2), "zeta": float64(1), "alpha": map[string]any{"b": "why", "c": "new"}}
	if _, err := writer.ChangeValues(ctx, "grafana", ValueChanges(seen, next)); err != nil {
		t.Fatal(err)
	}
	w.Pull()
	got := w.Git("show", "HEAD:addons/grafana.yaml")
	want := "values:\n  # how many\n  replicas: 3 # pods\n  zeta: 1\n  alpha:\n    b: why\n    c: new\n"
	if !strings.HasSuffix(got, want) || !strings.Contains(got, "# grafana keeps this comment") {
		t.Fatalf("the definition after the change:\n%s\nwant it to end with:\n%s", got, want)
	}

	stale := map[string]any{"replicas": float64(4), "zeta": float64(1), "alpha": map[string]any{"b": "why", "c": "new"}}
	seen = map[string]any{"replicas": float64(2), "zeta": float64(1), "alpha": map[string]any{"b": "why", "c": "new"}}
	_, err := writer.ChangeValues(ctx, "grafana", ValueChanges(seen, stale))
	var conflict *ValuesConflictError
	if !errors.As(err, &conflict) || conflict.Path != "values.replicas" || conflict.File != "addons/grafana.yaml" {
		t.Fatalf("a change of replicas made from 2, which git has as 3: %v; want a conflict on values.replicas", err)
	}
	w.Pull()
	if after := w.Git("show", "HEAD:addons/grafana.yaml"); after != got {
		t.Errorf("a refused change committed:\n%s", after)
	}
}
