package controller_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/provenance"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
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

// keysFor creates the Secret "<addon>-keys" in ns, holding data at key and
// labelled for that add-on, as a restricted add-on's spec.chart.verify
// needs; it returns the Secret's name.
func keysFor(t *testing.T, ns, addon, key string, data []byte) string {
	t.Helper()
	name := addon + "-keys"
	if err := admin.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{capstanv1.AddonLabel: addon}},
		Data:       map[string][]byte{key: data}}); err != nil {
		t.Fatal(err)
	}
	return name
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
	// The namespace is restricted: each add-on reads a keyring labelled for it.
	verify := func(addon string) addonOpt {
		keys := keysFor(t, ns, addon, "keyring", ring)
		return withSpec(func(s *capstanv1.AddonSpec) {
			s.Chart.Verify = &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: keys}}}
		})
	}
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
		a := create(t, newAddon(ns, tc.name, url, verify(tc.name)))
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
	a := create(t, newAddon(ns, "signed", url, verify("signed")))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if p := got.Status.Plan; p == nil || !hasNotice(p, "spec.chart.verify") {
		t.Errorf("the plan does not say who signed the chart: %+v", p)
	}
}

// cosignSign signs an OCI chart's manifest as `cosign sign --key` does: a
// simple-signing payload that names signedDigest, signed with key, pushed
// as the manifest tagged sha256-<hex>.sig beside the chart.
func cosignSign(t *testing.T, key *ecdsa.PrivateKey, ref, manifest, signedDigest string) {
	t.Helper()
	repo := strings.TrimPrefix(ref, "oci://")
	payload := fmt.Sprintf(`{"critical":{"identity":{"docker-reference":%q},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`, repo, signedDigest)
	sum := sha256.Sum256([]byte(payload))
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:       static.NewLayer([]byte(payload), "application/vnd.dev.cosign.simplesigning.v1+json"),
		Annotations: map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	tag, err := name.NewTag(repo + ":" + strings.Replace(manifest, ":", "-", 1) + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithTransport(charts.srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
}

// cosignKey makes an ECDSA P-256 key, as cosign generate-key-pair does, and
// its PEM public key.
func cosignKey(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// TestChartCosign installs OCI charts whose spec.chart.verify names cosign
// public keys: an unsigned chart, one signed by a key not in the Secret,
// and one whose signature names another manifest are each Blocked with the
// reason and apply nothing; a chart signed by the Secret's key installs,
// and the plan says which key signed it. Setting both provenance and
// cosign is refused by the API server.
func TestChartCosign(t *testing.T) {
	ns := newNamespace(t)
	trusted, pub := cosignKey(t)
	stranger, _ := cosignKey(t)
	// The namespace is restricted: each add-on reads keys labelled for it.
	fromOCI := func(addon, ref string) addonOpt {
		keys := keysFor(t, ns, addon, "cosign.pub", pub)
		return withSpec(func(s *capstanv1.AddonSpec) {
			s.Chart = &capstanv1.ChartSource{OCI: ref, Version: "1.0.0",
				Verify: &capstanv1.ChartVerification{Cosign: &capstanv1.CosignVerification{SecretRef: capstanv1.LocalObjectReference{Name: keys}}}}
		})
	}
	cases := []struct {
		name, reason, says string
		prepare            func(ref, manifest string)
	}{
		{"unsigned", "SignatureMissing", "no cosign signature", func(string, string) {}},
		{"stranger", "SignatureInvalid", "no signature is made by a key", func(ref, m string) { cosignSign(t, stranger, ref, m, m) }},
		{"other-manifest", "SignatureInvalid", "changed after it was signed",
			func(ref, m string) { cosignSign(t, trusted, ref, m, "sha256:"+strings.Repeat("ab", 32)) }},
	}
	for _, tc := range cases {
		ref, manifest := charts.publishOCI(t, webChart("1.0.0", nil))
		tc.prepare(ref, manifest)
		a := create(t, newAddon(ns, tc.name, "", fromOCI(tc.name, ref)))
		got := waitFor(t, a, 90*time.Second, tc.name+" Blocked", func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseBlocked && readyReason(cur) == tc.reason
		})
		if msg := readyMessage(got); !strings.Contains(msg, tc.says) {
			t.Errorf("%s: the message %q does not say %q", tc.name, msg, tc.says)
		}
		if live(t, "v1", "ConfigMap", ns, tc.name+"-config") != nil {
			t.Errorf("%s: the chart's ConfigMap was applied", tc.name)
		}
	}

	ref, manifest := charts.publishOCI(t, webChart("1.0.0", nil))
	cosignSign(t, trusted, ref, manifest, manifest)
	a := create(t, newAddon(ns, "signed", "", fromOCI("signed", ref)))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if p := got.Status.Plan; p == nil || !hasNotice(p, "spec.chart.verify") {
		t.Errorf("the plan does not say which key signed the chart: %+v", p)
	}

	both := newAddon(ns, "both", "", fromOCI("both", ref))
	both.Spec.Chart.Verify.Provenance = &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "both-keys"}}
	err := admin.Create(context.Background(), both)
	if err == nil || !strings.Contains(err.Error(), "takes one of provenance") {
		t.Errorf("an Addon with both provenance and cosign was not refused clearly: %v", err)
	}
}

// TestUninstallRunsNoHooksOfAnUnsignedChart installs a signed chart in the
// cluster profile, then points the Addon at an unsigned version whose
// pre-delete Job and post-delete ConfigMap a stranger wrote, and deletes
// the Addon while it is Blocked by SignatureMissing: the uninstall deletes
// the inventory, runs neither hook (they would run as the add-ons'
// account), and a DeleteHooksRefused event says the signature failed.
func TestUninstallRunsNoHooksOfAnUnsignedChart(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	trusted, ring := testKey(t, "Platform Team")
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "keys-" + ns},
		Data: map[string][]byte{"keyring": ring}}); err != nil {
		t.Fatal(err)
	}
	signed, _ := charts.publish(t, webChart("1.4.0", nil))
	sign(t, trusted, signed, archiveAt(t, signed))
	unsigned, _ := charts.publish(t, webChart("1.5.0", map[string]string{
		"templates/hooks.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: before-delete\n  annotations:\n    helm.sh/hook: pre-delete\n" +
			"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: registry.example/tools:1.0\n" +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after-delete\n  annotations:\n    helm.sh/hook: post-delete\ndata: {hook: post}\n",
	}))
	name := "unsigned-" + ns[len(ns)-5:]
	a := create(t, newAddon(controllerNS, name, signed, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.DeletionPolicy = capstanv1.DeletionDelete
		s.Chart.Verify = &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "keys-" + ns}}}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = unsigned })
	waitFor(t, a, 90*time.Second, "Blocked by SignatureMissing", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseBlocked && readyReason(cur) == "SignatureMissing" && cur.Status.ObservedGeneration == cur.Generation
	})

	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	hookRan := false
	eventually(t, 90*time.Second, "the Addon to go", func() bool {
		if job(t, ns, "before-delete") != nil || live(t, "v1", "ConfigMap", ns, "after-delete") != nil {
			hookRan = true
			return true
		}
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	if hookRan || job(t, ns, "before-delete") != nil || live(t, "v1", "ConfigMap", ns, "after-delete") != nil {
		t.Fatal("the uninstall ran a delete hook of the chart whose signature failed")
	}
	if live(t, "v1", "ConfigMap", ns, name+"-config") != nil {
		t.Error("the uninstall stopped: the signed install's ConfigMap is still there")
	}
	eventually(t, 30*time.Second, "a DeleteHooksRefused event that names the signature", func() bool {
		return strings.Contains(addonEvent(t, a, "DeleteHooksRefused"), "SignatureMissing")
	})
}

// TestPlanOfAnUnsignedChart computes on demand, as `capstan plan` and the
// API do, the plan of an Addon whose chart has no provenance file: it is
// an error that names the signature check and what to fix, never a plan
// rendered from the chart.
func TestPlanOfAnUnsignedChart(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	_, ring := testKey(t, "Platform Team")
	keys := keysFor(t, ns, "unsigned", "keyring", ring)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := newAddon(ns, "unsigned", url, withSpec(func(s *capstanv1.AddonSpec) {
		s.Chart.Verify = &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: keys}}}
	}))
	a.Annotations = map[string]string{capstanv1.PausedAnnotation: "true"}
	create(t, a)

	fetcher, err := addons.NewFetcher(cluster.Config, addons.FetcherOptions{Guard: netguard.Config{Allow: []string{charts.addr}, LoopbackOnly: true}, CABundle: charts.caPEM})
	if err != nil {
		t.Fatal(err)
	}
	planner := addons.Planner{Client: admin, RestConfig: cluster.Config, Fetcher: fetcher, Config: controller.Config{Namespace: controllerNS}}
	_, p, err := planner.Plan(ctx, client.ObjectKeyFromObject(a))
	if err == nil {
		t.Fatalf("the plan of an unsigned chart was made: %d objects", len(p.Objects))
	}
	if sig := (*source.SignatureError)(nil); !errors.As(err, &sig) || !sig.Missing {
		t.Errorf("the plan's error is not a missing signature: %v", err)
	}
	for _, says := range []string{"SignatureMissing", "no provenance file", "helm package --sign"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the plan's error %q does not say %q", err, says)
		}
	}
}

// TestRestrictedVerifyKeysMustBeLabelled: a restricted add-on's
// spec.chart.verify names a keyring Secret of its namespace that is not
// labelled for it. The controller uses nothing of it (the chart, which
// that keyring's key signed, is not verified with it and nothing is
// applied; a Secret without the key is not told apart), and the message
// names the label to add. Once the Secret is labelled, the add-on reads it
// at once, not at the resync, and installs.
func TestRestrictedVerifyKeysMustBeLabelled(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	trusted, ring := testKey(t, "Platform Team")
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-keys"}, Data: map[string][]byte{"keyring": ring}}
	keyless := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-other"}, Data: map[string][]byte{"token": []byte("the real one")}}
	for _, s := range []*corev1.Secret{theirs, keyless} {
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	verifyWith := func(secret string) addonOpt {
		return withSpec(func(s *capstanv1.AddonSpec) {
			s.Chart.Verify = &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: secret}}}
		})
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	sign(t, trusted, url, archiveAt(t, url))
	a := create(t, newAddon(ns, "keyring", url, verifyWith(theirs.Name)))
	b := create(t, newAddon(ns, "keyless", url, verifyWith(keyless.Name)))
	for _, tc := range []struct {
		addon  *capstanv1.Addon
		secret string
	}{{a, theirs.Name}, {b, keyless.Name}} {
		says := "the Secret " + ns + "/" + tc.secret + " that spec.chart.verify.provenance names is not labelled " + capstanv1.AddonLabel + "=" + tc.addon.Name
		got := waitFor(t, tc.addon, 90*time.Second, "a stop that names the label", func(cur *capstanv1.Addon) bool {
			return strings.Contains(readyMessage(cur), says)
		})
		if msg := readyMessage(got); strings.Contains(msg, "has no key") || strings.Contains(msg, "the real one") || strings.Contains(msg, "Platform Team") {
			t.Errorf("%s: the message tells what the unlabelled Secret holds: %s", tc.addon.Name, msg)
		}
		if got.Status.Phase == capstanv1.PhaseSynced || live(t, "v1", "ConfigMap", ns, tc.addon.Name+"-config") != nil {
			t.Errorf("%s: the chart was applied with an unlabelled keyring: %s", tc.addon.Name, describeStatus(got))
		}
	}

	theirs.Labels = map[string]string{capstanv1.AddonLabel: a.Name}
	if err := admin.Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	labelled := time.Now()
	got := waitFor(t, a, 60*time.Second, "the labelled keyring to be read", func(cur *capstanv1.Addon) bool {
		return !strings.Contains(readyMessage(cur), "is not labelled")
	})
	// The suite's resync is 20 s; the label's change is seen at once.
	if took := time.Since(labelled); took > 12*time.Second {
		t.Errorf("the add-on read its labelled keyring %s after the label was set, as the resync would: %s", took.Round(time.Second), describeStatus(got))
	}
	got = waitPhase(t, a, capstanv1.PhaseSynced)
	if p := got.Status.Plan; p == nil || !hasNotice(p, "spec.chart.verify") {
		t.Errorf("the plan does not say who signed the chart: %+v", p)
	}
}
