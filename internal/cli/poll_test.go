package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// TestPollSaysInterruptedNotTimedOut cancels the command's context, as
// Ctrl-C does, during a wait of ten minutes: the error says the wait was
// interrupted, not that ten minutes passed.
func TestPollSaysInterruptedNotTimedOut(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	cmd.SetOut(&bytes.Buffer{})
	time.AfterFunc(100*time.Millisecond, cancel)
	err := poll(cmd, 10*time.Minute, func(context.Context) (bool, string, error) { return false, "OutOfSync (AwaitingApproval)", nil })
	if err == nil || !strings.Contains(err.Error(), "interrupted") || strings.Contains(err.Error(), "gave up waiting after") {
		t.Fatalf("poll after Ctrl-C: %v; want an error that says it was interrupted", err)
	}

	cmd.SetContext(t.Context())
	err = poll(cmd, 50*time.Millisecond, func(context.Context) (bool, string, error) { return false, "x", nil })
	if err == nil || !strings.Contains(err.Error(), "gave up waiting after 50ms") || !strings.Contains(err.Error(), "the request stands") {
		t.Fatalf("poll past its bound: %v; want it to say it gave up, and that the request stands", err)
	}
}

// TestPollWaitsOutAFailedRead: a read that fails for a moment (the API
// server restarts, or answers 429) is said once and waited out, since the
// request stands and the controller goes on; a read the account may not
// make, or of an Addon that is gone, ends the wait; and a read cut short
// by Ctrl-C ends it as interrupted, not with the client's error.
func TestPollWaitsOutAFailedRead(t *testing.T) {
	gr := schema.GroupResource{Group: "capstan.dev", Resource: "addons"}
	cmd := &cobra.Command{}
	cmd.SetContext(t.Context())
	var out, errs bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errs)
	calls := 0
	err := poll(cmd, time.Minute, func(context.Context) (bool, string, error) {
		calls++
		switch calls {
		case 1:
			return false, "", readError{apierrors.NewServiceUnavailable("the API server is restarting")}
		case 2:
			return false, "", readError{apierrors.NewTooManyRequests("slow down", 1)}
		}
		return true, "Synced", nil
	})
	if err != nil || calls != 3 {
		t.Errorf("poll over two failed reads: %v after %d reads; want the third to end the wait", err, calls)
	}
	if n := strings.Count(errs.String(), "Warning: cannot read the add-on now, and the wait goes on"); n != 2 || !strings.Contains(errs.String(), "the API server is restarting") {
		t.Errorf("%d warnings, want one for each failure:\n%s", n, errs.String())
	}

	for _, final := range []error{
		apierrors.NewForbidden(gr, "blog", errors.New("no")),
		apierrors.NewUnauthorized("who are you"),
		apierrors.NewNotFound(gr, "blog"),
		errors.New("addon tenant/blog is Blocked: a guardrail"),
	} {
		calls = 0
		err := poll(cmd, time.Minute, func(context.Context) (bool, string, error) {
			calls++
			if _, ok := final.(apierrors.APIStatus); ok {
				return false, "", readError{final}
			}
			return false, "", final
		})
		if !errors.Is(err, final) || calls != 1 {
			t.Errorf("poll over %v: %v after %d reads; want the error at once", final, err, calls)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	cmd.SetContext(ctx)
	err = poll(cmd, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		cancel()
		return false, "", readError{fmt.Errorf("Get \"https://127.0.0.1:1/\": %w", ctx.Err())}
	})
	if err == nil || !strings.Contains(err.Error(), "stopped waiting when interrupted; the request stands") {
		t.Errorf("poll interrupted during a read: %v; want the interrupted message", err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	cmd.SetContext(ctx)
	err = poll(cmd, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		cancel()
		return false, "", ctx.Err()
	})
	if err == nil || !strings.Contains(err.Error(), "stopped waiting when interrupted") {
		t.Errorf("poll whose check answers the cancelled context's error: %v; want the interrupted message", err)
	}
}

// TestAddRefusesFlagsOfTheOtherSource checks that capstan addon add
// refuses a git flag beside a chart source, and a chart flag or values
// beside --git, before it reaches any cluster, rather than dropping the
// flag or making an Addon the controller can only Block.
func TestAddRefusesFlagsOfTheOtherSource(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--chart-url", "https://127.0.0.1:1/x.tgz", "--path", "foo"}, "--path does not go with a chart source"},
		{[]string{"--oci", "oci://127.0.0.1:1/c", "--revision", "v1"}, "--revision does not go with a chart source"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "--version", "1.0.0"}, "--version does not go with --git"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "--digest", "sha256:00"}, "--digest does not go with --git"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "--set", "a=b"}, "--set sets chart values, and a folder of git has no values"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "--set-string", "a=b"}, "--set-string sets chart values"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "-f", "/nonexistent/v.yaml"}, "--values sets chart values"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "--secret-input", "a=@/nonexistent"}, "--secret-input sets chart values"},
	} {
		cmd := NewRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"addon", "add", "y", "--kubeconfig", "/nonexistent"}, tc.args...))
		err := cmd.ExecuteContext(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
}

// TestRemoveOutcome: a removal whose uninstall waits for a person (a
// pre-delete hook failed for good, or an add-on that is not being removed
// still depends on it) ends the wait with the controller's message,
// instead of sitting out the whole --timeout; a transient failure, an
// uninstall under way, dependents being removed too, and a status of the
// generation before the deletion are waited out.
func TestRemoveOutcome(t *testing.T) {
	key := client.ObjectKey{Namespace: "tenant", Name: "db"}
	deleting := func(phase capstanv1.Phase, reason, message string, stalled bool, observed int64) *capstanv1.Addon {
		now := metav1.Now()
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 3, DeletionTimestamp: &now}}
		a.Status.Phase, a.Status.ObservedGeneration = phase, observed
		st := metav1.ConditionFalse
		if stalled {
			st = metav1.ConditionTrue
		}
		a.Status.Conditions = []metav1.Condition{
			{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message},
			{Type: capstanv1.ConditionStalled, Status: st, Reason: reason, Message: message},
		}
		return a
	}
	hookFailed := "the pre-delete hook failed, so the uninstall stopped and everything still runs; fix the hook."
	dependents := "the uninstall waits until no add-on depends on this one: remove tenant/web first, or with it"
	leaving := "the uninstall waits until the add-ons that depend on this one, being removed too, are gone: tenant/web"
	notDeleting := deleting(capstanv1.PhaseFailed, "DeleteFailed", hookFailed, true, 3)
	notDeleting.DeletionTimestamp = nil
	for _, tc := range []struct {
		name string
		a    *capstanv1.Addon
		want string
	}{
		{"a pre-delete hook that failed for good", deleting(capstanv1.PhaseFailed, "DeleteFailed", hookFailed, true, 3), "its uninstall failed, and waits for a person: " + hookFailed[:len(hookFailed)-1] + ". The removal stands"},
		{"dependents to remove first", deleting(capstanv1.PhaseDeleting, controller.ReasonWaitingForDependents, dependents, true, 3), "waits for a person: " + dependents},
		{"dependents being removed too", deleting(capstanv1.PhaseDeleting, controller.ReasonWaitingForDependents, leaving, false, 3), ""},
		{"a transient failure, retried", deleting(capstanv1.PhaseFailed, "DeleteFailed", "the API server did not answer", false, 3), ""},
		{"an uninstall under way", deleting(capstanv1.PhaseDeleting, "Uninstalling", "Running pre-delete hooks and deleting the inventory.", false, 3), ""},
		{"a failure of the generation before the deletion", deleting(capstanv1.PhaseFailed, "RenderFailed", "a template failed", true, 2), ""},
		{"an Addon not being deleted", notDeleting, ""},
	} {
		err := removeOutcome(tc.a, key)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want the wait to go on", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}
