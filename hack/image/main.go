// Command image builds Capstan's multi-arch container image into an OCI
// layout folder, and pushes it when asked: `make image`, `IMAGE=... make
// image-push`. It needs no Docker; see internal/image.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"capstan.dev/capstan/internal/image"
)

func main() {
	out := flag.String("out", "bin/image", "The OCI layout folder to write.")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "The platforms to build, comma-separated.")
	version := flag.String("version", "", "The version label; default: git describe.")
	push := flag.String("push", "", "A reference to push the image to, such as ghcr.io/org/capstan:v0.1.0.")
	caCerts := flag.String("ca-certs", "", "The PEM bundle of CA certificates to put in the image; default: the build machine's bundle.")
	flag.Parse()
	if err := run(*out, strings.Split(*platforms, ","), *version, *push, *caCerts); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out string, platforms []string, version, push, caCerts string) error {
	ctx := context.Background()
	// Before the build, which takes minutes: the layout is written last.
	if err := image.CheckLayoutDir(out); err != nil {
		return err
	}
	revision := git("rev-parse", "HEAD")
	if version == "" {
		version = git("describe", "--tags", "--always", "--dirty")
	}
	work, err := os.MkdirTemp("", "capstan-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	began := time.Now()
	idx, err := image.Build(ctx, image.Options{Module: ".", Platforms: platforms, Version: version, Revision: revision,
		Source: "https://github.com/capstan-dev/capstan", CACerts: caCerts, WorkDir: work})
	if err != nil {
		return err
	}
	sbom, err := image.SBOM(work+"/capstan-"+strings.ReplaceAll(platforms[0], "/", "-"), version)
	if err != nil {
		return err
	}
	if _, err := image.WriteLayout(out, idx, sbom); err != nil {
		return err
	}
	digest, _ := idx.Digest()
	fmt.Printf("image: %s (%s) for %s in %s, in %s\n", digest, version, strings.Join(platforms, ", "), out, time.Since(began).Round(time.Second))
	if push == "" {
		return nil
	}
	ref, err := name.ParseReference(push)
	if err != nil {
		return fmt.Errorf("IMAGE=%q is not an image reference: %w", push, err)
	}
	if _, err := image.Push(ref, idx, sbom, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	fmt.Printf("image: pushed %s@%s, with its SBOM as a referrer\n", ref.Context(), digest)
	return nil
}

func git(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
