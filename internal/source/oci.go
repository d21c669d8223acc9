package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// Bounds of one OCI chart fetch. A registry is untrusted input: one
// tenant's chart link must not take the shared controller's memory or hold
// its workers.
const (
	// maxOCIManifestBytes bounds a chart's manifest. Helm writes one of
	// about 1 KiB; annotations rarely add more than a few.
	maxOCIManifestBytes = 1 << 20
	// MaxOCITags bounds the tags read to resolve a version range.
	MaxOCITags = 10000
	// maxOCITagPages bounds the pages of the tag list: a registry that
	// always answers with a next page would otherwise be read for good.
	maxOCITagPages = 100
	// maxOCITagLength is the longest tag the distribution spec allows.
	maxOCITagLength = 128
)

// OCILink is the chart source of an oci:// link as `helm install` takes
// one, with its tag or digest, in the form an Addon's spec holds it: a tag
// moves to Version (Helm's _ read back as the + of a semver build), a
// manifest digest to Digest, and OCI keeps the repository alone. It reads
// the link as ociChart reads spec.chart.oci, so the source it answers
// fetches the same chart, and is one the Addon's own validation takes: a
// link with neither a tag nor a digest is refused, saying how to name the
// version. Given both, as tag@digest, the digest chooses, as ociChart
// pulls it.
func OCILink(link string) (capstanv1.ChartSource, error) {
	raw, ok := strings.CutPrefix(link, "oci://")
	if !ok {
		return capstanv1.ChartSource{}, fmt.Errorf("%q is not an oci:// link", netguard.Redact(link))
	}
	ref, err := orasregistry.ParseReference(raw)
	if err != nil {
		return capstanv1.ChartSource{}, fmt.Errorf("%q is not an OCI reference such as oci://registry.example.com/charts/name:1.2.3: %v", netguard.Redact(link), netguard.RedactError(err, link))
	}
	out := capstanv1.ChartSource{OCI: "oci://" + ref.Registry + "/" + ref.Repository}
	switch {
	case ref.Reference == "":
		return capstanv1.ChartSource{}, fmt.Errorf("%s names no chart version: add it as a tag, such as %s:1.2.3, or pin a manifest, as %s@sha256:…",
			netguard.Redact(link), netguard.Redact(out.OCI), netguard.Redact(out.OCI))
	case ref.ValidateReferenceAsDigest() == nil:
		if !strings.HasPrefix(ref.Reference, "sha256:") {
			return capstanv1.ChartSource{}, fmt.Errorf("%s pins a manifest by a digest other than sha256, which Capstan does not take: pin its sha256 digest", netguard.Redact(link))
		}
		out.Digest = ref.Reference
	default:
		out.Version = strings.ReplaceAll(ref.Reference, "_", "+")
	}
	return out, nil
}

// ociChart pulls a chart from an OCI registry, by tag (a version, a tag, a
// semver range over the tags, or 1.2, 1 or v1.2.3: the tag if there is
// one, the range it reads as otherwise) or by manifest digest.
//
// spec.chart.digest pins either the chart archive (the chart layer's digest)
// or the manifest; with no version and no tag or digest in the reference, it
// is the manifest digest to pull, as `helm pull oci://…@sha256:…` takes it.
//
// The pull reads the manifest and the one chart layer it names, nothing
// else, so it costs about MaxArchiveBytes at most; every request runs under
// ctx, which has the guard's --fetch-timeout as its deadline when the
// caller set none.
func (f *Fetcher) ociChart(ctx context.Context, spec capstanv1.ChartSource, creds *Credentials, refresh bool) (*Chart, error) {
	raw, ok := strings.CutPrefix(spec.OCI, "oci://")
	if !ok {
		return nil, specError("spec.chart.oci %q must start with oci://", netguard.Redact(spec.OCI))
	}
	ref, err := orasregistry.ParseReference(raw)
	if err != nil {
		return nil, specError("spec.chart.oci %q is not an OCI reference such as oci://registry.example.com/charts/name: %v", netguard.Redact(spec.OCI), netguard.RedactError(err, spec.OCI))
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
		return nil, specError("spec.chart.oci names tag %q but spec.chart.version is %q; set the version in one place", tag, version)
	}
	if version == "" {
		version = tag
	}
	if manifest == "" && version == "" {
		if spec.Digest == "" {
			return nil, specError("spec.chart.oci needs a version (a tag) or a digest")
		}
		manifest = spec.Digest
	}
	if _, ok := ctx.Deadline(); !ok {
		// NOTE: the reconcile has no deadline of its own; without one, a
		// registry that answers slowly, page after page, would hold a
		// worker for good.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.guard.Config().Timeout)
		defer cancel()
	}
	repo, err := f.ociRepository(repoRef, ref.Registry, creds)
	if err != nil {
		return nil, err
	}

	pull := func(reference string) (*Chart, error) {
		pullRef := repoRef + ":" + reference
		if manifest != "" {
			pullRef = repoRef + "@" + manifest
		}
		key := "oci\x00" + pullRef + "\x00" + creds.cacheKey()
		return f.fetchChart(ctx, key, spec.Digest, refresh && manifest == "", func(ctx context.Context) (*cachedChart, error) {
			f.stats.ArchiveFetches.Add(1)
			data, manifestDigest, err := f.pullOCIChart(ctx, repo, "oci://"+pullRef, reference, creds != nil)
			if err != nil {
				return nil, err
			}
			c, _, err := f.verify("oci://"+pullRef, data, spec.Digest, manifestDigest)
			if err != nil {
				return nil, err
			}
			c.manifest = manifestDigest
			if manifest == "" && !tagNamesChart(reference, c.version) {
				return nil, fmt.Errorf("oci://%s holds chart version %s, not the version its tag names; the registry is broken", pullRef, c.version)
			}
			return c, nil
		})
	}
	switch {
	case manifest != "":
		c, err := pull(manifest)
		if err == nil && spec.Version != "" && !chartHasVersion(c.Version, spec.Version) {
			// NOTE: the manifest digest in spec.chart.oci names one chart;
			// a version it does not hold would otherwise be taken as done
			// and the old chart rendered again, as if upgraded.
			return nil, fmt.Errorf("%s pins a manifest that holds chart version %s, but spec.chart.version is %s: the digest chooses the chart, not the version; "+
				"to move to %s, pin its digest instead (in spec.chart.oci, or in spec.chart.digest with the digest taken out of spec.chart.oci)",
				netguard.Redact(spec.OCI), c.Version, spec.Version, spec.Version)
		}
		return c, err
	case IsOCITag(version):
		c, err := pull(strings.ReplaceAll(version, "+", "_"))
		if !errors.As(err, new(noSuchManifest)) || !isVersionPrefix(version) {
			return c, err
		}
		// NOTE: 1.2, 1 or v1.2.3 is a tag when the registry has it, as Helm
		// pulls it; when it has not, 1.2 and 1 are the semver ranges they
		// read as (1.2.x, 1.x.x), resolved over the tags as a chart
		// repository's version is, rather than failing.
		if whole := strings.TrimPrefix(version, "v"); whole != version {
			if _, err := semver.StrictNewVersion(whole); err == nil {
				// NOTE: v1.2.3 is the one version 1.2.3, and helm push
				// tags it so. As a range it would also hold
				// 1.2.3+other, another chart, whichever the tag sort
				// put first.
				return pull(strings.ReplaceAll(whole, "+", "_"))
			}
		}
		t, err := ociTagInRange(ctx, repo, spec.OCI, version, creds != nil)
		if err != nil {
			return nil, err
		}
		return pull(t)
	}
	if _, err := semver.NewConstraint(version); err != nil {
		return nil, specError("spec.chart.version %q is neither a tag, a version nor a semver range", version)
	}
	t, err := ociTagInRange(ctx, repo, spec.OCI, version, creds != nil)
	if err != nil {
		return nil, err
	}
	return pull(t)
}

// chartHasVersion reports whether a chart's version (from Chart.yaml) is
// the version asked for. A whole version (1.2.3, v1.2.3, 1.2.3-rc.1,
// 1.2.3_build.7 with "_" read as "+", as a tag writes it) must be the
// chart's version exactly, build metadata included; only a leading "v"
// may differ. A version prefix or range (1.2, 1, ^1.0.0) holds every
// version in it. A plain tag that reads as neither (latest) is not
// compared.
func chartHasVersion(chart, want string) bool {
	chart = strings.ReplaceAll(chart, "_", "+")
	want = strings.ReplaceAll(want, "_", "+")
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(want, "v")); err == nil {
		// NOTE: a semver range ignores build metadata, so 1.2.3 would hold
		// 1.2.3+other: another chart, pushed under a tag or pinned with a
		// version it does not have, would be taken for the one named.
		return strings.TrimPrefix(chart, "v") == strings.TrimPrefix(want, "v")
	}
	constraint, err := semver.NewConstraint(want)
	if err != nil {
		// A tag that is neither a version nor a range (latest, stable)
		// says nothing of Chart.yaml's version: the digest decides.
		return true
	}
	v, err := semver.NewVersion(chart)
	return err == nil && constraint.Check(v)
}

// tagNamesChart reports whether a chart pulled by tag is one the tag
// names. helm push tags a chart with its version ("+" written "_"), so a
// tag that is a whole version must hold exactly that version, and a tag
// that reads as a range (1.2, 1) one in that range. Any other tag
// (latest, stable, next) is a name the publisher moves from version to
// version, and says nothing of the chart inside.
func tagNamesChart(tag, chart string) bool {
	tag = strings.ReplaceAll(tag, "_", "+")
	if _, err := semver.NewVersion(tag); err != nil {
		return true
	}
	return chartHasVersion(chart, tag)
}

// isVersionPrefix reports whether a version that reads as a tag is not a
// whole semver version: 1.2, 1, which read as ranges, or v1.2.3, which
// ociChart pulls as the tag 1.2.3 when the registry has no tag v1.2.3.
func isVersionPrefix(v string) bool {
	if _, err := semver.StrictNewVersion(v); err == nil {
		return false
	}
	_, err := semver.NewConstraint(v)
	return err == nil
}

// ociTagInRange resolves a semver range over a repository's tags as Helm
// does: an exact tag first, then the newest version in range; "+" stands
// as "_" in the tag it returns. withCreds says whether repo sends
// credentials, for what an error says to do.
func ociTagInRange(ctx context.Context, repo *remote.Repository, shown, version string, withCreds bool) (string, error) {
	tags, err := ociTags(ctx, repo)
	if err != nil {
		return "", ociError(repo.Reference.Registry, shown, "listing its tags", withCreds, err)
	}
	t, err := registry.GetTagMatchingVersionOrConstraint(tags, version)
	if err != nil {
		return "", fmt.Errorf("%s has no tag matching %s; newest tags: %s; check spec.chart.version",
			shown, version, strings.Join(firstN(sortedVersions(tags), 5), ", "))
	}
	return strings.ReplaceAll(t, "+", "_"), nil
}

// noSuchManifest is a registry's answer that it has no manifest by the
// name asked for, the tag missing.
type noSuchManifest struct{ error }

func (e noSuchManifest) Unwrap() error { return e.error }

// ociRepository is one registry repository on the guarded transport, with
// the Secret's credentials for the registry host only. No credentials of
// the controller's own user (Helm's or Docker's) are ever read.
func (f *Fetcher) ociRepository(repoRef, host string, creds *Credentials) (*remote.Repository, error) {
	repo, err := remote.NewRepository(repoRef)
	if err != nil {
		return nil, fmt.Errorf("oci://%s is not an OCI repository reference: %v", repoRef, err)
	}
	repo.Client = f.registryAuth(host, creds)
	// NOTE: an index is asked for too, so that a multi-platform image named
	// by mistake is refused with a message that says so, not a 404.
	repo.ManifestMediaTypes = []string{
		ocispec.MediaTypeImageManifest, mediaTypeDockerManifest,
		ocispec.MediaTypeImageIndex, mediaTypeDockerManifestList,
	}
	repo.TagListMaxPages = maxOCITagPages
	return repo, nil
}

const (
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// ociTags lists a repository's tags that are semver versions, newest first,
// as Helm does ("_" in a tag stands for "+"). It reads at most MaxOCITags
// tags in at most maxOCITagPages pages.
func ociTags(ctx context.Context, repo *remote.Repository) ([]string, error) {
	var (
		seen     int
		versions []*semver.Version
	)
	err := repo.Tags(ctx, "", func(tags []string) error {
		seen += len(tags)
		if seen > MaxOCITags {
			return errTooManyTags
		}
		for _, t := range tags {
			if len(t) > maxOCITagLength {
				continue
			}
			if v, err := semver.StrictNewVersion(strings.ReplaceAll(t, "_", "+")); err == nil {
				versions = append(versions, v)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errTooManyTags):
		return nil, fmt.Errorf("the repository lists more than %d tags, the most Capstan reads to resolve a version range; set spec.chart.version to one version: %w", MaxOCITags, err)
	case errors.Is(err, errdef.ErrTooManyPages):
		return nil, fmt.Errorf("the registry's tag list runs past %d pages, the most Capstan reads to resolve a version range; set spec.chart.version to one version: %w", maxOCITagPages, err)
	case err != nil:
		return nil, err
	}
	sort.Sort(sort.Reverse(semver.Collection(versions)))
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i] = v.String()
	}
	return out, nil
}

var errTooManyTags = errors.New("too many tags")

// pullOCIChart reads a chart's manifest and its one chart layer, checking
// each against its size limit and digest, and returns the chart archive and
// the manifest's digest. withCreds says whether repo sends credentials,
// for what an error says to do.
func (f *Fetcher) pullOCIChart(ctx context.Context, repo *remote.Repository, shown, reference string, withCreds bool) ([]byte, string, error) {
	desc, rc, err := repo.FetchReference(ctx, reference)
	if errors.Is(err, errdef.ErrNotFound) {
		err = noSuchManifest{err}
	}
	if err != nil {
		return nil, "", ociError(repo.Reference.Registry, shown, "pulling the chart", withCreds, err)
	}
	defer rc.Close()
	if desc.Size > maxOCIManifestBytes {
		return nil, "", &FetchError{URL: shown, Err: fmt.Errorf("its manifest is %d bytes, over the limit of %d", desc.Size, maxOCIManifestBytes), Hint: "a chart's manifest is a few KiB; check that spec.chart.oci names a chart pushed with helm push"}
	}
	raw, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, "", ociError(repo.Reference.Registry, shown, "reading the chart's manifest", withCreds, err)
	}
	layer, err := chartLayer(desc.MediaType, raw)
	if err != nil {
		return nil, "", &FetchError{URL: shown, Err: err}
	}
	if layer.Size > f.limits.MaxArchiveBytes {
		return nil, "", &FetchError{URL: shown, Err: &ArchiveError{Problem: fmt.Sprintf("is %d bytes, over the limit of %d compressed bytes", layer.Size, f.limits.MaxArchiveBytes)}}
	}
	blob, err := repo.Blobs().Fetch(ctx, layer)
	if err != nil {
		return nil, "", ociError(repo.Reference.Registry, shown, "pulling the chart's layer", withCreds, err)
	}
	defer blob.Close()
	// NOTE: ReadAll reads exactly the layer's size and checks its digest,
	// however the response is encoded.
	data, err := content.ReadAll(blob, layer)
	if err != nil {
		return nil, "", ociError(repo.Reference.Registry, shown, "reading the chart's layer", withCreds, err)
	}
	return data, desc.Digest.String(), nil
}

// chartLayer checks that a manifest is a Helm chart's, with Helm's config,
// exactly one chart layer and at most one provenance layer, and returns the
// chart layer.
func chartLayer(mediaType string, raw []byte) (ocispec.Descriptor, error) {
	var m struct {
		MediaType string               `json:"mediaType"`
		Config    ocispec.Descriptor   `json:"config"`
		Layers    []ocispec.Descriptor `json:"layers"`
		Manifests []ocispec.Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("its manifest is not JSON (%v); the registry is broken", err)
	}
	if mediaType == "" || mediaType == "application/json" {
		mediaType = m.MediaType
	}
	if mediaType == ocispec.MediaTypeImageIndex || mediaType == mediaTypeDockerManifestList || len(m.Manifests) > 0 {
		return ocispec.Descriptor{}, errors.New("it is an image index (a list of manifests, such as a multi-platform container image), not a Helm chart; point spec.chart.oci at a chart pushed with helm push")
	}
	if m.Config.MediaType != registry.ConfigMediaType {
		return ocispec.Descriptor{}, fmt.Errorf("it is not a Helm chart: its config is %q, not %s; point spec.chart.oci at a chart pushed with helm push", m.Config.MediaType, registry.ConfigMediaType)
	}
	var chart []ocispec.Descriptor
	provs := 0
	for _, l := range m.Layers {
		switch l.MediaType {
		case registry.ChartLayerMediaType, registry.LegacyChartLayerMediaType:
			chart = append(chart, l)
		case registry.ProvLayerMediaType:
			provs++
		default:
			return ocispec.Descriptor{}, fmt.Errorf("its manifest has a layer of type %q; a Helm chart holds one chart layer and at most one provenance layer", l.MediaType)
		}
	}
	switch {
	case len(chart) != 1:
		return ocispec.Descriptor{}, fmt.Errorf("its manifest has %d chart layers; a Helm chart has exactly one, of type %s", len(chart), registry.ChartLayerMediaType)
	case provs > 1:
		return ocispec.Descriptor{}, fmt.Errorf("its manifest has %d provenance layers; a Helm chart has at most one", provs)
	case chart[0].Size < 0:
		return ocispec.Descriptor{}, errors.New("its chart layer has a negative size; the registry is broken")
	}
	return chart[0], nil
}

// registryAuth authenticates to one registry, named as in a reference
// (host), with the Secret's credentials, on the guarded transport.
func (f *Fetcher) registryAuth(host string, creds *Credentials) *auth.Client {
	// NOTE: oras sends the requests for docker.io to registry-1.docker.io,
	// and asks for the credentials of the host it sends them to.
	target := orasregistry.Reference{Registry: host}.Host()
	authClient := &auth.Client{
		Client: f.ociClient,
		Cache:  auth.NewCache(),
		Credential: func(_ context.Context, hostport string) (auth.Credential, error) {
			if creds == nil || !strings.EqualFold(hostport, target) {
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

// ociError is err from the registry (as named in a reference: host or
// host:port), about ref, while doing, with a hint of what to check.
// withCreds says whether the request went with the credentials of
// spec.chart.secretRef: a registry that refuses one that went without them
// wants some, not other ones, or has no such repository (registries answer
// one that does not exist as they answer one that is private). A refusal
// is judged at the server that answered, as refusedHint judges it for
// https: a redirect to another origin (a blob on object storage or a CDN)
// went there without credentials.
func ociError(registry, ref, doing string, withCreds bool, err error) error {
	hint := "check spec.chart.oci and spec.chart.version, and that the registry is up"
	msg := err.Error()
	refused := statusCode(msg, "401", "403") || strings.Contains(msg, "unauthorized") || strings.Contains(msg, "denied") || strings.Contains(msg, "credential")
	hideSignedAddress(registry, err)
	hop := redirectedHop(registry, err)
	switch {
	case netguard.IsRefused(err):
		hint = "the fetch guard protects the cluster from requests to internal addresses"
	case hop != nil:
		hint = redirectedRefusalHint(hop.URL.Host, registry, "the chart")
	case refused && !withCreds:
		hint = "the registry refuses to serve the chart without credentials: if it needs them, name a Secret that holds them in spec.chart.secretRef; " +
			"if the chart is public, check spec.chart.oci, since registries answer so for a repository that does not exist too"
	case refused:
		hint = "the registry refused the credentials; check the Secret named in spec.chart.secretRef"
	case strings.Contains(msg, "not found") || statusCode(msg, "404"):
		hint = "the registry has no such chart, tag or digest; check spec.chart.oci and spec.chart.version"
	}
	// NOTE: oras builds some errors as plain text that quotes the last
	// hop (a blob's mismatched Content-Length or digest on a CDN), which
	// hideSignedAddress cannot reach: their addresses are cut as text.
	host := orasregistry.Reference{Registry: registry}.Host()
	err = netguard.HideAddresses(err, &url.URL{Scheme: "https", Host: host}, &url.URL{Scheme: "http", Host: host})
	return &FetchError{URL: ref, Err: fmt.Errorf("%s: %w", doing, err), Hint: hint}
}

// hideSignedAddress rewrites, in place, the address of the server that
// answered, which oras keeps in its ErrorResponse (netguard.HideAddresses
// rewrites the url.Errors and the text after it). NOTE: a signed address
// (a blob redirected to object storage or a CDN) carries its signature in
// the query, and may carry a token in the path, whatever the server then
// answers: one of another origin than the registry is named by its origin
// alone, the registry's own without its query.
func hideSignedAddress(registry string, err error) {
	var answered *errcode.ErrorResponse
	if errors.As(err, &answered) && answered.URL != nil {
		host := orasregistry.Reference{Registry: registry}.Host()
		answered.URL = netguard.ShownAddress(answered.URL, &url.URL{Scheme: "https", Host: host}, &url.URL{Scheme: "http", Host: host})
	}
}

// redirectedHop is the registry's 401 or 403 in err when a server of
// another origin than the registry gave it, after a redirect; nil
// otherwise.
func redirectedHop(registry string, err error) *errcode.ErrorResponse {
	var hop *errcode.ErrorResponse
	if !errors.As(err, &hop) || hop.URL == nil || hop.StatusCode != http.StatusUnauthorized && hop.StatusCode != http.StatusForbidden {
		return nil
	}
	// NOTE: oras answers a request to the registry with the response of
	// its last hop, as is; a token server's refusal comes wrapped in the
	// request that asked for the token ("GET <registry URL>: ..."). That
	// server got the credentials, as the registry does: it is no redirect.
	if !strings.HasPrefix(err.Error(), hop.Error()) {
		return nil
	}
	target := &url.URL{Scheme: hop.URL.Scheme, Host: orasregistry.Reference{Registry: registry}.Host()}
	if netguard.SameOrigin(target, hop.URL) {
		return nil
	}
	return hop
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

// IsOCITag reports whether an OCI chart's spec.chart.version is pulled as
// a tag, rather than a semver range resolved against the registry's tags.
// A tag that reads as a range too (1.2, 1: isVersionPrefix) is resolved as
// one when the registry has no such tag; v1.2.3 is then the tag 1.2.3.
func IsOCITag(v string) bool {
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v")); err == nil {
		return true
	}
	if strings.ContainsAny(v, "^~<>=!*|, ") {
		return false
	}
	// NOTE: x and X are wildcards only in what parses as a range (1.x,
	// 1.2.X); a name that is no range (next, linux-x64) is a tag.
	if _, err := semver.NewConstraint(v); err != nil {
		return true
	}
	return !strings.ContainsAny(v, "xX")
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
