package gitops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/gitops/gitserver"
)

// TestWriterSaysWhetherItPushed: a change that ended before it sent a push
// (interrupted, or refused by the file the branch holds) never runs
// OnPush, and its error says what its cause says; a push the server failed
// ran it, since a push may land though its answer is lost.
func TestWriterSaysWhetherItPushed(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	gitserver.Clone(t, url).Write("addons/grafana.yaml", string(def("grafana", ""))).
		Write("addons/loki.yaml", string(def("loki", ""))).CommitAndPush("start")
	writer := func(url string, pushes *int) *Writer {
		return &Writer{URL: url, OnPush: func() { *pushes++ }}
	}

	var pushes int
	if _, err := writer(url, &pushes).Remove(ctx, "tempo"); err == nil || err.Error() != "addons/tempo.yaml does not exist" || pushes != 0 {
		t.Errorf("removing a definition the branch does not hold: %v after %d pushes; want its own message, and no push", err, pushes)
	}
	interrupted, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := writer(url, &pushes).Remove(interrupted, "grafana"); !errors.Is(err, context.Canceled) || pushes != 0 {
		t.Errorf("a removal interrupted before its push: %v after %d pushes; want context.Canceled, and no push", err, pushes)
	}
	hold := srv.HoldAt(t, "/git-receive-pack", 1, false)
	go func() {
		<-hold.Reached
		hold.Fail()
	}()
	if _, err := writer(hold.URL+"/gitops.git", &pushes).Remove(ctx, "grafana"); err == nil || !strings.Contains(err.Error(), "cannot push") || pushes == 0 {
		t.Errorf("a removal whose push the server failed: %v after %d pushes; want a push error, after a push was sent", err, pushes)
	}
}
