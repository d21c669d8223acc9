package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	corev1 "k8s.io/api/core/v1"
	"net/url"
	"sort"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// wantRef is where a fetched revision is stored in the in-memory repository.
const wantRef = "refs/capstan/want"

// Git fetches one revision of a repository: a full commit hash, a branch, a
// tag, a full ref name, or empty for the remote's default branch. It fetches
// with depth 1 where the server allows it. The tree is cached by repository,
// commit and credentials; a commit hash that is cached is served without any
// request. Nothing is cached on error.
func (f *Fetcher) Git(ctx context.Context, spec capstanv1.GitSource, creds *Credentials) (*Tree, error) {
	ep, err := transport.NewEndpoint(spec.URL)
	if err != nil {
		return nil, specError("spec.git.url %q is not a git URL: %v", netguard.Redact(spec.URL), netguard.RedactError(err, spec.URL))
	}
	shown := netguard.Redact(spec.URL)
	if HoldsCredentials(ep) {
		return nil, specError("spec.git.url must not hold credentials; put them in a Secret and name it in spec.git.secretRef")
	}
	prefix := "git\x00" + spec.URL + "\x00" + creds.cacheKey() + "\x00"
	rev := strings.TrimSpace(spec.Revision)
	if isCommitHash(rev) {
		if t, ok := f.trees.get(prefix + rev); ok {
			f.stats.GitCacheHits.Add(1)
			return t, nil
		}
	}
	if ep.Protocol == "ssh" {
		// NOTE: an http request is bounded by the guard's client; ssh has
		// no timeout of its own, and a server that sends a byte a minute
		// would hold the reconcile for good.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.guard.Config().Timeout)
		defer cancel()
	}
	// NOTE: after the cache: SSH auth parses a key and writes known_hosts.
	auth, err := f.gitAuth(ctx, ep, creds)
	if err != nil {
		return nil, err
	}
	refs, err := f.listRefs(ctx, spec.URL, auth)
	if err != nil {
		return nil, gitError(shown, "listing its refs", err)
	}
	commit, refName, err := resolveRevision(refs, rev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	key := prefix + commit
	if t, ok := f.trees.get(key); ok {
		f.stats.GitCacheHits.Add(1)
		return t, nil
	}
	v, err := f.shared(ctx, key, func(ctx context.Context) (any, error) {
		if t, ok := f.trees.get(key); ok {
			return t, nil
		}
		f.stats.GitFetches.Add(1)
		t, err := f.fetchTree(ctx, spec.URL, auth, commit, refName, refs)
		if err != nil {
			return nil, err
		}
		f.trees.add(key, t, t.size)
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Tree), nil
}

func isCommitHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (f *Fetcher) listRefs(ctx context.Context, u string, auth transport.AuthMethod) ([]*plumbing.Reference, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{u}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return nil, err
	}
	if err := checkRefCount(len(refs)); err != nil {
		return nil, err
	}
	return refs, nil
}

// resolveRevision finds the commit a revision names among the remote's refs,
// and a ref that points at it (empty when no ref does).
func resolveRevision(refs []*plumbing.Reference, rev string) (commit string, refName string, err error) {
	byName := map[string]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name().String()] = r
	}
	target := func(name string) (string, bool) {
		// An annotated tag's commit is its peeled ref.
		if p, ok := byName[name+"^{}"]; ok {
			return p.Hash().String(), true
		}
		r, ok := byName[name]
		if !ok {
			return "", false
		}
		if r.Type() == plumbing.SymbolicReference {
			t, ok := byName[r.Target().String()]
			if !ok {
				return "", false
			}
			return t.Hash().String(), true
		}
		return r.Hash().String(), true
	}
	switch {
	case rev == "" || rev == "HEAD":
		head, ok := byName["HEAD"]
		if !ok {
			return "", "", errors.New("the repository has no default branch (HEAD); set spec.git.revision")
		}
		c, ok := target("HEAD")
		if !ok {
			return "", "", errors.New("the repository's HEAD points nowhere; set spec.git.revision")
		}
		if head.Type() == plumbing.SymbolicReference {
			return c, head.Target().String(), nil
		}
		return c, "HEAD", nil
	case isCommitHash(rev):
		names := make([]string, 0, len(refs))
		for _, r := range refs {
			if r.Type() == plumbing.HashReference && r.Hash().String() == rev && !strings.HasSuffix(r.Name().String(), "^{}") {
				names = append(names, r.Name().String())
			}
		}
		sort.Strings(names)
		if len(names) > 0 {
			return rev, names[0], nil
		}
		return rev, "", nil
	}
	for _, name := range []string{rev, "refs/heads/" + rev, "refs/tags/" + rev} {
		if c, ok := target(name); ok && (name != rev || strings.HasPrefix(rev, "refs/")) {
			return c, name, nil
		}
	}
	var branches, tags []string
	for _, r := range refs {
		n := r.Name()
		switch {
		case n.IsBranch():
			branches = append(branches, n.Short())
		case n.IsTag() && !strings.HasSuffix(n.String(), "^{}"):
			tags = append(tags, n.Short())
		}
	}
	sort.Strings(branches)
	sort.Strings(tags)
	return "", "", fmt.Errorf("revision %q is neither a branch, a tag nor a full 40-character commit hash; branches: %s; tags: %s; check spec.git.revision",
		rev, strings.Join(firstN(branches, 10), ", "), strings.Join(firstN(tags, 10), ", "))
}

// fetchTree fetches one commit into memory and reads its tree.
func (f *Fetcher) fetchTree(ctx context.Context, u string, auth transport.AuthMethod, commit, refName string, refs []*plumbing.Reference) (*Tree, error) {
	shown := netguard.Redact(u)
	budget := f.opts.GitBudget
	if budget == nil {
		budget = ProcessGitBudget()
	}
	st := budget.Storage(f.limits.FetchLimits())
	// NOTE: the tree is copied out of the storage before it returns; its
	// objects are garbage from then on, and their budget is others'.
	defer st.Release()
	repo, err := git.Init(st, nil)
	if err != nil {
		return nil, err
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{u}}); err != nil {
		return nil, err
	}
	fetch := func(spec string, depth int) error {
		err := repo.FetchContext(ctx, &git.FetchOptions{
			RemoteName: "origin", RefSpecs: []config.RefSpec{config.RefSpec(spec)},
			Depth: depth, Auth: auth, Tags: git.NoTags, Force: true,
		})
		if errors.Is(err, git.NoErrAlreadyUpToDate) {
			return nil
		}
		return err
	}
	hash := plumbing.NewHash(commit)
	have := func() bool {
		_, err := repo.CommitObject(hash)
		return err == nil
	}
	// 1. A ref at the commit, shallow. 2. The commit itself, shallow, where
	// the server allows fetching a commit by hash. 3. Everything.
	var lastErr error
	if refName != "" {
		if lastErr = fetch("+"+refName+":"+wantRef, 1); lastErr != nil && fatalGitError(lastErr) {
			return nil, gitError(shown, "fetching "+refName, lastErr)
		}
	}
	if !have() {
		if lastErr = fetch(commit+":"+wantRef, 1); lastErr != nil && fatalGitError(lastErr) {
			return nil, gitError(shown, "fetching commit "+commit, lastErr)
		}
	}
	if !have() {
		if lastErr = fetch("+refs/*:refs/*", 0); lastErr != nil {
			return nil, gitError(shown, "fetching all refs", lastErr)
		}
	}
	c, err := repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("commit %s is not in %s; check spec.git.revision", commit, shown)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s of %s: cannot read its tree: %w", commit, shown, err)
	}
	mfs, size, err := readTree(repo, tree, f.limits)
	if err != nil {
		return nil, fmt.Errorf("commit %s of %s: %w", commit, shown, err)
	}
	return &Tree{Commit: commit, FS: mfs, URL: shown, size: size}, nil
}

// fatalGitError reports whether an error rules out the fallbacks: a refused
// address, refused credentials or a missing repository stay so. A pack over
// the response cap would be downloaded again, as large, by each fallback,
// and a server that asked for a wait (429) would be asked again at once.
func fatalGitError(err error) bool {
	return netguard.IsRefused(err) ||
		errors.As(err, new(*netguard.TooLargeError)) || errors.As(err, new(*RetryAfterError)) ||
		errors.Is(err, transport.ErrAuthenticationRequired) ||
		errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrRepositoryNotFound) ||
		errors.Is(err, ErrGitTooLarge) || errors.Is(err, ErrTooManyRefs) || errors.Is(err, ErrGitMemoryBusy) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func gitError(shown, doing string, err error) error {
	hint := "check spec.git.url and that the server is up"
	switch {
	case netguard.IsRefused(err):
		hint = "the fetch guard protects the cluster from requests to internal addresses"
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		hint = "the server refused the credentials; check the Secret named in spec.git.secretRef"
	case errors.Is(err, transport.ErrRepositoryNotFound):
		hint = "the server has no such repository, or hides it without credentials; check spec.git.url and spec.git.secretRef"
	case errors.As(err, new(*netguard.TooLargeError)):
		hint = "that limit is the controller's --fetch-max-response-bytes"
	case errors.Is(err, ErrGitTooLarge), errors.Is(err, ErrTooManyRefs), errors.Is(err, ErrGitMemoryBusy), errors.As(err, new(*RetryAfterError)):
		hint = "" // it says what to do
	}
	// NOTE: a redirect's target, often a signed address, is named by its
	// origin alone, as a chart's is (netguard.HideAddresses).
	own, _ := url.Parse(shown)
	return &FetchError{URL: shown, Err: fmt.Errorf("%s: %w", doing, netguard.HideAddresses(err, own)), Hint: hint}
}

// readTree copies a git tree into memory within the limits. Submodules are
// left out; symlinks are kept and resolved inside the tree when read.
func readTree(repo *git.Repository, tree *object.Tree, lim Limits) (*memFS, int64, error) {
	m := newMemFS()
	var size int64
	files := 0
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, entry, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("cannot walk the tree: %w", err)
		}
		if depth := strings.Count(name, "/") + 1; depth > lim.MaxDepth {
			return nil, 0, fmt.Errorf("path %q is %d folders deep, over the limit of %d", name, depth, lim.MaxDepth)
		}
		switch entry.Mode {
		case filemode.Dir:
			m.addDir(name)
			continue
		case filemode.Submodule:
			continue
		}
		files++
		if files > lim.MaxFiles {
			return nil, 0, fmt.Errorf("the tree holds more than %d files, the limit; the whole commit counts, not only its folder: for a larger repository, raise the controller's --max-source-files", lim.MaxFiles)
		}
		blob, err := repo.BlobObject(entry.Hash)
		if err != nil {
			return nil, 0, fmt.Errorf("cannot read %s: %w", name, err)
		}
		if size+blob.Size > lim.MaxUncompressedBytes {
			return nil, 0, fmt.Errorf("the tree holds more than %d bytes, the limit; the whole commit counts, not only its folder: for a larger repository, raise the controller's --max-source-bytes", lim.MaxUncompressedBytes)
		}
		r, err := blob.Reader()
		if err != nil {
			return nil, 0, fmt.Errorf("cannot read %s: %w", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(r, blob.Size))
		r.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("cannot read %s: %w", name, err)
		}
		size += int64(len(data))
		switch entry.Mode {
		case filemode.Symlink:
			m.addLink(name, string(data))
		case filemode.Executable:
			m.addFile(name, data, 0o555)
		default:
			m.addFile(name, data, 0o444)
		}
	}
	m.finish()
	return m, size, nil
}

// gitAuth builds the auth for a fetch, always wrapped so go-git uses the
// Fetcher's guarded transport.
func (f *Fetcher) gitAuth(ctx context.Context, ep *transport.Endpoint, creds *Credentials) (transport.AuthMethod, error) {
	switch ep.Protocol {
	case "file":
		if !f.opts.AllowFileGit {
			return nil, specError("spec.git.url: file:// repositories are not allowed here; they read the controller's own disk (--allow-file-git, for development, allows them)")
		}
		if creds != nil {
			return nil, specError("spec.git.secretRef: a file:// repository takes no credentials")
		}
		return nil, nil
	case "http":
		if creds != nil {
			return nil, specError("spec.git.secretRef: credentials are only sent over https or ssh; use an https:// URL")
		}
		return &guardedAuth{transport: f.gitHTTP.http}, nil
	case "https":
		if creds == nil {
			return &guardedAuth{transport: f.gitHTTP.http}, nil
		}
		switch {
		case creds.GitHubAppID != 0:
			token, err := f.githubAppToken(ctx, creds)
			if err != nil {
				return nil, err
			}
			return &guardedAuth{transport: f.gitHTTP.http, inner: &githttp.BasicAuth{Username: "x-access-token", Password: token}}, nil
		case creds.Token != "":
			user := creds.Username
			if user == "" {
				// Accepted with a token by GitHub, Gitea and GitLab.
				user = "x-access-token"
			}
			return &guardedAuth{transport: f.gitHTTP.http, inner: &githttp.BasicAuth{Username: user, Password: creds.Token}}, nil
		case creds.hasBasic():
			return &guardedAuth{transport: f.gitHTTP.http, inner: &githttp.BasicAuth{Username: creds.Username, Password: creds.Password}}, nil
		}
		return nil, specError("spec.git.secretRef: an https repository takes username and password, a token or a GitHub App; the Secret holds an SSH key, which needs an ssh:// URL")
	case "ssh":
		if creds == nil || len(creds.Identity) == 0 {
			return nil, specError("spec.git.secretRef: an ssh repository needs a Secret with an SSH key (identity) and known_hosts")
		}
		a, err := newSSHAuth(ep, creds, f.guard.Config().DialTimeout)
		if err != nil {
			return nil, err
		}
		return &guardedAuth{transport: f.gitHTTP.ssh, inner: a}, nil
	}
	return nil, specError("spec.git.url: scheme %q is not supported; use https://, ssh:// or user@host:path", ep.Protocol)
}

// githubAppToken returns an installation token, fetched through the guard.
func (f *Fetcher) githubAppToken(ctx context.Context, creds *Credentials) (string, error) {
	itr, err := f.githubAppTransport(creds)
	if err != nil {
		return "", err
	}
	// NOTE: ghinstallation calls the guarded transport, not the client, so
	// the client's timeout (--fetch-timeout) does not reach the request: a
	// token endpoint that trickles its body would hold the reconcile, and
	// the transport's lock every other user of the App, for good.
	tctx, cancel := context.WithTimeout(ctx, f.guard.Config().Timeout)
	defer cancel()
	token, err := itr.Token(tctx)
	if err != nil {
		return "", fmt.Errorf("cannot get a GitHub App installation token from %s: %w; check githubAppID, githubAppInstallationID and githubAppPrivateKey",
			itr.BaseURL, unwrapURLError(err))
	}
	return token, nil
}

// githubAppTransport builds (or reuses) the ghinstallation transport for an App.
func (f *Fetcher) githubAppTransport(creds *Credentials) (*ghinstallation.Transport, error) {
	key := creds.cacheKey()
	if v, ok := f.githubApps.get(key); ok {
		return v, nil
	}
	itr, err := ghinstallation.New(f.client.Transport, creds.GitHubAppID, creds.GitHubAppInstallationID, creds.GitHubAppPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("key %s of the credentials Secret is not a usable GitHub App private key (%v)", SecretKeyGitHubAppPrivateKey, err)
	}
	if creds.GitHubAppBaseURL != "" {
		u, err := parseHTTPS(creds.GitHubAppBaseURL, "key "+SecretKeyGitHubAppBaseURL)
		if err != nil {
			return nil, err
		}
		itr.BaseURL = strings.TrimRight(u.String(), "/")
	}
	// NOTE: two fetches with new credentials may both build one; the
	// last kept wins, and each token is still reused from then on.
	f.githubApps.add(key, itr, 1)
	return itr, nil
}

// GitAuth turns a credentials Secret into go-git auth for url, with every
// form Fetcher.Git takes (https token or basic, SSH key with known_hosts,
// GitHub App), wrapped so go-git dials through the Fetcher's guarded
// transport. The gitops syncer and writer use it for the gitops repository.
func (f *Fetcher) GitAuth(ctx context.Context, url string, secret *corev1.Secret) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("git URL %q: %w", netguard.Redact(url), netguard.RedactError(err, url))
	}
	var creds *Credentials
	if secret != nil {
		if creds, err = CredentialsFromSecret(secret); err != nil {
			return nil, err
		}
	}
	return f.gitAuth(ctx, ep, creds)
}

// HoldsCredentials reports whether a git URL carries a secret: a password,
// or, as the user of an http or https URL, a token (GitHub takes
// https://TOKEN@github.com/...). A user name alone is no secret: Azure
// DevOps' and Bitbucket's clone addresses carry one
// (https://org@dev.azure.com/...), and ssh's git@ is one. A URL is shown
// in every Addon's spec and status, so a credential in it would be shown
// to every reader.
func HoldsCredentials(ep *transport.Endpoint) bool {
	if ep.Password != "" {
		return true
	}
	if ep.Protocol != "http" && ep.Protocol != "https" {
		return false
	}
	if userLooksLikeToken(ep.User) {
		return true
	}
	user := strings.ToLower(ep.User)
	for _, prefix := range tokenPrefixes {
		if strings.HasPrefix(user, prefix) {
			return true
		}
	}
	return false
}

// tokenPrefixes begin the tokens that git hosts take as an https URL's
// user: GitHub's (personal, OAuth, app and fine-grained), GitLab's, and
// the names that stand for a token given as a password.
var tokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gloas-", "x-access-token", "oauth2", "x-token-auth"}
