package hooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/hooks"
)

// TestJobDeletedWhileWaitedForFails deletes the seed Job while the runner
// waits for it, as the TTL controller deletes a Job with
// ttlSecondsAfterFinished: 0 the moment it finishes: the run fails with a
// *hooks.Error (reason Deleted), which the controller stalls on, rather
// than a plain error it would retry with backoff, running the event's
// hooks and the Job again.
func TestJobDeletedWhileWaitedForFails(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {seed: {nodeLabel: "capstan.dev/`+f.ns+`"}}}`, false)
	done := make(chan error, 1)
	go func() { done <- f.run("post-install", hs, minute) }()
	eventually(t, 30*time.Second, "the seed Job to run", func() bool { return f.job("db-seed") != nil })
	if err := admin.Delete(context.Background(), f.job("db-seed"), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run still waits for a Job that was deleted")
	}
	e := hookError(t, err)
	if e.Reason != hooks.ReasonDeleted || e.Hook != seedRef(f.ns) || !strings.Contains(e.Error(), "was deleted before Capstan read how it ended") {
		t.Errorf("the run returned %v; want the seed Job's deletion", err)
	}
	if f.job("db-seed") != nil {
		t.Error("the run started the deleted Job anew")
	}
}
