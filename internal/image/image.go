// Package image builds Capstan's container image without Docker: a static
// binary per platform on an empty base, with a non-root user, the system's
// CA certificates, OCI labels and an SPDX SBOM, as an OCI image index in
// an OCI layout folder, which can also be pushed to a registry. `make
// image` runs it (hack/image).
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts.
const (
	// User is the non-root user and group the controller runs as, the
	// same as distroless's nonroot.
	User = "65532:65532"
	// Entrypoint is the binary's path in the image.
	Entrypoint = "/capstan"
	// SBOMPath is where the image carries its SBOM.
	SBOMPath = "/usr/share/doc/capstan/sbom.spdx.json"
	// SBOMArtifactType is the SBOM's media type, as an OCI artifact.
	SBOMArtifactType = "application/spdx+json"
)

// Options say what to build.
type Options struct {
	// Module is the checkout's root, where go build runs.
	Module string
	// Platforms are os/arch pairs, such as linux/amd64.
	Platforms []string
	// Version and Revision label the image (and the SBOM).
	Version, Revision string
	// Source is the project's address, for the OCI source label.
	Source string
	// CACerts is a PEM bundle of CA certificates to trust; the build
	// machine's bundle by default.
	CACerts string
	// Created is the image's creation time; zero means the Unix epoch, so
	// that a build from the same inputs gives the same image.
	Created time.Time
	// WorkDir holds the binaries built.
	WorkDir string
}

// Build builds the binary for every platform and returns the image index.
func Build(ctx context.Context, o Options) (v1.ImageIndex, error) {
	if len(o.Platforms) == 0 {
		return nil, fmt.Errorf("image: no platform to build for")
	}
	if o.Created.IsZero() {
		// NOTE: the zero time.Time is year 1, which registries show as an
		// image two thousand years old; the epoch is what reproducible
		// builds agree on (SOURCE_DATE_EPOCH=0).
		o.Created = time.Unix(0, 0).UTC()
	}
	const nameOne = "install ca-certificates, or name a bundle: hack/image -ca-certs FILE, CA_CERTS=FILE make image"
	if o.CACerts == "" {
		o.CACerts = caBundle(caBundles, func(path string) bool {
			info, err := os.Stat(path)
			return err == nil && info.Mode().IsRegular()
		})
		if o.CACerts == "" {
			return nil, fmt.Errorf("image: no CA certificates to put in the image: none of %s is on this machine (%s)", strings.Join(caBundles, ", "), nameOne)
		}
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: reading the CA certificates to put in the image: %w (%s)", err, nameOne)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("image: platform %q is not os/arch", p)
		}
		bin := filepath.Join(o.WorkDir, "capstan-"+goos+"-"+goarch)
		if err := goBuild(ctx, o, goos, goarch, bin); err != nil {
			return nil, err
		}
		img, err := platformImage(o, goos, goarch, bin, certs)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
	}
	return mutate.Annotations(idx, labels(o)).(v1.ImageIndex), nil
}

// caBundles are where Linux distributions keep the system's PEM bundle of
// CA certificates, in the order they are tried.
var caBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Arch, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/cert.pem",                  // macOS, the BSDs
}

// caBundle returns the first of paths that exists, or "" when none does.
func caBundle(paths []string, exists func(path string) bool) string {
	for _, p := range paths {
		if exists(p) {
			return p
		}
	}
	return ""
}

// goBuild builds a static binary.
func goBuild(ctx context.Context, o Options, goos, goarch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/capstan")
	cmd.Dir = o.Module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image: go build for %s/%s: %w\n%s", goos, goarch, err, msg)
	}
	return nil
}

// labels are the OCI annotations of the index and the labels of each
// image's config.
func labels(o Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "capstan",
		"org.opencontainers.image.description": "Capstan, the Kubernetes add-on engine",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// platformImage is one platform's image: the files layer and the config.
func platformImage(o Options, goos, goarch, bin string, certs []byte) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	sbom, err := SBOM(bin, o.Version)
	if err != nil {
		return nil, err
	}
	files := []file{
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{path: "home/nonroot/", mode: 0o700, dir: true, uid: 65532},
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: strings.TrimPrefix(SBOMPath, "/"), mode: 0o644, data: sbom},
		{path: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: binary},
	}
	layer, err := tarLayer(files, o.Created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = goos, goarch, v1.Time{Time: o.Created}
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.Cmd = []string{"controller"}
	cfg.Config.User = User
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "HOME=/home/nonroot"}
	cfg.Config.Labels = labels(o)
	return mutate.ConfigFile(img, cfg)
}

type file struct {
	path string
	mode int64
	data []byte
	dir  bool
	uid  int
}

// tarLayer makes one layer, with fixed times and owners, so that the same
// files give the same digest.
func tarLayer(files []file, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(strings.TrimSuffix(f.path, "/")); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var parents []string
	for d := range dirs {
		parents = append(parents, d)
	}
	sort.Strings(parents)
	for _, d := range parents {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: created}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: created, Uid: f.uid, Gid: f.uid}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !f.dir {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// CheckLayoutDir refuses dir as the folder of WriteLayout, which deletes
// it first, unless it is missing, empty, or an OCI layout (it holds an
// oci-layout file) that an earlier build wrote: a mistyped -out (".", the
// checkout, a home folder) must not be deleted.
func CheckLayoutDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("cannot write the image's OCI layout into %s, which would first be deleted: %w; give a new or empty folder", dir, err)
	case len(entries) == 0:
		return nil
	}
	if fi, err := os.Lstat(filepath.Join(dir, "oci-layout")); err == nil && fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s holds files and is no OCI layout (it has no oci-layout file), and writing the image's layout deletes the folder first: give a new or empty folder, or the layout of an earlier build", dir)
}

// WriteLayout writes the index into an OCI layout folder, with the SBOM of
// its first image attached as an OCI artifact whose subject is the index.
// The folder is replaced, once CheckLayoutDir accepts it.
func WriteLayout(dir string, idx v1.ImageIndex, sbom []byte) (layout.Path, error) {
	if err := CheckLayoutDir(dir); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	// The layout's index.json names the image index itself (one entry, as
	// a registry would serve it), and then its SBOM.
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendIndex(idx); err != nil {
		return "", err
	}
	if sbom == nil {
		return p, nil
	}
	desc, err := describe(idx)
	if err != nil {
		return "", err
	}
	art, err := SBOMArtifact(sbom, desc)
	if err != nil {
		return "", err
	}
	return p, p.AppendImage(art, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "sbom"}))
}

func describe(idx v1.ImageIndex) (v1.Descriptor, error) {
	digest, err := idx.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := idx.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Digest: digest, Size: size}, nil
}

// Push pushes the index to ref and then its SBOM, as the OCI artifact that
// refers to the index: a registry with the referrers API lists it there, and
// for one without, go-containerregistry keeps the referrers tag
// (sha256-<digest>) that the OCI distribution spec defines as the fallback.
// It returns the index's digest.
func Push(ref name.Reference, idx v1.ImageIndex, sbom []byte, opts ...remote.Option) (v1.Hash, error) {
	desc, err := describe(idx)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the image index to %s: %w", ref, err)
	}
	art, err := SBOMArtifact(sbom, desc)
	if err != nil {
		return v1.Hash{}, err
	}
	d, err := art.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(ref.Context().Digest(d.String()), art, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the SBOM of %s: %w", ref, err)
	}
	return desc.Digest, nil
}

// SBOMArtifact is the SBOM as an OCI artifact that refers to subject.
func SBOMArtifact(sbom []byte, subject v1.Descriptor) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.MediaType(SBOMArtifactType))
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(sbom, types.MediaType(SBOMArtifactType))})
	if err != nil {
		return nil, err
	}
	return mutate.Subject(img, subject).(v1.Image), nil
}

// SBOM is an SPDX 2.3 document of the binary: Capstan and every Go module
// it was built from, with versions, read from the binary's own build
// information. A module's go.sum hash (h1:, base64 of a SHA-256 over the
// module's file list, not of any one download) is no SPDX checksum, which
// must be the hex digest of the package's file: it is the package's
// comment instead.
func SBOM(bin, version string) ([]byte, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("image: reading the build information of %s: %w", bin, err)
	}
	return sbomOf(info, version)
}

// sbomOf is the SPDX document of a binary built as info says.
func sbomOf(info *debug.BuildInfo, version string) ([]byte, error) {
	type pkg struct {
		SPDXID           string `json:"SPDXID"`
		Name             string `json:"name"`
		VersionInfo      string `json:"versionInfo,omitempty"`
		DownloadLocation string `json:"downloadLocation"`
		ExternalRefs     []any  `json:"externalRefs,omitempty"`
		Comment          string `json:"comment,omitempty"`
	}
	mods := append([]*debug.Module{&info.Main}, info.Deps...)
	var pkgs []pkg
	for i, m := range mods {
		if m == nil || m.Path == "" {
			continue
		}
		v := m.Version
		if i == 0 {
			v = version
		}
		p := pkg{SPDXID: fmt.Sprintf("SPDXRef-Package-%d", i), Name: m.Path, VersionInfo: v, DownloadLocation: "NOASSERTION",
			ExternalRefs: []any{map[string]string{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
				"referenceLocator": "pkg:golang/" + m.Path + "@" + v}}}
		if m.Sum != "" {
			p.Comment = "Go module hash (go.sum): " + m.Sum
		}
		pkgs = append(pkgs, p)
	}
	doc := map[string]any{
		"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
		"name":              "capstan-" + version,
		"documentNamespace": "https://capstan.dev/spdx/capstan-" + version,
		"creationInfo":      map[string]any{"creators": []string{"Tool: capstan hack/image"}, "created": "1970-01-01T00:00:00Z"},
		"packages":          pkgs,
		"documentDescribes": []string{"SPDXRef-Package-0"},
		"comment":           "Built with " + info.GoVersion,
	}
	return json.MarshalIndent(doc, "", "  ")
}
