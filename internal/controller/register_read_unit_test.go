package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/registration"
	"capstan.dev/capstan/internal/source"
)

// manifestReader is an add-on marked a chart that registers, whose
// spec.registration.url names a loopback test server, and the reconciler
// that reads it through a real Fetcher and fetch guard that allows loopback.
type manifestReader struct {
	t     *testing.T
	r     *AddonReconciler
	addon *capstanv1.Addon
}

func newManifestReader(t *testing.T, url string) *manifestReader {
	t.Helper()
	fetcher, err := source.NewFetcher(source.Options{Guard: netguard.Config{LoopbackOnly: true, Allow: []string{"127.0.0.0/8"}}})
	if err != nil {
		t.Fatal(err)
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki", UID: "self"}}
	addon.Spec.Registration = &capstanv1.RegistrationSource{URL: url}
	addon.Status.AppliedHash = "h1"
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := &AddonReconciler{Fetcher: fetcher, APIReader: fake.NewClientBuilder().WithScheme(scheme).Build()}
	return &manifestReader{t: t, r: r, addon: addon}
}

// register runs the register step once, as a reconcile does, and returns
// the Registered condition and how soon the reconcile asks to come back.
func (m *manifestReader) register(sync bool) (*metav1.Condition, time.Duration) {
	m.t.Helper()
	artifact := &source.Artifact{Chart: &source.Chart{Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{
		Name: "wiki", Annotations: map[string]string{capstanv1.ChartAddonAnnotation: "true"}}}}}
	s := &scope{addon: m.addon, artifact: artifact, profile: capstanv1.ProfileCluster}
	s.verdict.HandledSyncRequest = sync
	if _, err := m.r.register(context.Background(), s); err != nil {
		m.t.Fatal(err)
	}
	c := apimeta.FindStatusCondition(m.addon.Status.Conditions, capstanv1.ConditionRegistered)
	if c == nil {
		m.t.Fatal("no Registered condition")
	}
	return c, s.requeueAfter
}

// counting serves answer and counts the requests.
func counting(answer http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		answer(w, r)
	})), &hits
}

// TestRegisterFollowsARedirectOfTheAdminAddress names, in
// spec.registration.url (the cluster admin's address), a loopback server
// that redirects to another one serving a valid manifest: the redirect is
// followed, through the fetch guard, and the manifest registered.
func TestRegisterFollowsARedirectOfTheAdminAddress(t *testing.T) {
	target, hits := counting(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	})
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/signed/addon.json", http.StatusFound)
	}))
	defer redirector.Close()
	m := newManifestReader(t, redirector.URL+"/m.json")
	c, _ := m.register(false)
	if c.Reason != "Registered" || hits.Load() != 1 || m.addon.Status.Registration == nil {
		t.Errorf("condition %s: %q, %d reads of the target, registration %+v; want the redirect followed and the manifest registered",
			c.Reason, c.Message, hits.Load(), m.addon.Status.Registration)
	}
}

// TestRegisterReadHasItsOwnDeadline names a server that sends its headers
// and then nothing: the read gives up after manifestReadTimeout, not the
// fetch guard's minutes, and the condition says so.
func TestRegisterReadHasItsOwnDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"name":`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	defer srv.Close()
	m := newManifestReader(t, srv.URL+"/m.json")
	start := time.Now()
	c, again := m.register(false)
	if took := time.Since(start); took > manifestReadTimeout+5*time.Second {
		t.Errorf("the read held the reconcile for %s, want about %s", took, manifestReadTimeout)
	}
	if c.Reason != "ManifestUnreadable" || !strings.Contains(c.Message, "not served within 10s") || again != registrationRetry {
		t.Errorf("condition %s: %q, again in %s; want ManifestUnreadable naming the 10s limit, again in %s", c.Reason, c.Message, again, registrationRetry)
	}
}

// TestRegisterBacksOff reads a manifest from a server that fails: a
// definite answer (404) is remembered as ManifestMissing and not read
// again until a sync request; a server error is read again after a wait
// that doubles, not at every reconcile.
func TestRegisterBacksOff(t *testing.T) {
	t.Run("not found", func(t *testing.T) {
		srv, hits := counting(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
		defer srv.Close()
		m := newManifestReader(t, srv.URL+"/m.json")
		for range 3 {
			c, again := m.register(false)
			if c.Reason != "ManifestMissing" || !strings.Contains(c.Message, "404") || again != 0 {
				t.Fatalf("condition %s: %q, again in %s; want ManifestMissing and no requeue", c.Reason, c.Message, again)
			}
		}
		if hits.Load() != 1 || m.addon.Status.Registration != nil {
			t.Errorf("three reconciles read the missing manifest %d times, registration %+v; want once, and none", hits.Load(), m.addon.Status.Registration)
		}
		m.register(true)
		if hits.Load() != 2 {
			t.Errorf("a sync request did not read again: %d reads", hits.Load())
		}
	})
	t.Run("server error", func(t *testing.T) {
		srv, hits := counting(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
		defer srv.Close()
		m := newManifestReader(t, srv.URL+"/m.json")
		key := manifestKey(m.addon)
		for i, want := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute} {
			c, again := m.register(false)
			if c.Reason != "ManifestUnreadable" || again != want || int(hits.Load()) != i+1 {
				t.Fatalf("read %d: condition %s: %q, again in %s after %d reads; want ManifestUnreadable, again in %s", i+1, c.Reason, c.Message, again, hits.Load(), want)
			}
			// A reconcile before the wait is over reads nothing.
			if _, again := m.register(false); int(hits.Load()) != i+1 || again <= 0 || again > want {
				t.Fatalf("a reconcile within the wait read again (%d reads) or asked to come back in %s", hits.Load(), again)
			}
			// The wait passes.
			prev, _ := m.r.unreadable.Load(key)
			u := prev.(unreadableRead)
			u.next = time.Now().Add(-time.Second)
			m.r.unreadable.Store(key, u)
		}
		if _, again := m.register(true); again != registrationRetry {
			t.Errorf("a sync request starts the wait again at %s, got %s", registrationRetry, again)
		}
	})
}

// TestRegisterKeepsARegistrationOverOneRefusal reads, after a new apply,
// the manifest of an add-on that registered before from a server that
// answers 404 for a while, as an app whose routes are not up the moment it
// turns Ready: the registration stays over the first 404, and the read is
// made again after registrationRetry; a manifest served by then renews
// it, and a second 404 in a row clears it (ManifestMissing).
func TestRegisterKeepsARegistrationOverOneRefusal(t *testing.T) {
	var missing atomic.Bool
	srv, hits := counting(func(w http.ResponseWriter, r *http.Request) {
		if missing.Load() {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	})
	defer srv.Close()
	for _, comesBack := range []bool{true, false} {
		hits.Store(0)
		m := newManifestReader(t, srv.URL+"/m.json")
		held := &capstanv1.Registration{Name: "wiki", Source: srv.URL + "/m.json", AppliedHash: "h0"}
		m.addon.Status.Registration = held
		missing.Store(true)
		c, again := m.register(false)
		if c.Reason != "ManifestUnreadable" || !strings.Contains(c.Message, "404") || !strings.Contains(c.Message, "the last registration stays") ||
			again != registrationRetry || m.addon.Status.Registration != held {
			t.Fatalf("the first 404: condition %s: %q, again in %s, registration %+v; want ManifestUnreadable, the registration kept, again in %s",
				c.Reason, c.Message, again, m.addon.Status.Registration, registrationRetry)
		}
		// A reconcile within the wait reads nothing.
		if m.register(false); hits.Load() != 1 || m.addon.Status.Registration != held {
			t.Fatalf("a reconcile within the wait read again (%d reads) or dropped the registration", hits.Load())
		}
		// The wait passes.
		key := manifestKey(m.addon)
		prev, _ := m.r.unreadable.Load(key)
		u := prev.(unreadableRead)
		u.next = time.Now().Add(-time.Second)
		m.r.unreadable.Store(key, u)
		missing.Store(!comesBack)
		c, _ = m.register(false)
		reg := m.addon.Status.Registration
		switch {
		case comesBack && (c.Reason != "Registered" || reg == nil || reg.AppliedHash != "h1"):
			t.Errorf("the manifest served again: condition %s: %q, registration %+v; want it registered for the new render", c.Reason, c.Message, reg)
		case !comesBack && (c.Reason != "ManifestMissing" || reg != nil):
			t.Errorf("a second 404 in a row: condition %s: %q, registration %+v; want ManifestMissing and none", c.Reason, c.Message, reg)
		}
		if hits.Load() != 2 {
			t.Errorf("%d reads, want 2", hits.Load())
		}
	}
}

// TestRegisterReadsAgainAfterASyncRequestsFailure sends a sync request to
// an add-on registered for the render it runs, whose manifest is then
// answered 404 or 502: the registration is kept (ManifestUnreadable), and
// the manifest is really read again after the wait, as the condition
// says, though the registration belongs to the same render. A second 404
// in a row clears it; a manifest served again renews it.
func TestRegisterReadsAgainAfterASyncRequestsFailure(t *testing.T) {
	var status atomic.Int32
	srv, hits := counting(func(w http.ResponseWriter, _ *http.Request) {
		if code := int(status.Load()); code != 0 {
			http.Error(w, "no", code)
			return
		}
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	})
	defer srv.Close()
	for _, tc := range []struct {
		first, second int32
		want          string
	}{
		{http.StatusNotFound, http.StatusNotFound, "ManifestMissing"},
		{http.StatusNotFound, 0, "Registered"},
		{http.StatusBadGateway, 0, "Registered"},
	} {
		hits.Store(0)
		m := newManifestReader(t, srv.URL+"/m.json")
		held := &capstanv1.Registration{Name: "wiki", Source: srv.URL + "/m.json", AppliedHash: "h1"}
		m.addon.Status.Registration = held
		m.r.registered(&scope{addon: m.addon}, true, "Registered", "read from "+held.Source)
		status.Store(tc.first)
		c, again := m.register(true)
		if c.Reason != "ManifestUnreadable" || again != registrationRetry || m.addon.Status.Registration != held || hits.Load() != 1 {
			t.Fatalf("%d on a sync request's read: condition %s: %q, again in %s, registration %+v, %d reads; want ManifestUnreadable, the registration kept, again in %s",
				tc.first, c.Reason, c.Message, again, m.addon.Status.Registration, hits.Load(), registrationRetry)
		}
		// A reconcile within the wait reads nothing.
		if _, again := m.register(false); hits.Load() != 1 || again <= 0 || again > registrationRetry {
			t.Fatalf("a reconcile within the wait read again (%d reads) or asked to come back in %s", hits.Load(), again)
		}
		// The wait passes.
		key := manifestKey(m.addon)
		prev, _ := m.r.unreadable.Load(key)
		u := prev.(unreadableRead)
		u.next = time.Now().Add(-time.Second)
		m.r.unreadable.Store(key, u)
		status.Store(tc.second)
		c, _ = m.register(false)
		if hits.Load() != 2 || c.Reason != tc.want {
			t.Errorf("%d, then %d after the wait: %d reads, condition %s: %q; want 2 reads and %s", tc.first, tc.second, hits.Load(), c.Reason, c.Message, tc.want)
		}
		if reg := m.addon.Status.Registration; (tc.want == "ManifestMissing") != (reg == nil) {
			t.Errorf("%d, then %d: registration %+v after %s", tc.first, tc.second, reg, c.Reason)
		}
	}
}

func manifestKey(a *capstanv1.Addon) types.NamespacedName {
	return types.NamespacedName{Namespace: a.Namespace, Name: a.Name}
}

// TestUnreadableRetryDecides checks the wait before a manifest that could
// not be read is read again.
func TestUnreadableRetryDecides(t *testing.T) {
	for _, tc := range []struct {
		failures int
		resync   time.Duration
		want     time.Duration
	}{
		{0, 5 * time.Minute, 30 * time.Second},
		{1, 5 * time.Minute, time.Minute},
		{3, 5 * time.Minute, 4 * time.Minute},
		{4, 5 * time.Minute, 5 * time.Minute},
		{40, 5 * time.Minute, 5 * time.Minute},
		{5, 0, 5 * time.Minute},
		{0, 10 * time.Second, 10 * time.Second},
	} {
		if got := unreadableRetry(tc.failures, tc.resync); got != tc.want {
			t.Errorf("unreadableRetry(%d, %s) = %s, want %s", tc.failures, tc.resync, got, tc.want)
		}
	}
}

// TestRegisterNamesWhatItReads checks that a failed read names the
// manifest spec.registration.url gives, and its 64 KiB limit, and that
// the address goes into status without user information.
func TestRegisterNamesWhatItReads(t *testing.T) {
	big := strings.Repeat(" ", registration.MaxManifestBytes+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big.json" {
			_, _ = w.Write([]byte(big))
			return
		}
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	}))
	defer srv.Close()
	m := newManifestReader(t, srv.URL+"/big.json")
	c, _ := m.register(false)
	if c.Reason != "ManifestMissing" || !strings.Contains(c.Message, "the manifest that spec.registration.url names is more than 64 KiB") {
		t.Errorf("condition %s: %q; want the manifest of spec.registration.url and its 64 KiB limit", c.Reason, c.Message)
	}
	if strings.Contains(c.Message, capstanv1.ChartPrimaryAnnotation) {
		t.Errorf("the condition %q speaks of the primary, which was not read", c.Message)
	}

	withUser := strings.Replace(srv.URL, "http://", "http://admin:s3cret@", 1) + "/m.json"
	m = newManifestReader(t, withUser)
	c, _ = m.register(false)
	reg := m.addon.Status.Registration
	if c.Reason != "Registered" || reg == nil || reg.Source != srv.URL+"/m.json" || strings.Contains(c.Message, "s3cret") {
		t.Errorf("condition %s: %q, source %+v; want the address without its user information", c.Reason, c.Message, reg)
	}
	// The address recorded is the redacted one, and still stands for the
	// address read: the next reconcile does not read again.
	before := reg.ReadAt
	m.register(false)
	if m.addon.Status.Registration.ReadAt != before {
		t.Error("a registration from an address with user information is read again at every reconcile")
	}
}

// TestRegisterSaysWhenNotAnAddon sets spec.registration on an add-on that
// does not register: a chart not marked an add-on, or a git folder. The
// condition says why nothing is read, and nothing is.
func TestRegisterSaysWhenNotAnAddon(t *testing.T) {
	srv, hits := counting(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"name":"wiki"}`)) })
	defer srv.Close()
	for name, artifact := range map[string]*source.Artifact{
		"an unmarked chart": {Chart: &source.Chart{Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "grafana"}}}},
		"a git folder":      {},
	} {
		t.Run(name, func(t *testing.T) {
			m := newManifestReader(t, srv.URL+"/m.json")
			s := &scope{addon: m.addon, artifact: artifact, profile: capstanv1.ProfileCluster}
			if _, err := m.r.register(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			c := apimeta.FindStatusCondition(m.addon.Status.Conditions, capstanv1.ConditionRegistered)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NotAnAddon" || !strings.Contains(c.Message, "remove spec.registration") {
				t.Fatalf("condition %+v, want Registered=False, reason NotAnAddon, saying what to do", c)
			}
			if hits.Load() != 0 || s.requeueAfter != 0 {
				t.Errorf("%d reads, requeue in %s; want none", hits.Load(), s.requeueAfter)
			}
		})
	}
	// Without spec.registration, such an add-on has no condition at all.
	m := newManifestReader(t, "")
	m.addon.Spec.Registration = nil
	s := &scope{addon: m.addon, artifact: &source.Artifact{}, profile: capstanv1.ProfileCluster}
	if _, err := m.r.register(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(m.addon.Status.Conditions, capstanv1.ConditionRegistered); c != nil {
		t.Errorf("an add-on that asks for no registration has the condition %+v", c)
	}
}

// TestDefiniteAnswerDecides checks which failed reads of a manifest are
// answers the same address gives again: a 4xx but 408 and 429, and a body
// over a size limit, the manifest's own or the fetch guard's.
func TestDefiniteAnswerDecides(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"404", &source.FetchError{URL: "http://127.0.0.1/m", Status: http.StatusNotFound}, true},
		{"429", &source.FetchError{URL: "http://127.0.0.1/m", Status: http.StatusTooManyRequests}, false},
		{"503", &source.FetchError{URL: "http://127.0.0.1/m", Status: http.StatusServiceUnavailable}, false},
		{"over the manifest's limit", &source.FetchError{URL: "http://127.0.0.1/m", Err: &source.TooLargeError{}}, true},
		{"over the guard's cap", &source.FetchError{URL: "http://127.0.0.1/m", Err: &netguard.TooLargeError{URL: "http://127.0.0.1/m", Limit: 1024}}, true},
		{"refused by the guard", &source.FetchError{URL: "http://169.254.169.254/m", Err: &netguard.RefusedError{}}, false},
	} {
		if got := definiteAnswer(tc.err); got != tc.want {
			t.Errorf("definiteAnswer(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
