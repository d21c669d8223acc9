package controller

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestBoundInvalidFiles checks that status.invalidFiles stays small
// whatever the files hold, and keeps the counts of what it leaves out.
func TestBoundInvalidFiles(t *testing.T) {
	problems := func(path string, n int) string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = fmt.Sprintf("%s:%d: k%d: unknown field; the fields here are: %s", path, i+1, i, strings.Repeat("field, ", 35))
		}
		return strings.Join(lines, "\n")
	}
	many := make([]capstanv1.InvalidFile, 100)
	for i := range many {
		p := fmt.Sprintf("addons/f%d.yaml", i)
		many[i] = capstanv1.InvalidFile{Path: p, Line: 1, Message: problems(p, 5000)}
	}
	for _, tc := range []struct {
		name      string
		in        []capstanv1.InvalidFile
		files     int
		last      string // the end of each message
		unchanged bool
	}{
		{name: "none", in: nil, files: 0},
		{name: "short", in: []capstanv1.InvalidFile{{Path: "a.yaml", Line: 3, Message: "a.yaml:3: colour: unknown field"}}, files: 1,
			last: "a.yaml:3: colour: unknown field", unchanged: true},
		{name: "one long line", in: []capstanv1.InvalidFile{{Path: "a.yaml", Message: "a.yaml: " + strings.Repeat("x", 10000)}}, files: 1,
			last: "..."},
		{name: "many problems in many files", in: many, files: maxInvalidFilesListed, last: ": and 4990 more problems"},
		{name: "the parser's own count", in: []capstanv1.InvalidFile{{Path: "a.yaml", Line: 1, Message: problems("a.yaml", 20) + "\na.yaml: and 5000 more problems"}}, files: 1,
			last: "\na.yaml:10: k9: unknown field; the fields here are: " + strings.Repeat("field, ", 35) + "\na.yaml: and 5010 more problems"},
		{name: "the parser's count of few", in: []capstanv1.InvalidFile{{Path: "a.yaml", Line: 1, Message: problems("a.yaml", 3) + "\na.yaml: and 7 more problems"}}, files: 1,
			last: "\na.yaml:3: k2: unknown field; the fields here are: " + strings.Repeat("field, ", 35) + "\na.yaml: and 7 more problems", unchanged: true},
	} {
		got := boundInvalidFiles(tc.in)
		if len(got) != tc.files {
			t.Errorf("%s: %d files listed; want %d", tc.name, len(got), tc.files)
		}
		size := 0
		for i, f := range got {
			size += len(f.Message)
			if len(f.Message) > maxInvalidFileMessage {
				t.Errorf("%s: %s: message of %d bytes", tc.name, f.Path, len(f.Message))
			}
			if !strings.HasSuffix(f.Message, tc.last) {
				t.Errorf("%s: %s: message ends %q; want %q", tc.name, f.Path, f.Message[max(0, len(f.Message)-60):], tc.last)
			}
			if f.Path != tc.in[i].Path || f.Line != tc.in[i].Line {
				t.Errorf("%s: file %d is %s:%d; want %s:%d", tc.name, i, f.Path, f.Line, tc.in[i].Path, tc.in[i].Line)
			}
			if tc.unchanged && f != tc.in[i] {
				t.Errorf("%s: %+v changed to %+v", tc.name, tc.in[i], f)
			}
		}
		if size > 100<<10 {
			t.Errorf("%s: %d bytes of messages", tc.name, size)
		}
	}
	if got := listedInvalidFiles(maxInvalidFilesListed); got != "" {
		t.Errorf("listed %d: %q", maxInvalidFilesListed, got)
	}
	if got := listedInvalidFiles(100); !strings.Contains(got, "lists the first 20") {
		t.Errorf("listed 100: %q", got)
	}
}

// TestRefuseEmpty checks that a commit with no definition is refused only
// when it would delete Addons: pruning, without allowEmpty, and with
// Addons to delete.
func TestRefuseEmpty(t *testing.T) {
	for _, tc := range []struct {
		name       string
		claimed    int
		prune      bool
		allowEmpty bool
		managed    int
		refuse     bool
	}{
		{name: "emptied folder of a repository with Addons", claimed: 0, prune: true, managed: 3, refuse: true},
		{name: "allowEmpty", claimed: 0, prune: true, allowEmpty: true, managed: 3},
		{name: "prune false deletes nothing", claimed: 0, prune: false, managed: 3},
		{name: "a new repository, nothing managed yet", claimed: 0, prune: true, managed: 0},
		{name: "one definition left", claimed: 1, prune: true, managed: 3},
	} {
		spec := capstanv1.AddonRepositorySpec{Prune: &tc.prune, AllowEmpty: tc.allowEmpty}
		if got := refuseEmpty(tc.claimed, spec, tc.managed); got != tc.refuse {
			t.Errorf("%s: refuse %v; want %v", tc.name, got, tc.refuse)
		}
	}
}

// TestReadBackoff checks how long a repository whose reads fail waits:
// doubling from its interval up to a cap, never shorter than its interval,
// and long enough that a read which held a worker for long holds it for a
// small share of the time.
func TestReadBackoff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		failures int
		took     time.Duration
		want     time.Duration
	}{
		{name: "first failure: the interval", interval: time.Second, failures: 1, took: time.Millisecond, want: time.Second},
		{name: "second: doubled", interval: time.Second, failures: 2, took: time.Millisecond, want: 2 * time.Second},
		{name: "fifth", interval: time.Second, failures: 5, took: time.Millisecond, want: 16 * time.Second},
		{name: "capped", interval: time.Minute, failures: 30, took: time.Millisecond, want: maxReadBackoff},
		{name: "many failures do not overflow", interval: time.Second, failures: 1000, took: 0, want: maxReadBackoff},
		{name: "an interval past the cap stays", interval: time.Hour, failures: 4, took: time.Millisecond, want: time.Hour},
		{name: "a read that hung for the fetch timeout", interval: time.Second, failures: 1, took: 5 * time.Minute, want: 50 * time.Minute},
		{name: "the hold is capped too", interval: time.Second, failures: 1, took: time.Hour, want: maxSlowReadBackoff},
	} {
		if got := readBackoff(tc.interval, tc.failures, tc.took); got != tc.want {
			t.Errorf("%s: %s; want %s", tc.name, got, tc.want)
		}
	}
}

// TestRefusesTheFile: what the API server answers to one file's Addon
// that is the file's problem (invalid, malformed, forbidden by an
// admission webhook or a quota), and what is an error to retry the sync
// for.
func TestRefusesTheFile(t *testing.T) {
	gr := schema.GroupResource{Group: "capstan.dev", Resource: "addons"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "capstan.dev", Kind: "Addon"}, "x", nil), true},
		{"bad request", apierrors.NewBadRequest("no"), true},
		{"a webhook's denial", apierrors.NewForbidden(gr, "x", errors.New(`admission webhook "policy.example.com" denied the request: label team is required`)), true},
		{"an exceeded quota, wrapped", fmt.Errorf("cannot remove fields: %w", apierrors.NewForbidden(gr, "x", errors.New("exceeded quota: addons, requested: count/addons.capstan.dev=1"))), true},
		{"unavailable", apierrors.NewServiceUnavailable("down"), false},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), false},
		{"timeout", apierrors.NewTimeoutError("slow", 1), false},
	}
	for _, tc := range cases {
		if got := refusesTheFile(tc.err); got != tc.want {
			t.Errorf("%s: refusesTheFile = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSyncerRetriesAreCapped: a repository whose syncs fail in a row
// (an API server outage) is retried at most a minute apart, not at
// controller-runtime's default of up to 16 minutes.
func TestSyncerRetriesAreCapped(t *testing.T) {
	limiter := syncerOptions().RateLimiter
	if limiter == nil {
		t.Fatal("the syncer has controller-runtime's default backoff")
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "repo"}}
	var wait time.Duration
	for range 40 {
		wait = limiter.When(req)
	}
	if wait > time.Minute {
		t.Fatalf("the 40th retry of a failing sync waits %s, want at most a minute", wait)
	}
}

// TestPrunedNote checks that the Ready condition names the Addons a sync
// deleted, the first five of them, and counts the rest.
func TestPrunedNote(t *testing.T) {
	for _, tc := range []struct {
		pruned []string
		want   string
	}{
		{nil, ""},
		{[]string{"grafana (Orphan)"}, "; deleted 1 Addons whose files left git, each with its deletion policy (Delete uninstalls, Orphan leaves the software running): grafana (Orphan)"},
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, "; deleted 7 Addons whose files left git, each with its deletion policy (Delete uninstalls, Orphan leaves the software running): a, b, c, d, e and 2 more"},
	} {
		if got := prunedNote(tc.pruned, len(tc.pruned)); got != tc.want {
			t.Errorf("prunedNote(%v) = %q, want %q", tc.pruned, got, tc.want)
		}
	}
}

// TestReadFailedStallsAPassingFailureThatLasts: a read refused at its
// port (connection refused reads as passing) is not Stalled at first, as
// backoff retries it; once reads have failed for transientStallAfter, it
// is, with the reason kept and a word of what to check, so that health
// checks fail instead of waiting for ever. A read that works starts the
// count again. A failure a person must fix is Stalled at once.
func TestReadFailedStallsAPassingFailureThatLasts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	r := &AddonRepositoryReconciler{Now: func() time.Time { return clock }}
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "gitops", Namespace: "ns"}}
	stalled := func() bool {
		t.Helper()
		return meta.IsStatusConditionTrue(repo.Status.Conditions, capstanv1.ConditionStalled)
	}
	const refused = "cannot read https://127.0.0.1:1/gitops.git: dial tcp 127.0.0.1:1: connect: connection refused"
	fail := func(after time.Duration) {
		clock = t0.Add(after)
		r.readFailed(repo, ReasonUnreadable, refused, readAdvice, clock, true)
	}
	fail(0)
	fail(5 * time.Minute)
	if stalled() {
		t.Fatalf("Stalled after 5 minutes of passing failures: %+v", repo.Status.Conditions)
	}
	fail(15 * time.Minute)
	c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady)
	if !stalled() || c == nil || c.Reason != ReasonUnreadable || !strings.Contains(c.Message, "Stalled, as 3 reads in a row have failed over 15m0s, longer than the 10m0s a passing failure is waited for: check spec.url") {
		t.Fatalf("after 15 minutes of failed reads: stalled %v, Ready %+v; want Stalled, and the reason and why kept", stalled(), c)
	}

	r.readSucceeded(repo)
	repo.Status.Conditions = nil
	fail(20 * time.Minute)
	if stalled() {
		t.Fatalf("Stalled at the first failure after a read that worked: %+v", repo.Status.Conditions)
	}
	r.readFailed(repo, ReasonUnreadable, "authentication required", readAdvice, clock, false)
	if !stalled() {
		t.Fatalf("a failure a person must fix is not Stalled: %+v", repo.Status.Conditions)
	}
}

// TestReadFailedStallsOnlyAfterReadsInARow: with an interval of an hour,
// a second failed read an hour after the first has lasted past
// transientStallAfter, but two blips are no failure that lasts: the third
// in a row is Stalled. A new generation (a corrected spec.url, a suspend
// and resume) starts the count again, and a credentials step that keeps
// failing names the credentials, not spec.url.
func TestReadFailedStallsOnlyAfterReadsInARow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	r := &AddonRepositoryReconciler{Now: func() time.Time { return clock }}
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "gitops", Namespace: "ns", Generation: 1},
		Spec: capstanv1.AddonRepositorySpec{Interval: &metav1.Duration{Duration: time.Hour}}}
	stalled := func() bool {
		t.Helper()
		return meta.IsStatusConditionTrue(repo.Status.Conditions, capstanv1.ConditionStalled)
	}
	fail := func(after time.Duration, reason, advice string) {
		clock = t0.Add(after)
		r.readFailed(repo, reason, "cannot read https://127.0.0.1:1/gitops.git: 502 Bad Gateway", advice, clock, true)
	}
	fail(0, ReasonUnreadable, readAdvice)
	fail(time.Hour, ReasonUnreadable, readAdvice)
	if stalled() {
		t.Fatalf("Stalled at the second failed read, an hour apart: %+v", repo.Status.Conditions)
	}
	fail(2*time.Hour, ReasonUnreadable, readAdvice)
	if !stalled() {
		t.Fatalf("not Stalled at the third failed read in a row over 2 hours: %+v", repo.Status.Conditions)
	}

	repo.Generation = 2
	repo.Status.Conditions = nil
	fail(26*time.Hour, ReasonAuthFailed, credentialsAdvice)
	fail(26*time.Hour+5*time.Minute, ReasonAuthFailed, credentialsAdvice)
	if stalled() {
		t.Fatalf("Stalled at the second failure of a new generation: %+v", repo.Status.Conditions)
	}
	fail(26*time.Hour+15*time.Minute, ReasonAuthFailed, credentialsAdvice)
	c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady)
	if !stalled() || c == nil || c.Reason != ReasonAuthFailed || !strings.Contains(c.Message, "have failed over 15m0s") ||
		!strings.Contains(c.Message, "check the credentials step") || strings.Contains(c.Message, "spec.url") {
		t.Fatalf("a credentials step failing 15 minutes: stalled %v, Ready %+v; want Stalled, counted from the new generation, naming the credentials", stalled(), c)
	}
}

// TestAuthTransient: of the credentials step, a Secret that is not there
// or may not be read is a person's to fix; an API server that did not
// answer as it should, and a token request the network refused, pass.
func TestAuthTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	secret := func(err error) error {
		return fmt.Errorf("cannot read the credentials Secret ns/creds named by spec.secretRef: %w", err)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"not found", secret(apierrors.NewNotFound(gr, "creds")), false},
		{"forbidden", secret(apierrors.NewForbidden(gr, "creds", errors.New("no"))), false},
		{"a bad key", errors.New("key githubAppPrivateKey of the credentials Secret is not a usable GitHub App private key"), false},
		{"the API server timed out", secret(apierrors.NewServerTimeout(gr, "get", 1)), true},
		{"the API server unavailable", secret(apierrors.NewServiceUnavailable("etcd")), true},
		{"too many requests", secret(apierrors.NewTooManyRequests("slow down", 1)), true},
		{"a token request refused", fmt.Errorf("cannot get a GitHub App installation token from https://127.0.0.1:1: %w; check githubAppID", refused), true},
	}
	for _, tc := range cases {
		if got := authTransient(tc.err); got != tc.want {
			t.Errorf("%s: authTransient = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPrunedPolicy: the Ready note names what deleting each Addon did to
// its software: the uninstall mark and spec.deletionPolicy say, and so
// does the cluster profile an Addon was installed under (whose default
// is Orphan wherever it is placed now); otherwise the profile the
// Addon's controller places it in decides, which the note says.
func TestPrunedPolicy(t *testing.T) {
	addon := func(annotation string, policy capstanv1.DeletionPolicy, profile capstanv1.Profile) *capstanv1.Addon {
		a := &capstanv1.Addon{Spec: capstanv1.AddonSpec{DeletionPolicy: policy}, Status: capstanv1.AddonStatus{Profile: profile}}
		if annotation != "" {
			a.Annotations = map[string]string{capstanv1.UninstallAnnotation: annotation}
		}
		return a
	}
	for _, tc := range []struct {
		name string
		a    *capstanv1.Addon
		want string
	}{
		{"marked for uninstall", addon("true", capstanv1.DeletionOrphan, capstanv1.ProfileCluster), "Delete, marked for uninstall"},
		{"spec says Delete", addon("", capstanv1.DeletionDelete, capstanv1.ProfileCluster), "Delete"},
		{"spec says Orphan", addon("", capstanv1.DeletionOrphan, capstanv1.ProfileRestricted), "Orphan"},
		{"installed under the cluster profile", addon("", "", capstanv1.ProfileCluster), "Orphan"},
		{"the profile decides", addon("", "", capstanv1.ProfileRestricted), "its profile's default deletion policy"},
	} {
		if got := prunedPolicy(tc.a); got != tc.want {
			t.Errorf("%s: prunedPolicy = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDeletionsHeldAcrossSyncsStayBounded: the deletions of syncs whose
// status writes failed are counted in whole, and only the first five of
// them are kept by name, however many syncs add to them.
func TestDeletionsHeldAcrossSyncsStayBounded(t *testing.T) {
	var d deletions
	for i := range 100 {
		d.add([]string{fmt.Sprintf("a%d (Delete)", i), fmt.Sprintf("b%d (Orphan)", i)}, []undecided{{name: fmt.Sprintf("a%d", i), until: "addons/team/x.yaml"}})
	}
	if len(d.pruned) != maxPrunedNamed || len(d.nested) != maxPrunedNamed {
		t.Fatalf("kept %d and %d names; want %d", len(d.pruned), len(d.nested), maxPrunedNamed)
	}
	want := "; deleted 200 Addons whose files left git, each with its deletion policy (Delete uninstalls, Orphan leaves the software running): a0 (Delete), b0 (Orphan), a1 (Delete), b1 (Orphan), a2 (Delete) and 195 more"
	if got := d.note(); !strings.HasPrefix(got, want+"; of those, 100 have a file") || !strings.Contains(got, "a4 (addons/team/x.yaml), and 95 more") {
		t.Fatalf("note %q", got)
	}
}
