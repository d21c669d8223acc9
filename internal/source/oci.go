package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/registry"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote/auth"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// ociChart pulls a chart from an OCI registry with Helm's registry client, by
// tag (a version or a semver range over the tags) or by manifest digest.
//
// spec.chart.digest pins either the chart archive (the chart layer's digest)
// or the manifest; with no version and no tag or digest in the reference, it
// is the manifest digest to pull, as `helm pull oci://…@sha256:…` takes it.
func (f *Fetcher) ociChart(ctx context.Context, spec capstanv1.ChartSource, creds *Credentials, refresh bool) (*Chart, error) {
	raw, ok := strings.CutPrefix(spec.OCI, "oci://")
	if !ok {
		return nil, fmt.Errorf("spec.chart.oci %q must start with oci://", netguard.Redact(spec.OCI))
	}
	ref, err := orasregistry.ParseReference(raw)
	if err != nil {
		return nil, fmt.Errorf("spec.chart.oci %q is not an OCI reference such as oci://registry.example.com/charts/name: %v", netguard.Redact(spec.OCI), netguard.RedactError(err, spec.OCI))
	}
	repoRef := ref.Registry + "/" + ref.Repository
	var tag, manifest string
	if strings.HasPrefix(ref.Reference, "sha256:") {
		manifest = ref.Reference
	} else {
		tag = ref.Reference
	}
	version := spec.Version
	if tag != "" && version != "" && strings.ReplaceAll(version, "+", "_") != tag {
		return nil, fmt.Errorf("spec.chart.oci names tag %q but spec.chart.version is %q; set the version in one place", tag, version)
	}
	if version == "" {
		version = tag
	}
	if manifest == "" && version == "" {
		if spec.Digest == "" {
			return nil, errors.New("spec.chart.oci needs a version (a tag) or a digest")
		}
		manifest = spec.Digest
	}
	client, err := f.registryClient(ref.Registry, creds)
	if err != nil {
		return nil, err
	}

	var pullRef string
	switch {
	case manifest != "":
		pullRef = repoRef + "@" + manifest
	case IsOCITag(version):
		pullRef = repoRef + ":" + strings.ReplaceAll(version, "+", "_")
	default:
		if _, err := semver.NewConstraint(version); err != nil {
			return nil, fmt.Errorf("spec.chart.version %q is neither a tag, a version nor a semver range", version)
		}
		tags, err := runCtx(ctx, func() ([]string, error) { return client.Tags(repoRef) })
		if err != nil {
			return nil, ociError(spec.OCI, "listing its tags", err)
		}
		t, err := registry.GetTagMatchingVersionOrConstraint(tags, version)
		if err != nil {
			return nil, fmt.Errorf("%s has no tag matching %s; newest tags: %s; check spec.chart.version",
				spec.OCI, version, strings.Join(firstN(sortedVersions(tags), 5), ", "))
		}
		pullRef = repoRef + ":" + strings.ReplaceAll(t, "+", "_")
	}

	key := "oci\x00" + pullRef + "\x00" + creds.cacheKey()
	return f.fetchChart(key, spec.Digest, refresh && manifest == "", func() (*cachedChart, error) {
		f.stats.ArchiveFetches.Add(1)
		res, err := runCtx(ctx, func() (*registry.PullResult, error) {
			return client.Pull(pullRef, registry.PullOptWithChart(true))
		})
		if err != nil {
			return nil, ociError("oci://"+pullRef, "pulling the chart", err)
		}
		c, _, err := f.verify("oci://"+pullRef, res.Chart.Data, spec.Digest, res.Manifest.Digest)
		if err != nil {
			return nil, err
		}
		c.manifest = res.Manifest.Digest
		if tag := pullRef[strings.LastIndex(pullRef, ":")+1:]; manifest == "" && strings.ReplaceAll(c.version, "+", "_") != tag {
			return nil, fmt.Errorf("oci://%s holds chart version %s, not the tag's version; the registry is broken", pullRef, c.version)
		}
		return c, nil
	})
}

// registryClient builds Helm's registry client on the guarded transport, with
// the Secret's credentials for the registry host only and no credentials
// from the controller's files.
func (f *Fetcher) registryClient(host string, creds *Credentials) (*registry.Client, error) {
	c, err := registry.NewClient(
		registry.ClientOptHTTPClient(f.ociClient),
		registry.ClientOptAuthorizer(*f.registryAuth(host, creds)),
		// NOTE: a file that does not exist, so no credentials of the
		// controller's own user (Helm's or Docker's) are ever read for an Addon.
		registry.ClientOptCredentialsFile(filepath.Join(os.TempDir(), "capstan-no-registry-credentials", "config.json")),
	)
	if err != nil {
		return nil, fmt.Errorf("cannot set up the OCI registry client: %w", err)
	}
	return c, nil
}

// registryAuth authenticates to one registry host with the Secret's
// credentials, on the guarded transport.
func (f *Fetcher) registryAuth(host string, creds *Credentials) *auth.Client {
	authClient := &auth.Client{
		Client: f.ociClient,
		Cache:  auth.NewCache(),
		Credential: func(_ context.Context, hostport string) (auth.Credential, error) {
			if creds == nil || !strings.EqualFold(hostport, host) {
				return auth.EmptyCredential, nil
			}
			switch {
			case creds.hasBasic():
				return auth.Credential{Username: creds.Username, Password: creds.Password}, nil
			case creds.Token != "":
				return auth.Credential{AccessToken: creds.Token}, nil
			}
			return auth.EmptyCredential, errors.New("an OCI registry takes username and password, or a token; the Secret holds another kind of credentials")
		},
	}
	authClient.SetUserAgent("capstan")
	return authClient
}

func ociError(ref, doing string, err error) error {
	hint := "check spec.chart.oci and spec.chart.version, and that the registry is up"
	msg := err.Error()
	switch {
	case netguard.IsRefused(err):
		hint = "the fetch guard protects the cluster from requests to internal addresses"
	case statusCode(msg, "401", "403") || strings.Contains(msg, "unauthorized") || strings.Contains(msg, "denied") || strings.Contains(msg, "credential"):
		hint = "the registry refused the credentials; check the Secret named in spec.chart.secretRef"
	case strings.Contains(msg, "not found") || statusCode(msg, "404"):
		hint = "the registry has no such chart, tag or digest; check spec.chart.oci and spec.chart.version"
	}
	return &FetchError{URL: ref, Err: fmt.Errorf("%s: %w", doing, err), Hint: hint}
}

// statusRE finds a three-digit HTTP status standing alone in a message, not
// inside a port or an address: a registry on port 40165 is not a 401.
var statusRE = regexp.MustCompile(`(?:^|[^0-9.:])([1-5][0-9][0-9])(?:[^0-9]|$)`)

// statusCode reports whether msg names one of the HTTP statuses.
func statusCode(msg string, codes ...string) bool {
	for _, m := range statusRE.FindAllStringSubmatch(msg, -1) {
		if slices.Contains(codes, m[1]) {
			return true
		}
	}
	return false
}

// IsOCITag reports whether an OCI chart's spec.chart.version is a plain
// tag, pulled as it is, rather than a semver range resolved against the
// registry's tags.
func IsOCITag(v string) bool {
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v")); err == nil {
		return true
	}
	return !strings.ContainsAny(v, "^~<>=!*|, ") && !strings.ContainsAny(v, "xX")
}

// runCtx runs a call that takes no context and returns when either it or ctx
// is done. Helm's registry client uses context.Background inside; the guarded
// client's total timeout still ends the call itself.
func runCtx[T any](ctx context.Context, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := call()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
