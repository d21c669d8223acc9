package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImageLayout builds the image for amd64 and arm64 into an OCI layout
// and reads it back as a registry would: an index of both platforms, each
// image with the static binary as its entrypoint, the non-root user, the
// OCI labels and an SBOM, which is also attached to the index.
func TestImageLayout(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Dir(strings.TrimSpace(string(out)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	o := Options{Module: module, Platforms: []string{"linux/amd64", "linux/arm64"}, Version: "v0.0.0-test", Revision: "abc123",
		Source: "https://github.com/capstan-dev/capstan", WorkDir: t.TempDir()}
	idx, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	sbom, err := SBOM(filepath.Join(o.WorkDir, "capstan-linux-amd64"), o.Version)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if _, err := WriteLayout(dir, idx, sbom); err != nil {
		t.Fatal(err)
	}

	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 2 {
		t.Fatalf("the layout holds %d manifests; want the image index and its SBOM", len(top.Manifests))
	}
	built, err := root.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := built.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.Annotations["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("the index's annotations %v lack the revision", manifest.Annotations)
	}
	var archs []string
	for _, d := range manifest.Manifests {
		archs = append(archs, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := built.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if !slices.Equal(c.Entrypoint, []string{Entrypoint}) || c.User != User || cfg.Architecture != d.Platform.Architecture {
			t.Errorf("%s: entrypoint %v, user %q, architecture %s", d.Platform.Architecture, c.Entrypoint, c.User, cfg.Architecture)
		}
		if epoch := time.Unix(0, 0); !cfg.Created.Equal(epoch) || c.Labels["org.opencontainers.image.created"] != "1970-01-01T00:00:00Z" {
			t.Errorf("%s: created %s, label %q; want the Unix epoch", d.Platform.Architecture, cfg.Created.Time, c.Labels["org.opencontainers.image.created"])
		}
		for _, l := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.licenses"} {
			if c.Labels[l] == "" {
				t.Errorf("%s: the label %s is missing", d.Platform.Architecture, l)
			}
		}
		files := layerFiles(t, img)
		for _, want := range []string{"capstan", "etc/passwd", "etc/ssl/certs/ca-certificates.crt", strings.TrimPrefix(SBOMPath, "/")} {
			if _, ok := files[want]; !ok {
				t.Errorf("%s: the image has no %s", d.Platform.Architecture, want)
			}
		}
		if bin := files["capstan"]; len(bin) < 4 || string(bin[1:4]) != "ELF" {
			t.Errorf("%s: /capstan is not an ELF binary", d.Platform.Architecture)
		}
	}
	slices.Sort(archs)
	if !slices.Equal(archs, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the index holds %v", archs)
	}

	art, err := root.Image(top.Manifests[1].Digest)
	if err != nil {
		t.Fatal(err)
	}
	am, err := art.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if am.Subject == nil || am.Subject.Digest != top.Manifests[0].Digest || string(am.Config.MediaType) != SBOMArtifactType {
		t.Errorf("the SBOM artifact: subject %+v, config %s; want the index, %s", am.Subject, am.Config.MediaType, SBOMArtifactType)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct{ Name, VersionInfo string }
	}
	if err := json.Unmarshal(sbom, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, p := range doc.Packages {
		names[p.Name] = p.VersionInfo
	}
	if doc.SPDXVersion != "SPDX-2.3" || names["capstan.dev/capstan"] != "v0.0.0-test" || names["helm.sh/helm/v4"] == "" {
		t.Errorf("the SBOM: %s, capstan %q, helm %q", doc.SPDXVersion, names["capstan.dev/capstan"], names["helm.sh/helm/v4"])
	}
	_ = os.RemoveAll(dir)

	// make image-push: to a registry on loopback, with and without the
	// referrers API; either way the SBOM is found as the index's referrer.
	for _, referrersAPI := range []bool{true, false} {
		srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrersAPI), registry.Logger(log.New(io.Discard, "", 0))))
		ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/capstan:v0.0.0-test")
		if err != nil {
			t.Fatal(err)
		}
		digest, err := Push(ref, idx, sbom)
		if err != nil {
			t.Fatalf("referrers API %v: %v", referrersAPI, err)
		}
		pulled, err := remote.Index(ref)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := pulled.Digest(); d != digest {
			t.Errorf("pulled %s by tag; pushed %s", d, digest)
		}
		refs, err := remote.Referrers(ref.Context().Digest(digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		rm, err := refs.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(rm.Manifests) != 1 || rm.Manifests[0].ArtifactType != SBOMArtifactType {
			t.Errorf("referrers API %v: the index's referrers are %+v; want its SBOM", referrersAPI, rm.Manifests)
		} else if art, err := remote.Image(ref.Context().Digest(rm.Manifests[0].Digest.String())); err != nil {
			t.Error(err)
		} else if layers, _ := art.Layers(); len(layers) != 1 {
			t.Errorf("the pushed SBOM artifact has %d layers", len(layers))
		} else if rc, err := layers[0].Uncompressed(); err != nil {
			t.Error(err)
		} else if got, _ := io.ReadAll(rc); string(got) != string(sbom) {
			t.Errorf("the pushed SBOM differs from the built one (%d and %d bytes)", len(got), len(sbom))
		}
		srv.Close()
	}
}

// layerFiles reads every regular file of an image's layers.
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		readTar(t, rc, out)
		rc.Close()
	}
	return out
}

func readTar(t *testing.T, r io.Reader, out map[string][]byte) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = data
		}
	}
}

// TestSBOMChecksums makes the SBOM of a binary with a module dependency:
// SPDX takes a checksum only as a lowercase hex digest, so a Go module's
// h1: hash is no checksum, and the package's comment carries it.
func TestSBOMChecksums(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "capstan.dev/capstan"},
		Deps: []*debug.Module{{Path: "helm.sh/helm/v4", Version: "v4.3.1", Sum: "h1:Zm9vYmFyL2JheitxdXg9PT0rKysvLy8vLy8vLy8vLzA="}}}
	sbom, err := sbomOf(info, "v0.0.0-test")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Packages []struct {
			Name      string
			Comment   string
			Checksums []struct{ Algorithm, ChecksumValue string }
		}
	}
	if err := json.Unmarshal(sbom, &doc); err != nil {
		t.Fatal(err)
	}
	hex := regexp.MustCompile(`^[0-9a-f]+$`)
	hashes := 0
	for _, p := range doc.Packages {
		for _, c := range p.Checksums {
			if !hex.MatchString(c.ChecksumValue) {
				t.Errorf("%s: the %s checksum %q is not lowercase hex", p.Name, c.Algorithm, c.ChecksumValue)
			}
		}
		if p.Name == "helm.sh/helm/v4" && strings.Contains(p.Comment, info.Deps[0].Sum) {
			hashes++
		}
	}
	if hashes == 0 {
		t.Errorf("the dependency does not carry its Go module hash:\n%s", sbom)
	}
}

// TestCABundle picks the build machine's CA bundle: the first of the known
// places that exists, so a Fedora machine gives its own, not an error.
func TestCABundle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists []string
		want   string
	}{
		{"Debian", []string{"/etc/ssl/certs/ca-certificates.crt"}, "/etc/ssl/certs/ca-certificates.crt"},
		{"Fedora", []string{"/etc/pki/tls/certs/ca-bundle.crt"}, "/etc/pki/tls/certs/ca-bundle.crt"},
		{"macOS", []string{"/etc/ssl/cert.pem"}, "/etc/ssl/cert.pem"},
		{"both Debian's and a cert.pem", []string{"/etc/ssl/cert.pem", "/etc/ssl/certs/ca-certificates.crt"}, "/etc/ssl/certs/ca-certificates.crt"},
		{"Fedora's before a cert.pem", []string{"/etc/ssl/cert.pem", "/etc/pki/tls/certs/ca-bundle.crt"}, "/etc/pki/tls/certs/ca-bundle.crt"},
		{"none", nil, ""},
		{"only an unknown place", []string{"/usr/local/share/certs/ca-root-nss.crt"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := caBundle(caBundles, func(path string) bool { return slices.Contains(tc.exists, path) })
			if got != tc.want {
				t.Errorf("caBundle with %v = %q, want %q", tc.exists, got, tc.want)
			}
		})
	}
}

// TestWriteLayoutRefusesAFolderThatIsNoLayout: WriteLayout replaces its
// folder, so a folder that holds files but no oci-layout file (`-out .`,
// the checkout) or a file is refused and left as it is; a missing or
// empty folder, and the layout of an earlier build, are written.
func TestWriteLayoutRefusesAFolderThatIsNoLayout(t *testing.T) {
	idx, err := random.Index(64, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkout := t.TempDir()
	if err := os.WriteFile(filepath.Join(checkout, "go.mod"), []byte("module example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{checkout, file} {
		if _, err := WriteLayout(dir, idx, nil); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("WriteLayout(%s): %v; want it refused, naming the folder", dir, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(checkout, "go.mod")); err != nil || string(data) != "module example\n" {
		t.Errorf("the refused folder's file: %q, %v; want it kept", data, err)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "keep me\n" {
		t.Errorf("the refused file: %q, %v; want it kept", data, err)
	}

	missing := filepath.Join(t.TempDir(), "layout")
	for _, dir := range []string{missing, missing, t.TempDir()} {
		if _, err := WriteLayout(dir, idx, nil); err != nil {
			t.Errorf("WriteLayout(%s): %v; want a new, empty or earlier layout written", dir, err)
		}
		if _, err := layout.FromPath(dir); err != nil {
			t.Errorf("%s after WriteLayout: %v", dir, err)
		}
	}
}
