package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"helm.sh/helm/v4/pkg/provenance"
	"helm.sh/helm/v4/pkg/registry"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// fuzzLimits are small, so that the fuzzer reaches every limit.
var fuzzLimits = Limits{MaxArchiveBytes: 1 << 20, MaxUncompressedBytes: 256 << 10, MaxFiles: 64, MaxDepth: 8}.withDefaults()

// untar returns the tar stream inside a .tgz.
func untar(t testing.TB, tgz []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// watchdog crashes the process, with every goroutine's stack, when one
// input takes longer than d: the fuzzer then keeps the input as a failure,
// where a hang would only stall it.
func watchdog(d time.Duration) (stop func()) {
	timer := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("one input took over %s:\n%s", d, buf[:runtime.Stack(buf, true)]))
	})
	return func() { timer.Stop() }
}

// FuzzReadArchive feeds chart archives to the unpacker and Helm's loader.
// The input is a tar stream that the target compresses, so that mutations
// reach the tar headers, or with raw set, the .tgz bytes themselves. An
// archive is refused with an *ArchiveError or unpacked within the limits,
// with no absolute path, no ".." and no path deeper than the limit.
func FuzzReadArchive(f *testing.F) {
	sub := tgz(f, chartEntries("sub", "0.1.0")...)
	archives := [][]byte{
		chartArchive(f, "demo", "1.0.0"),
		tgz(f, append(chartEntries("demo", "1.0.0"), file("demo/charts/sub-0.1.0.tgz", string(sub)))...),
		tgz(f, append(chartEntries("demo", "1.0.0"), entry{name: "demo/templates/link", typeflag: tar.TypeSymlink, link: "../../etc/passwd"})...),
		tgz(f, file("demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 1.0.0\n"), file("other/values.yaml", "a: 1\n")),
		tgz(f, file("demo/../../x", "x"), file("/abs", "x")),
		tgz(f, file("demo/Chart.yaml", "name: [")),
		tgz(f, file("demo/charts/nested.tgz", "not gzip")),
	}
	for _, a := range archives {
		f.Add(untar(f, a), false)
		f.Add(a, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		defer watchdog(10 * time.Second)()
		archive := data
		if !raw {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(data)
			_ = zw.Close()
			archive = buf.Bytes()
		}
		b := &budget{lim: fuzzLimits}
		files, err := readArchive(archive, b)
		if err != nil {
			if ae := (*ArchiveError)(nil); !errors.As(err, &ae) {
				t.Fatalf("an error that is not an *ArchiveError: %v", err)
			}
			if files != nil {
				t.Fatalf("files with an error: %v", err)
			}
			return
		}
		if b.files > fuzzLimits.MaxFiles || b.bytes > fuzzLimits.MaxUncompressedBytes {
			t.Fatalf("unpacked %d files and %d bytes, over the limits", b.files, b.bytes)
		}
		var total int64
		for _, file := range files {
			total += int64(len(file.Data))
			name := file.Name
			if name == "" || strings.HasPrefix(name, "/") || path.IsAbs(name) || strings.Count(name, "/")+2 > fuzzLimits.MaxDepth {
				t.Fatalf("accepted the file %q", name)
			}
			for _, part := range strings.Split(name, "/") {
				if part == ".." {
					t.Fatalf("accepted the file %q", name)
				}
			}
		}
		if total > b.bytes {
			t.Fatalf("the files hold %d bytes but the budget counted %d", total, b.bytes)
		}
		if c, err := loadFiles(files); err == nil && c.Name() == "" {
			t.Fatal("loaded a chart without a name")
		}
	})
}

// FuzzParseIndex feeds index.yaml documents to the parser and resolves
// versions in what it accepts. What it keeps are valid chart versions,
// newest first, and serialised again they parse to the same entries.
func FuzzParseIndex(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nentries:\n  demo:\n  - apiVersion: v2\n    name: demo\n    version: 1.1.0\n    urls: [demo-1.1.0.tgz]\n    digest: abc\n  - name: demo\n    version: 1.0.0\n    urls: [https://cdn.example/demo-1.0.0.tgz]\n",
		"apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: not-semver\n  - null\n  - {}\n  other: []\n",
		"apiVersion: v1\nentries: {a: [{name: a, version: 2.0.0-rc.1}, {name: a, version: 1.0.0}]}\ngenerated: 2024-01-01T00:00:00Z\n",
		"apiVersion: v1\nentries:\n  demo:\n  - name: other\n    version: 1.0.0\n",
		"entries: {}\n", "apiVersion: v1\n", "[]", "apiVersion: [1]\n", "",
	} {
		f.Add([]byte(s))
	}
	base, _ := url.Parse("https://charts.example/")
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(10 * time.Second)()
		idx, err := parseIndex(context.Background(), data)
		if err != nil {
			if idx != nil {
				t.Fatalf("an index with an error: %v", err)
			}
			return
		}
		if idx.APIVersion == "" {
			t.Fatal("accepted an index without apiVersion")
		}
		kept := map[string][]string{}
		for name, cvs := range idx.Entries {
			var prev *semver.Version
			for _, cv := range cvs {
				if cv == nil || cv.Metadata == nil || indexEntryError(cv) != nil {
					t.Fatalf("kept an invalid version of %q: %+v", name, cv)
				}
				v, err := semver.NewVersion(cv.Version)
				if err != nil {
					t.Fatalf("kept the version %q of %q, which is not semver", cv.Version, name)
				}
				if prev != nil && v.GreaterThan(prev) {
					t.Fatalf("the versions of %q are not newest first: %s after %s", name, v, prev)
				}
				prev = v
				kept[name] = append(kept[name], cv.Version)
			}
			for _, want := range []string{"", ">=0.0.0-0", "*"} {
				if cv, err := resolveVersion(idx, base, name, want); err == nil && cv == nil {
					t.Fatalf("resolved %q of %q to nothing", want, name)
				}
			}
			if len(cvs) > 0 {
				if cv, err := resolveVersion(idx, base, name, cvs[0].Version); err != nil || cv.Version != cvs[0].Version {
					t.Fatalf("the listed version %q of %q does not resolve: %v", cvs[0].Version, name, err)
				}
			}
		}
		out, err := yaml.Marshal(idx)
		if err != nil {
			t.Fatalf("an accepted index does not serialise: %v", err)
		}
		again, err := parseIndex(context.Background(), out)
		if err != nil {
			t.Fatalf("the serialised index is refused: %v\n%s", err, out)
		}
		for name, versions := range kept {
			var got []string
			for _, cv := range again.Entries[name] {
				got = append(got, cv.Version)
			}
			if strings.Join(got, ",") != strings.Join(versions, ",") {
				t.Fatalf("serialise and parse changed the versions of %q: %v, then %v", name, versions, got)
			}
		}
	})
}

// fakeRegistry is an OCI registry on loopback that serves one repository,
// charts/demo: whatever manifest the fuzzer gives, under the tag 1.0.0 and
// by its digest, and a fixed set of blobs.
type fakeRegistry struct {
	*httptest.Server
	host     string
	blobs    map[string][]byte
	manifest []byte
}

func newFakeRegistry(t testing.TB, blobs map[string][]byte) *fakeRegistry {
	r := &fakeRegistry{blobs: blobs}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.StartTLS()
	t.Cleanup(r.Close)
	r.host = strings.TrimPrefix(r.URL, "https://")
	return r
}

func (r *fakeRegistry) serve(w http.ResponseWriter, req *http.Request) {
	const repo = "/v2/charts/demo/"
	rest, ok := strings.CutPrefix(req.URL.Path, repo)
	switch {
	case req.URL.Path == "/v2/":
		w.WriteHeader(http.StatusOK)
		return
	case !ok:
	case strings.HasPrefix(rest, "manifests/"):
		ref := strings.TrimPrefix(rest, "manifests/")
		if ref != "1.0.0" && ref != digestOf(r.manifest) {
			break
		}
		var mt struct {
			MediaType string `json:"mediaType"`
		}
		_ = json.Unmarshal(r.manifest, &mt)
		if mt.MediaType == "" {
			mt.MediaType = "application/vnd.oci.image.manifest.v1+json"
		}
		w.Header().Set("Content-Type", mt.MediaType)
		w.Header().Set("Docker-Content-Digest", digestOf(r.manifest))
		w.Header().Set("Content-Length", fmt.Sprint(len(r.manifest)))
		if req.Method != http.MethodHead {
			_, _ = w.Write(r.manifest)
		}
		return
	case strings.HasPrefix(rest, "blobs/"):
		data, ok := r.blobs[strings.TrimPrefix(rest, "blobs/")]
		if !ok {
			break
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Header().Set("Docker-Content-Digest", digestOf(data))
		if req.Method != http.MethodHead {
			_, _ = w.Write(data)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"not found"}]}`))
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FuzzOCIManifest serves any manifest (or image index) from a loopback
// registry and pulls the chart through it, as an Addon's spec.chart.oci
// does. The pull must end, and a chart it returns is the chart layer the
// registry holds, whatever the manifest says.
func FuzzOCIManifest(f *testing.F) {
	layer := chartArchive(f, "demo", "1.0.0")
	config := []byte(`{"apiVersion":"v2","name":"demo","version":"1.0.0"}`)
	desc := func(mediaType string, data []byte) string {
		return fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":%d}`, mediaType, digestOf(data), len(data))
	}
	good := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":` + desc(registry.ConfigMediaType, config) +
		`,"layers":[` + desc(registry.ChartLayerMediaType, layer) + `]}`
	for _, s := range []string{
		good,
		`{"schemaVersion":2,"config":` + desc(registry.ConfigMediaType, config) + `,"layers":[` + desc(registry.LegacyChartLayerMediaType, layer) + `]}`,
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":` + desc(registry.ConfigMediaType, config) +
			`,"layers":[` + desc(registry.ChartLayerMediaType, layer) + `,` + desc(registry.ChartLayerMediaType, layer) + `]}`,
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":` + desc(registry.ConfigMediaType, config) +
			`,"layers":[` + desc(registry.ProvLayerMediaType, []byte("prov")) + `]}`,
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[` + desc("application/vnd.oci.image.manifest.v1+json", []byte(good)) + `]}`,
		strings.Replace(good, fmt.Sprintf(`"size":%d`, len(layer)), `"size":-1`, 1),
		strings.Replace(good, fmt.Sprintf(`"size":%d`, len(layer)), `"size":99999999999`, 1),
		`{}`, `null`, `{"schemaVersion":2,"layers":[{}]}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	reg := newFakeRegistry(f, map[string][]byte{
		digestOf(layer):          layer,
		digestOf(config):         config,
		digestOf([]byte("prov")): []byte("prov"),
		digestOf([]byte(good)):   []byte(good),
	})
	f.Fuzz(func(t *testing.T, manifest []byte, byDigest bool) {
		defer watchdog(20 * time.Second)()
		reg.manifest = manifest
		spec := capstanv1.ChartSource{OCI: "oci://" + reg.host + "/charts/demo", Version: "1.0.0"}
		if byDigest {
			spec = capstanv1.ChartSource{OCI: "oci://" + reg.host + "/charts/demo@" + digestOf(manifest)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ch, err := newTestFetcher(t, Options{}, reg.Server).Chart(ctx, spec, nil)
		if err != nil {
			if ch != nil {
				t.Fatalf("a chart with an error: %v", err)
			}
			return
		}
		if ch.Digest != digestOf(layer) || ch.Name != "demo" || ch.Version != "1.0.0" {
			t.Fatalf("pulled %s %s with digest %s, not the registry's chart layer", ch.Name, ch.Version, ch.Digest)
		}
	})
}

// provenanceFixture signs a chart archive with a new key.
func provenanceFixture(t testing.TB) (prov, keyring, archive []byte) {
	e, err := openpgp.NewEntity("fuzz", "test", "fuzz@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var ring bytes.Buffer
	w, err := armor.Encode(&ring, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	archive = chartArchive(t, "demo", "1.0.0")
	signed, err := (&provenance.Signatory{Entity: e}).ClearSign(archive, "demo-1.0.0.tgz", []byte("name: demo\nversion: 1.0.0\n"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(signed), ring.Bytes(), archive
}

// FuzzVerifyProvenance feeds provenance files and keyrings to the check of
// a chart's signature. A keyring that cannot be read is the operator's
// error; with a readable one, a provenance file is either verified for the
// archive's digest or refused with a *SignatureError.
func FuzzVerifyProvenance(f *testing.F) {
	prov, ring, archive := provenanceFixture(f)
	digest := Digest(archive)
	f.Add(prov, ring)
	f.Add(bytes.Replace(prov, []byte("sha256:"), []byte("sha256:0"), 1), ring)
	f.Add(bytes.Replace(prov, []byte("demo-1.0.0.tgz"), []byte("demo-1.0.1.tgz"), 1), ring)
	f.Add(prov, append(append([]byte{}, ring...), ring...))
	f.Add(prov, []byte("not a keyring"))
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\n\nx\n-----BEGIN PGP SIGNATURE-----\n\n-----END PGP SIGNATURE-----\n"), ring)
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, prov, keyring []byte) {
		defer watchdog(10 * time.Second)()
		if len(prov) > maxProvenanceBytes {
			return
		}
		_, ringErr := readArmoredKeyRing(keyring)
		signer, err := VerifyProvenance(prov, keyring, "demo-1.0.0.tgz", digest)
		var se *SignatureError
		switch {
		case ringErr != nil:
			if err == nil || errors.As(err, &se) {
				t.Fatalf("an unreadable keyring gave %v", err)
			}
		case err != nil:
			if !errors.As(err, &se) {
				t.Fatalf("an error that is not a *SignatureError: %v", err)
			}
		case signer == "":
			t.Fatal("verified without naming the signer")
		}
	})
}
