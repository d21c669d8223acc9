package controller_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"helm.sh/helm/v4/pkg/provenance"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// testKey makes a PGP key for the test, and its armored public key.
func testKey(t *testing.T, name string) (*openpgp.Entity, []byte) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "test", name+"@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return e, buf.Bytes()
}

// sign serves a provenance file beside the archive at chartURL, signed by
// key, naming digest as the archive's sum (the real one, or a forged one).
func sign(t *testing.T, key *openpgp.Entity, chartURL string, archive []byte) {
	t.Helper()
	u, err := url.Parse(chartURL)
	if err != nil {
		t.Fatal(err)
	}
	filename := u.Path[strings.LastIndex(u.Path, "/")+1:]
	prov, err := (&provenance.Signatory{Entity: key}).ClearSign(archive, filename, []byte("name: signed\nversion: 1.0.0\n"))
	if err != nil {
		t.Fatal(err)
	}
	charts.mu.Lock()
	charts.files[u.Path+".prov"] = []byte(prov)
	charts.mu.Unlock()
}

func archiveAt(t *testing.T, chartURL string) []byte {
	t.Helper()
	u, _ := url.Parse(chartURL)
	charts.mu.Lock()
	defer charts.mu.Unlock()
	return charts.files[u.Path]
}

// TestChartProvenance installs charts whose spec.chart.verify names a
// keyring: an unsigned chart, one signed by a key not in the keyring, and
// one whose archive changed after it was signed are each Blocked with the
// reason, and apply nothing; a chart signed by the keyring's key installs,
// and the plan says who signed it.
func TestChartProvenance(t *testing.T) {
	ns := newNamespace(t)
	trusted, ring := testKey(t, "Platform Team")
	stranger, _ := testKey(t, "Stranger")
	if err := admin.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys"},
		Data: map[string][]byte{"keyring": ring}}); err != nil {
		t.Fatal(err)
	}
	verify := withSpec(func(s *capstanv1.AddonSpec) {
		s.Chart.Verify = &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "keys"}}}
	})
	blockedBy := func(reason string) func(*capstanv1.Addon) bool {
		return func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseBlocked && readyReason(cur) == reason
		}
	}
	cases := []struct {
		name, reason, says string
		prepare            func(url string)
	}{
		{"unsigned", "SignatureMissing", "no provenance file", func(string) {}},
		{"stranger", "SignatureInvalid", "not signed by a key of the keyring", func(url string) { sign(t, stranger, url, archiveAt(t, url)) }},
		{"tampered", "SignatureInvalid", "changed after it was signed", func(url string) { sign(t, trusted, url, []byte("another archive")) }},
	}
	for _, tc := range cases {
		url, _ := charts.publish(t, webChart("1.0.0", nil))
		tc.prepare(url)
		a := create(t, newAddon(ns, tc.name, url, verify))
		got := waitFor(t, a, 90*time.Second, tc.name+" Blocked", blockedBy(tc.reason))
		if msg := readyMessage(got); !strings.Contains(msg, tc.says) {
			t.Errorf("%s: the message %q does not say %q", tc.name, msg, tc.says)
		}
		if live(t, "v1", "ConfigMap", ns, tc.name+"-config") != nil {
			t.Errorf("%s: the chart's ConfigMap was applied", tc.name)
		}
	}

	url, _ := charts.publish(t, webChart("1.0.0", nil))
	sign(t, trusted, url, archiveAt(t, url))
	a := create(t, newAddon(ns, "signed", url, verify))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if p := got.Status.Plan; p == nil || !hasNotice(p, "spec.chart.verify") {
		t.Errorf("the plan does not say who signed the chart: %+v", p)
	}
}
