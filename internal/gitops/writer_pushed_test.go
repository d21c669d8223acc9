package gitops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/gitops/gitserver"
)

// TestWriterSaysWhetherItPushed: the error of a change that ended before
// it sent a push (interrupted, or refused by the file the branch holds)
// matches ErrNotPushed, and still says what its cause says; a push the
// server failed does not, since a push may land though its answer is lost.
func TestWriterSaysWhetherItPushed(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	gitserver.Clone(t, url).Write("addons/grafana.yaml", string(def("grafana", ""))).
		Write("addons/loki.yaml", string(def("loki", ""))).CommitAndPush("start")

	if _, err := (&Writer{URL: url}).Remove(ctx, "tempo"); !errors.Is(err, ErrNotPushed) || err.Error() != "addons/tempo.yaml does not exist" {
		t.Errorf("removing a definition the branch does not hold: %v; want its own message, matching ErrNotPushed", err)
	}
	interrupted, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (&Writer{URL: url}).Remove(interrupted, "grafana"); !errors.Is(err, ErrNotPushed) || !errors.Is(err, context.Canceled) {
		t.Errorf("a removal interrupted before its push: %v; want context.Canceled, matching ErrNotPushed", err)
	}
	hold := srv.HoldAt(t, "/git-receive-pack", 1, false)
	go func() {
		<-hold.Reached
		hold.Fail()
	}()
	if _, err := (&Writer{URL: hold.URL + "/gitops.git"}).Remove(ctx, "grafana"); err == nil || errors.Is(err, ErrNotPushed) || !strings.Contains(err.Error(), "cannot push") {
		t.Errorf("a removal whose push the server failed: %v; want a push error, not matching ErrNotPushed", err)
	}
}
