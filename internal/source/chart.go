package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// Chart fetches the chart an Addon's spec.chart names: from a chart
// repository, an OCI registry or an https archive. creds may be nil. A chart
// is fetched once and then served from the cache, keyed by source, name and
// version (or digest; from a chart repository, with the digest its index
// lists) and by the credentials used. Nothing is cached on error.
func (f *Fetcher) Chart(ctx context.Context, spec capstanv1.ChartSource, creds *Credentials) (*Chart, error) {
	return f.chart(ctx, spec, creds, false)
}

// chart fetches a chart; refresh reads again, past the caches, whatever a
// name may point to anew: the repository's index, and the chart itself.
func (f *Fetcher) chart(ctx context.Context, spec capstanv1.ChartSource, creds *Credentials, refresh bool) (*Chart, error) {
	set := 0
	for _, s := range []string{spec.Repo, spec.OCI, spec.URL} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		return nil, specError("spec.chart: set exactly one of repo (with name), oci or url")
	}
	if spec.Digest != "" && !validDigest(spec.Digest) {
		return nil, specError("spec.chart.digest %q is not \"sha256:\" and 64 lowercase hex digits", spec.Digest)
	}
	switch {
	case spec.Repo != "":
		return f.repoChart(ctx, spec, creds, refresh)
	case spec.OCI != "":
		return f.ociChart(ctx, spec, creds, refresh)
	default:
		return f.archiveChart(ctx, spec, creds, refresh)
	}
}

func validDigest(d string) bool {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hexPart) != 64 {
		return false
	}
	for _, c := range hexPart {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// cached returns a cached chart when one is there and matches the pin.
func (f *Fetcher) cached(key, pinned string) (*Chart, bool, error) {
	c, ok := f.charts.get(key)
	if !ok || !c.matches(pinned) {
		return nil, false, nil
	}
	f.stats.ChartCacheHits.Add(1)
	return c.chart(), true, nil
}

// fetchChart runs one fetch per key at a time and caches only a verified
// result. refresh fetches even when the cache holds the key, and replaces
// what it holds.
func (f *Fetcher) fetchChart(ctx context.Context, key, pinned string, refresh bool, fetch func(ctx context.Context) (*cachedChart, error)) (*Chart, error) {
	flight := "chart\x00" + key + "\x00" + pinned
	if refresh {
		flight = "refresh\x00" + flight
	} else if ch, ok, err := f.cached(key, pinned); ok {
		return ch, err
	}
	v, err := f.shared(ctx, flight, func(ctx context.Context) (any, error) {
		if c, ok := f.charts.get(key); ok && c.matches(pinned) && !refresh {
			return c, nil
		}
		c, err := fetch(ctx)
		if err != nil {
			return nil, err
		}
		switch old, held := f.charts.get(key); {
		case refresh:
			// NOTE: what the cache held is from before the refresh, even
			// when the new chart is too large to be cached in its place.
			f.charts.remove(key)
			f.charts.add(key, c, c.size)
		case !held || !old.matches(pinned):
			// NOTE: a refresh that finished while this fetch ran stored
			// the newer chart; this one must not replace it.
			f.charts.add(key, c, c.size)
		}
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*cachedChart).chart(), nil
}

// verify checks an archive against the pin and the limits and unpacks it.
func (f *Fetcher) verify(source string, data []byte, pinned string, alsoAccepted ...string) (*cachedChart, *chartv2.Chart, error) {
	digest, err := checkDigest(source, data, pinned, alsoAccepted...)
	if err != nil {
		return nil, nil, err
	}
	b := &budget{lim: f.limits}
	files, err := readArchive(data, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, err)
	}
	ch, err := loadFiles(files)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, err)
	}
	c := &cachedChart{
		loaded: ch, name: ch.Name(), version: ch.Metadata.Version, digest: digest, url: source,
		size: b.cacheSize(len(data)),
	}
	return c, ch, nil
}

// archiveChart fetches an https .tgz.
func (f *Fetcher) archiveChart(ctx context.Context, spec capstanv1.ChartSource, creds *Credentials, refresh bool) (*Chart, error) {
	u, err := parseHTTPS(spec.URL, "spec.chart.url")
	if err != nil {
		return nil, &SpecError{Problem: err.Error()}
	}
	key := "url\x00" + u.String() + "\x00" + creds.cacheKey()
	return f.fetchChart(ctx, key, spec.Digest, refresh, func(ctx context.Context) (*cachedChart, error) {
		f.stats.ArchiveFetches.Add(1)
		data, err := f.get(ctx, u.String(), chartAuth(creds, u.Host), f.limits.MaxArchiveBytes, "spec.chart.url")
		if err != nil {
			return nil, err
		}
		c, _, err := f.verify(netguard.ShownAddress(u, u).String(), data, spec.Digest)
		if err != nil {
			return nil, err
		}
		c.fetchURL, c.credHost = u.String(), u.Host
		return c, nil
	})
}

// repoChart resolves a version in a chart repository's index and fetches it.
func (f *Fetcher) repoChart(ctx context.Context, spec capstanv1.ChartSource, creds *Credentials, refresh bool) (*Chart, error) {
	base, err := parseHTTPS(spec.Repo, "spec.chart.repo")
	if err != nil {
		return nil, &SpecError{Problem: err.Error()}
	}
	if spec.Name == "" {
		return nil, specError("spec.chart.name is required with spec.chart.repo")
	}
	maxAge := f.opts.IndexTTL
	if refresh {
		maxAge = 0
	}
	idx, age, stale, err := f.index(ctx, base, creds, maxAge)
	if err != nil {
		return nil, err
	}
	cv, err := resolveVersion(idx, base, spec.Name, spec.Version)
	if errors.Is(err, errNotInIndex) && age >= minIndexRefresh {
		// A chart or version published since the index was read shows
		// at once, not when the cached index expires: read it again.
		if idx, _, stale, err = f.index(ctx, base, creds, minIndexRefresh); err != nil {
			return nil, err
		}
		cv, err = resolveVersion(idx, base, spec.Name, spec.Version)
	}
	if errors.Is(err, errNotInIndex) && stale != nil {
		// NOTE: what is not in an older copy of the index may be in the
		// repository's: the failure to read it is what to retry.
		return nil, fmt.Errorf("%w; %s does not list it: %v", stale.err, stale.copy(), err)
	}
	if err != nil {
		return nil, err
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("chart %s %s in %s has no download URL in index.yaml; the repository is broken", spec.Name, cv.Version, base)
	}
	archiveURL, err := repo.ResolveReferenceURL(base.String(), cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("chart %s %s in %s: index.yaml has an invalid URL: %w", spec.Name, cv.Version, base, err)
	}
	au, err := parseHTTPS(archiveURL, "the archive URL in index.yaml", base)
	if err != nil {
		return nil, err
	}
	// NOTE: index.yaml, read with the repository's credentials, may name a
	// signed address (an S3 or GCS link, a ?token= download), and Helm
	// copies spec.chart.repo's query onto a relative one: what a reader of
	// the Addon may see of it is the repository's rule for a redirect,
	// never its query, and only the origin of another host.
	shown := netguard.ShownAddress(au, base).String()
	key := "repo\x00" + base.String() + "\x00" + spec.Name + "\x00" + cv.Version + "\x00" + creds.cacheKey()
	// NOTE: a version pushed again (ChartMuseum, Artifactory and Harbor
	// allow an overwrite) keeps its name and version; the digest the index
	// lists is what changes. It is in the key, so the new archive is
	// fetched and checked against it, not the one cached before served.
	if want := strings.TrimPrefix(cv.Digest, "sha256:"); want != "" {
		key += "\x00sha256:" + want
	}
	ch, err := f.fetchChart(ctx, key, spec.Digest, refresh, func(ctx context.Context) (*cachedChart, error) {
		f.stats.ArchiveFetches.Add(1)
		// Credentials go to the repository's host only, as Helm does by default.
		data, err := f.get(ctx, au.String(), chartAuth(creds, base.Host), f.limits.MaxArchiveBytes, "the chart archive in index.yaml")
		if err != nil {
			return nil, err
		}
		c, _, err := f.verify(shown, data, spec.Digest)
		if err != nil {
			return nil, err
		}
		// NOTE: index.yaml names each archive's sha256; an archive that
		// differs was changed behind the index, or the mirror is broken.
		if want := strings.TrimPrefix(cv.Digest, "sha256:"); want != "" && "sha256:"+want != c.digest {
			return nil, fmt.Errorf("the archive at %s has digest %s, but index.yaml lists sha256:%s; the repository is broken or the archive was changed after it was indexed, and nothing was applied",
				shown, c.digest, want)
		}
		if c.name != spec.Name || c.version != cv.Version {
			return nil, fmt.Errorf("the archive at %s holds chart %s %s, but index.yaml lists it as %s %s; the repository is broken",
				shown, c.name, c.version, spec.Name, cv.Version)
		}
		c.fetchURL, c.credHost = au.String(), base.Host
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	if stale != nil {
		ch.StaleIndex = stale.Error()
	}
	return ch, nil
}

// errNotInIndex is a chart or version that the repository's index does not
// list.
var errNotInIndex = errors.New("not in the index")

// NotInIndex reports whether err is a chart or version that the chart
// repository's index does not list: one not published yet, which a sync
// waits for, or one deleted from the repository.
func NotInIndex(err error) bool { return errors.Is(err, errNotInIndex) }

// minIndexRefresh is how old a cached index must be before a chart or
// version it does not list has it read again before IndexTTL: an index
// read a moment ago is the repository's answer.
const minIndexRefresh = 10 * time.Second

// resolveVersion picks the chart version: an exact version, a semver range,
// or, when empty, the newest stable version. A chart or version the index
// does not list is errNotInIndex.
func resolveVersion(idx *repo.IndexFile, base *url.URL, name, version string) (*repo.ChartVersion, error) {
	versions, ok := idx.Entries[name]
	if !ok || len(versions) == 0 {
		return nil, fmt.Errorf("chart %q is not in the repository %s; check spec.chart.name: %w", name, base, errNotInIndex)
	}
	if version != "" {
		if _, err := semver.NewConstraint(version); err != nil {
			return nil, specError("spec.chart.version %q is neither a version nor a semver range: %v", version, err)
		}
	}
	// Helm's own resolution: an exact match first, then the newest in range.
	cv, err := idx.Get(name, version)
	if err != nil {
		shown := make([]string, 0, 5)
		for _, v := range versions {
			if len(shown) == cap(shown) {
				break
			}
			shown = append(shown, v.Version)
		}
		want := version
		if want == "" {
			want = "a stable version"
		}
		return nil, fmt.Errorf("chart %q in %s has no version matching %s; newest versions: %s; check spec.chart.version: %w",
			name, base, want, strings.Join(shown, ", "), errNotInIndex)
	}
	return cv, nil
}

// cachedIndex is a parsed index.yaml, the digest of its bytes, about the
// memory it keeps (retainedSize, which the cache counts) and when it was
// fetched.
type cachedIndex struct {
	index   *repo.IndexFile
	digest  string
	size    int64
	fetched time.Time
}

// indexParses bounds the index.yaml files parsed at once, across every
// Fetcher of the process. A parse holds the index's text and what it keeps
// of it, and garbage as much again until the collector runs (a whole parse,
// of an index not laid out as Helm writes one, some forty times its size),
// so the controller's peak is two parses, however many repositories its
// Addons name.
var indexParses = make(chan struct{}, 2)

// parseIndexBounded is parseIndex, waiting for a turn among indexParses
// for as long as ctx allows; a parse still running when ctx ends stops and
// gives its turn up.
func parseIndexBounded(ctx context.Context, data []byte) (*repo.IndexFile, error) {
	select {
	case indexParses <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to parse the index: %w", ctx.Err())
	}
	defer func() { <-indexParses }()
	return parseIndex(ctx, data)
}

// staleIndex is an index used after a failure to read it again.
type staleIndex struct {
	// err is why the index could not be read.
	err error
	// fetched is when the copy used was read, until when it is used.
	fetched, until time.Time
}

func (s *staleIndex) copy() string {
	return fmt.Sprintf("the index read at %s", s.fetched.UTC().Format(time.RFC3339))
}

func (s *staleIndex) Error() string {
	return fmt.Sprintf("%v; %s is used until %s", s.err, s.copy(), s.until.UTC().Format(time.RFC3339))
}

// index returns a repository's index and how long ago it was read,
// reusing a cached one younger than maxAge. When the repository cannot be
// read for a while (see unreachable), a cached index younger than
// IndexStaleFor is returned, with stale saying why; a read with maxAge 0,
// a refresh, returns the error.
func (f *Fetcher) index(ctx context.Context, base *url.URL, creds *Credentials, maxAge time.Duration) (idx *repo.IndexFile, age time.Duration, stale *staleIndex, err error) {
	key := base.String() + "\x00" + creds.cacheKey()
	if c, ok := f.indexes.get(key); ok && f.now().Sub(c.fetched) < maxAge {
		return c.index, f.now().Sub(c.fetched), nil, nil
	}
	v, err := f.shared(ctx, "index\x00"+key, func(ctx context.Context) (any, error) {
		if c, ok := f.indexes.get(key); ok && f.now().Sub(c.fetched) < maxAge {
			return c, nil
		}
		f.stats.IndexFetches.Add(1)
		u := base.JoinPath("index.yaml")
		data, err := f.get(ctx, u.String(), chartAuth(creds, base.Host), f.limits.MaxIndexBytes, "spec.chart.repo")
		if err != nil {
			return nil, err
		}
		digest := Digest(data)
		if old, ok := f.indexes.get(key); ok && old.digest == digest {
			// NOTE: an index read again because a version is missing is
			// most often the same bytes; it is not parsed again.
			c := &cachedIndex{index: old.index, digest: digest, size: old.size, fetched: f.now()}
			f.indexes.add(key, c, c.size)
			return c, nil
		}
		idx, err := parseIndexBounded(ctx, data)
		if err != nil {
			return nil, fmt.Errorf("index.yaml of %s: %w; check that spec.chart.repo is a Helm chart repository", base, err)
		}
		c := &cachedIndex{index: idx, digest: digest, size: retainedSize(idx), fetched: f.now()}
		f.indexes.add(key, c, c.size)
		return c, nil
	})
	if err != nil {
		c, ok := f.indexes.get(key)
		if !ok || maxAge == 0 || ctx.Err() != nil || !unreachable(err) || f.now().Sub(c.fetched) >= f.opts.IndexStaleFor {
			return nil, 0, nil, err
		}
		// NOTE: an outage of the repository does not stop the add-ons
		// that it serves, as it does not stop those pinned to an OCI
		// tag or a git commit: the index read last is used, and says so,
		// for IndexStaleFor after it was read.
		stale = &staleIndex{err: err, fetched: c.fetched, until: c.fetched.Add(f.opts.IndexStaleFor)}
		return c.index, f.now().Sub(c.fetched), stale, nil
	}
	c := v.(*cachedIndex)
	return c.index, f.now().Sub(c.fetched), nil, nil
}

// unreachable reports whether a fetch failed for what passes with time:
// no connection, a timeout, a download broken off, a server error, or an
// answer to come back later. A refusal of the fetch guard, a client error
// (the repository or its index gone, credentials refused), an index too
// large or one that does not parse are not.
func unreachable(err error) bool {
	var fe *FetchError
	if !errors.As(err, &fe) || netguard.IsRefused(err) {
		return false
	}
	var later *RetryAfterError
	var ne net.Error
	switch {
	case fe.Status >= 500, fe.Status == http.StatusRequestTimeout, fe.Status == http.StatusTooManyRequests:
		return true
	case fe.Status != 0:
		return false
	case errors.As(err, &later), errors.As(err, &ne):
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

// indexEntryError validates one version listed in index.yaml as Helm's
// repository loader does, which installs what it lists: a chart whose
// dependencies share a name is kept, because some repositories (JFrog
// Artifactory) strip the aliases that tell them apart from the index
// (helm/helm#12748). The chart itself is validated again when it is loaded,
// from its own Chart.yaml.
func indexEntryError(cv *repo.ChartVersion) error {
	err := cv.Validate()
	var verr chartv2.ValidationError
	if errors.As(err, &verr) && strings.HasPrefix(verr.Error(), "validation: more than one dependency with name or alias") {
		return nil
	}
	return err
}

// parseHTTPS parses a URL that must be https, without credentials in it.
// Its errors show raw without its query, and only by its origin when own
// is given and raw is on another (an address index.yaml names).
func parseHTTPS(raw, field string, own ...*url.URL) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		shown, _, _ := strings.Cut(netguard.Redact(raw), "?")
		if len(own) > 0 {
			return nil, fmt.Errorf("%s is not a URL", field)
		}
		return nil, fmt.Errorf("%s is not a URL: %v", field, shown)
	}
	if len(own) == 0 {
		own = []*url.URL{u}
	}
	shown := netguard.ShownAddress(u, own...)
	if u.Scheme != "https" {
		return nil, fmt.Errorf("%s %s must be an https URL", field, shown)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s must not hold credentials; put them in a Secret and name it in secretRef", field)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s %s has no host", field, shown)
	}
	return u, nil
}

// sortedVersions lists semver-valid versions newest first, for messages.
func sortedVersions(vs []string) []string {
	var parsed []*semver.Version
	for _, v := range vs {
		if sv, err := semver.NewVersion(v); err == nil {
			parsed = append(parsed, sv)
		}
	}
	sort.Sort(sort.Reverse(semver.Collection(parsed)))
	out := make([]string, len(parsed))
	for i, v := range parsed {
		out[i] = v.Original()
	}
	return out
}
