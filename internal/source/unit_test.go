package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

func TestLRU(t *testing.T) {
	tests := []struct {
		name       string
		maxEntries int
		maxBytes   int64
		adds       []struct {
			key  string
			size int64
		}
		touch    string // read between the adds and the check
		wantKeys []string
		wantGone []string
	}{
		{name: "count bound evicts the oldest", maxEntries: 2, maxBytes: 100,
			adds: []struct {
				key  string
				size int64
			}{{"a", 1}, {"b", 1}, {"c", 1}}, wantKeys: []string{"b", "c"}, wantGone: []string{"a"}},
		{name: "byte bound evicts until it fits", maxEntries: 10, maxBytes: 10,
			adds: []struct {
				key  string
				size int64
			}{{"a", 4}, {"b", 4}, {"c", 4}}, wantKeys: []string{"b", "c"}, wantGone: []string{"a"}},
		{name: "too large is not kept", maxEntries: 10, maxBytes: 10,
			adds: []struct {
				key  string
				size int64
			}{{"a", 4}, {"big", 11}}, wantKeys: []string{"a"}, wantGone: []string{"big"}},
		{name: "replacing a key keeps one entry", maxEntries: 2, maxBytes: 100,
			adds: []struct {
				key  string
				size int64
			}{{"a", 1}, {"a", 5}, {"b", 1}}, wantKeys: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newLRU[string](tt.maxEntries, tt.maxBytes)
			for _, a := range tt.adds {
				c.add(a.key, a.key, a.size)
			}
			for _, k := range tt.wantKeys {
				if v, ok := c.get(k); !ok || v != k {
					t.Errorf("%s missing", k)
				}
			}
			for _, k := range tt.wantGone {
				if _, ok := c.get(k); ok {
					t.Errorf("%s still cached", k)
				}
			}
			if n, _ := c.stats(); n != len(tt.wantKeys) {
				t.Errorf("%d entries, want %d", n, len(tt.wantKeys))
			}
		})
	}
	// Reading refreshes recency.
	c := newLRU[int](2, 100)
	c.add("a", 1, 1)
	c.add("b", 2, 1)
	c.get("a")
	c.add("c", 3, 1)
	if _, ok := c.get("b"); ok {
		t.Fatal("b was used least recently and must be gone")
	}
	if _, ok := c.get("a"); !ok {
		t.Fatal("a was read and must stay")
	}
}

func TestCredentialsFromSecret(t *testing.T) {
	secret := func(data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	tests := []struct {
		name    string
		data    map[string]string
		wantErr string
		check   func(*Credentials) bool
	}{
		{name: "basic", data: map[string]string{"username": "u", "password": "p4ss"}, check: func(c *Credentials) bool { return c.Username == "u" && c.Password == "p4ss" }},
		{name: "token", data: map[string]string{"token": " t0k \n"}, check: func(c *Credentials) bool { return c.Token == "t0k" }},
		{name: "ssh", data: map[string]string{"identity": "KEY", "known_hosts": "HOSTS"}, check: func(c *Credentials) bool { return string(c.Identity) == "KEY" }},
		{name: "ssh with passphrase", data: map[string]string{"identity": "KEY", "known_hosts": "HOSTS", "password": "pp"}, check: func(c *Credentials) bool { return c.Password == "pp" }},
		{name: "github app", data: map[string]string{"githubAppID": "7", "githubAppInstallationID": "42", "githubAppPrivateKey": "PEM"},
			check: func(c *Credentials) bool { return c.GitHubAppID == 7 && c.GitHubAppInstallationID == 42 }},
		{name: "empty", data: map[string]string{}, wantErr: "holds no credentials"},
		{name: "password without username", data: map[string]string{"password": "p4ss"}, wantErr: "key password needs key username"},
		{name: "ssh without known_hosts", data: map[string]string{"identity": "KEY"}, wantErr: "never trusted on first use"},
		{name: "mixed", data: map[string]string{"token": "t0k", "username": "u", "password": "p4ss"}, wantErr: "mixes kinds"},
		{name: "partial app", data: map[string]string{"githubAppID": "7", "githubAppPrivateKey": "PEM"}, wantErr: "needs all of"},
		{name: "app id not a number", data: map[string]string{"githubAppID": "seven"}, wantErr: "githubAppID must be a positive number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CredentialsFromSecret(secret(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "Secret ns/creds") {
					t.Fatalf("want %q naming the Secret, got %v", tt.wantErr, err)
				}
				for _, v := range []string{"p4ss", "t0k", "KEY", "PEM"} {
					if strings.Contains(err.Error(), v) {
						t.Fatalf("the error shows a value: %v", err)
					}
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Fatalf("got %+v, %v", c, err)
			}
		})
	}
	if c, err := CredentialsFromSecret(nil); c != nil || err != nil {
		t.Fatal("no Secret means no credentials")
	}
	a, b := &Credentials{Token: "t0k3n-zz"}, &Credentials{Token: "other"}
	if a.cacheKey() == b.cacheKey() || a.cacheKey() == (*Credentials)(nil).cacheKey() {
		t.Fatal("different credentials must have different cache keys")
	}
	if k := a.cacheKey(); strings.Contains(k, "t0k3n-zz") || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(k) {
		t.Fatalf("the cache key %q must be a hash that does not hold the token", k)
	}
}

// TestSSHPassphraseIsNoBasicPassword: a Secret of the ssh kind with a
// passphrase named for a chart repository, a registry or an https git
// repository is refused as another kind of credentials, and the passphrase
// is sent nowhere as a password.
func TestSSHPassphraseIsNoBasicPassword(t *testing.T) {
	creds, err := CredentialsFromSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ssh"},
		Data:       map[string][]byte{"identity": []byte("KEY"), "known_hosts": []byte("HOSTS"), "username": []byte("git"), "password": []byte("phr4se")},
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "https://h/index.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := (httpAuth{creds: creds, host: "h"}).apply(req); err == nil || !strings.Contains(err.Error(), "another kind of credentials") {
		t.Errorf("a chart repository with an SSH key's Secret: %v; want it refused as another kind", err)
	}
	if h := req.Header.Get("Authorization"); h != "" {
		t.Errorf("a chart repository was sent %q", h)
	}
	f := newTestFetcher(t, Options{})
	if got, err := f.registryAuth("h", creds).Credential(context.Background(), "h"); err == nil || got.Password != "" {
		t.Errorf("a registry with an SSH key's Secret: %+v, %v; want it refused", got.Username, err)
	}
	ep, err := transport.NewEndpoint("https://h/repo.git")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.gitAuth(context.Background(), ep, creds); err == nil || !strings.Contains(err.Error(), "needs an ssh:// URL") {
		t.Errorf("an https git repository with an SSH key's Secret: %v; want it refused", err)
	}
}

func testMemFS() *memFS {
	m := newMemFS()
	m.addFile("a/b/c.yaml", []byte("c"), 0o444)
	m.addFile("a/d.yaml", []byte("d"), 0o444)
	m.addFile("top.txt", []byte("top"), 0o555)
	m.addDir("empty")
	m.finish()
	return m
}

func TestMemFS(t *testing.T) {
	if err := fstest.TestFS(testMemFS(), "a/b/c.yaml", "a/d.yaml", "top.txt", "empty"); err != nil {
		t.Fatal(err)
	}
	m := newMemFS()
	m.addFile("dir/file", []byte("x"), 0o444)
	m.addLink("rel", "dir/file")
	m.addLink("dirlink", "dir")
	m.addLink("chain", "rel")
	m.addLink("abs", "/etc/passwd")
	m.addLink("up", "../outside")
	m.addLink("dir/up2", "../../x")
	m.addLink("loop1", "loop2")
	m.addLink("loop2", "loop1")
	m.addLink("dir/self", "../dir/file")
	m.finish()
	tests := []struct {
		path    string
		want    string
		wantErr error
	}{
		{"rel", "x", nil},
		{"chain", "x", nil},
		{"dirlink/file", "x", nil},
		{"dir/self", "x", nil},
		{"abs", "", ErrLinkLeavesTree},
		{"up", "", ErrLinkLeavesTree},
		{"dir/up2", "", ErrLinkLeavesTree},
		{"missing", "", fs.ErrNotExist},
		{"dir/file/x", "", fs.ErrNotExist},
		{"../x", "", fs.ErrInvalid},
		{"loop1", "", nil}, // any error
	}
	for _, tt := range tests {
		got, err := fs.ReadFile(m, tt.path)
		switch {
		case tt.want != "":
			if err != nil || string(got) != tt.want {
				t.Errorf("%s: got %q, %v", tt.path, got, err)
			}
		case tt.wantErr != nil:
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: want %v, got %v", tt.path, tt.wantErr, err)
			}
		default:
			if err == nil {
				t.Errorf("%s: want an error", tt.path)
			}
		}
	}
}

// TestSSHAuth builds SSH key auth and checks the host key check against
// known_hosts by the URL's name, and the guard's pinning, without dialling.
func TestSSHAuth(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	hostPub, _, _ := ed25519.GenerateKey(rand.Reader)
	hostKey, _ := ssh.NewPublicKey(hostPub)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := ssh.NewPublicKey(otherPub)
	creds := &Credentials{Identity: pem.EncodeToMemory(block), KnownHosts: []byte(knownhosts.Line([]string{"git.example.com"}, hostKey) + "\n")}

	ep, err := transport.NewEndpoint("git@git.example.com:org/repo.git")
	if err != nil {
		t.Fatal(err)
	}
	a, err := newSSHAuth(ep, creds, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := a.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "git" {
		t.Fatalf("user %q", cfg.User)
	}
	// The connection is pinned to an IP; the check still uses the name.
	remote := &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 22}
	if err := cfg.HostKeyCallback("203.0.113.7:22", remote, hostKey); err != nil {
		t.Fatalf("the known host key must pass: %v", err)
	}
	if err := cfg.HostKeyCallback("203.0.113.7:22", remote, otherKey); err == nil || !strings.Contains(err.Error(), "not in known_hosts") {
		t.Fatalf("an unknown host key must fail, got %v", err)
	}

	if _, err := newSSHAuth(ep, &Credentials{Identity: []byte("nope"), KnownHosts: creds.KnownHosts}, 0); err == nil || !strings.Contains(err.Error(), "not a usable SSH private key") {
		t.Fatalf("want a key error, got %v", err)
	}
	if _, err := newSSHAuth(ep, &Credentials{Identity: creds.Identity, KnownHosts: []byte("@@@ not known hosts")}, 0); err == nil {
		t.Fatal("want a known_hosts error")
	}

	g, err := netguard.New(netguard.Config{Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &sshGuard{guard: g}
	for _, tt := range []struct {
		host   string
		want   string
		refuse bool
	}{
		{host: "169.254.169.254", refuse: true},
		{host: "fd00:ec2::254", refuse: true},
		{host: "127.0.0.2", refuse: true},
		{host: "127.0.0.1", want: "127.0.0.1"},
	} {
		pinned, err := s.pin(&transport.Endpoint{Protocol: "ssh", Host: tt.host})
		if tt.refuse {
			if !netguard.IsRefused(err) {
				t.Errorf("%s: want a refusal, got %v", tt.host, err)
			}
			continue
		}
		if err != nil || pinned.Host != tt.want || pinned.Port != 22 {
			t.Errorf("%s: got %+v, %v", tt.host, pinned, err)
		}
	}
}

// TestChartDirBudgetCountsSubcharts: in a chart folder, what a subchart
// archive unpacks to counts against the same limit as the folder's files,
// as it does inside a chart archive.
func TestChartDirBudgetCountsSubcharts(t *testing.T) {
	dir := t.TempDir()
	sub := tgz(t, file("sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"), file("sub/big", strings.Repeat("s", 40<<10)))
	for name, body := range map[string][]byte{
		"Chart.yaml":           []byte("apiVersion: v2\nname: demo\nversion: 1.0.0\n"),
		"charts/sub-0.1.0.tgz": sub,
		"zbig":                 []byte(strings.Repeat("z", 40<<10)),
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lim := Limits{MaxUncompressedBytes: 64 << 10}.withDefaults()
	if _, err := checkChartDir(dir, lim); err == nil || !strings.Contains(err.Error(), "more than 65536 bytes") {
		t.Errorf("80 KiB in all under a 64 KiB limit: error %v", err)
	}
	lim.MaxUncompressedBytes = 128 << 10
	if _, err := checkChartDir(dir, lim); err != nil {
		t.Errorf("under the limit: %v", err)
	}
}

// writeChartDir writes a chart folder's files, Chart.yaml included.
func writeChartDir(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	files["Chart.yaml"] = "apiVersion: v2\nname: demo\nversion: 1.0.0\n"
	for name, body := range files {
		if err := writeFile(filepath.Join(dir, name), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChartDirLinksToFoldersAreRefused: Helm's loader walks a linked folder
// as if it were there, once per link, so twenty links to a 60 KiB folder
// load 1.2 MiB from a folder checked against 200 KiB. Such a link is
// refused, unless .helmignore leaves it out, when Helm does not follow it.
func TestChartDirLinksToFoldersAreRefused(t *testing.T) {
	dir := t.TempDir()
	writeChartDir(t, dir, map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		"data/blob":         strings.Repeat("d", 60<<10),
	})
	for i := range 20 {
		if err := symlink("data", filepath.Join(dir, fmt.Sprintf("l%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	lim := Limits{MaxUncompressedBytes: 200 << 10}
	_, err := LoadChartWithLimits(dir, lim)
	var ae *ArchiveError
	if !errors.As(err, &ae) || ae.Entry != "l00" || !strings.Contains(err.Error(), "is a link to a folder") {
		t.Fatalf("twenty links to a 60 KiB folder under a 200 KiB limit: got %v, want l00 refused as a link to a folder", err)
	}

	if err := writeFile(filepath.Join(dir, ".helmignore"), []byte("# links\nl*\n")); err != nil {
		t.Fatal(err)
	}
	c, err := LoadChartWithLimits(dir, lim)
	if err != nil {
		t.Fatalf("the links left out by .helmignore: %v", err)
	}
	for _, f := range c.Chart.Files {
		if strings.HasPrefix(f.Name, "l") {
			t.Fatalf("an ignored link was loaded: %s", f.Name)
		}
	}
}

// TestChartDirHonoursHelmignore: what .helmignore (and Helm's default rule,
// dot files in templates/) leaves out, Helm's loader never reads, so it is
// neither counted against the limits nor in the digest; a chart at the top
// of a git repository, .git ignored, loads as helm template loads it.
func TestChartDirHonoursHelmignore(t *testing.T) {
	dir := t.TempDir()
	writeChartDir(t, dir, map[string]string{
		".helmignore":             ".git/\n*.tmp\n",
		"templates/cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		"templates/.cm.yaml.swp":  strings.Repeat("s", 300<<10),
		"values.yaml":             "replicas: 1\n",
		".git/objects/pack/p.idx": strings.Repeat("g", 300<<10),
		"scratch.tmp":             strings.Repeat("t", 300<<10),
	})
	lim := Limits{MaxUncompressedBytes: 200 << 10}
	c1, err := LoadChartWithLimits(dir, lim)
	if err != nil {
		t.Fatalf("900 KiB of ignored files under a 200 KiB limit: %v", err)
	}
	helm, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := func(c *chartv2.Chart) string {
		var n []string
		for _, f := range c.Raw {
			n = append(n, f.Name)
		}
		sort.Strings(n)
		return strings.Join(n, " ")
	}
	if got, want := names(c1.Chart), names(helm); got != want {
		t.Fatalf("loaded %s; Helm's loader loads %s", got, want)
	}

	if err := writeFile(filepath.Join(dir, ".git/objects/pack/p.idx"), []byte("changed")); err != nil {
		t.Fatal(err)
	}
	if c2, err := LoadChartWithLimits(dir, lim); err != nil || c2.Digest != c1.Digest {
		t.Fatalf("an ignored file changed the digest (%v)", err)
	}
	if err := writeFile(filepath.Join(dir, "values.yaml"), []byte("replicas: 2\n")); err != nil {
		t.Fatal(err)
	}
	if c3, err := LoadChartWithLimits(dir, lim); err != nil || c3.Digest == c1.Digest {
		t.Fatalf("a loaded file's change left the digest as it was (%v)", err)
	}

	if err := writeFile(filepath.Join(dir, ".helmignore"), []byte(".git/\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChartWithLimits(dir, lim); err == nil || !strings.Contains(err.Error(), "more than 204800 bytes") {
		t.Fatalf("scratch.tmp no longer ignored: got %v, want the limit", err)
	}
}

// TestChartDirNamedByALink: a chart folder named through a link is walked
// as Helm's loader walks it, through the link, and held to the limits.
func TestChartDirNamedByALink(t *testing.T) {
	dir := t.TempDir()
	writeChartDir(t, filepath.Join(dir, "demo"), map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		"files/big":         strings.Repeat("b", 300<<10),
	})
	if err := symlink("demo", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChartWithLimits(filepath.Join(dir, "link"), Limits{MaxUncompressedBytes: 200 << 10}); err == nil || !strings.Contains(err.Error(), "more than 204800 bytes") {
		t.Fatalf("300 KiB through a link under a 200 KiB limit: got %v", err)
	}
}

// TestChartDirNamedThroughALinkAndDotDot: with a/link pointing at
// b/deep, the system opens a/link/../chart as b/chart, but Helm's loader
// cleans the path as text and loads a/chart. The folder checked is the
// one Helm loads: a/chart, whose 300 KiB pass a 200 KiB limit.
func TestChartDirNamedThroughALinkAndDotDot(t *testing.T) {
	dir := t.TempDir()
	writeChartDir(t, filepath.Join(dir, "a", "chart"), map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		"files/big":         strings.Repeat("b", 300<<10),
	})
	writeChartDir(t, filepath.Join(dir, "b", "chart"), map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: small\n",
	})
	if err := os.MkdirAll(filepath.Join(dir, "b", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := symlink(filepath.Join("..", "b", "deep"), filepath.Join(dir, "a", "link")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "a", "link") + string(filepath.Separator) + ".." + string(filepath.Separator) + "chart"
	if _, err := LoadChartWithLimits(p, Limits{MaxUncompressedBytes: 200 << 10}); err == nil || !strings.Contains(err.Error(), "more than 204800 bytes") {
		t.Fatalf("a/chart, which Helm loads, holds 300 KiB under a 200 KiB limit: got %v", err)
	}
}

// TestChartDirHelmignoreWorkIsBounded: Helm's loader matches every
// .helmignore rule against every path, at a cost of up to the rule's
// length times the path's, so a 64 KiB rule over a folder of long names
// would take minutes. The matching is counted and refused past its bound,
// before Helm's loader runs; the same folder with a short .helmignore
// loads.
func TestChartDirHelmignoreWorkIsBounded(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		// One rule of 60,000 bytes, counted at its length against each
		// path: some 12 million steps for each of the names below.
		".helmignore": "/" + strings.Repeat("x", 60000) + "\n",
	}
	for i := range 60 {
		files[fmt.Sprintf("files/%03d%s", i, strings.Repeat("n", 197))] = "data\n"
	}
	writeChartDir(t, dir, files)
	_, err := LoadChart(dir)
	if err == nil || !strings.Contains(err.Error(), ".helmignore") || !strings.Contains(err.Error(), "steps (bytes of the rules times the length of each path), the limit") {
		t.Fatalf("60 KiB of rules over 60 paths of 200 bytes: got %v, want the matching's bound", err)
	}
	if err := writeFile(filepath.Join(dir, ".helmignore"), []byte(".git/\n*.tmp\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChart(dir); err != nil {
		t.Fatalf("the same folder with a short .helmignore: %v", err)
	}
}

// TestChartDirIgnoredEntriesCount: Helm's loader visits every entry of a
// chart folder, and matches the rules against it, ignored or not, so
// ignored files count against the walk's bound (four times MaxFiles);
// a folder that .helmignore names is not entered, and counts once.
func TestChartDirIgnoredEntriesCount(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		".helmignore":       "*.tmp\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
	}
	for i := range 50 {
		files[fmt.Sprintf("scratch/%d.tmp", i)] = "t"
	}
	writeChartDir(t, dir, files)
	lim := Limits{MaxFiles: 10}
	if _, err := LoadChartWithLimits(dir, lim); err == nil || !strings.Contains(err.Error(), "more than 40 files and folders, ignored ones included") {
		t.Fatalf("50 ignored files under a walk bound of 40: got %v", err)
	}
	if err := writeFile(filepath.Join(dir, ".helmignore"), []byte("scratch/\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChartWithLimits(dir, lim); err != nil {
		t.Fatalf("the ignored files in a folder .helmignore names: %v", err)
	}
}

// TestArchiveSizeClaimIsNotAllocated checks that an entry's header, which
// says 90 MiB but is followed by nothing, does not make the unpacker
// allocate 90 MiB: the tiny archive is refused as truncated.
func TestArchiveSizeClaimIsNotAllocated(t *testing.T) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	if err := tw.WriteHeader(&tar.Header{Name: "demo/values.yaml", Typeflag: tar.TypeReg, Mode: 0o644, Size: 90 << 20}); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(tarBuf.Bytes())
	_ = zw.Close()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readArchive(gz.Bytes(), &budget{lim: DefaultLimits})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("a %d-byte archive claiming 90 MiB: %v; want it refused as truncated", gz.Len(), err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("a %d-byte archive made the unpacker allocate %d bytes", gz.Len(), grew)
	}
}

// TestTreeReadsLinks checks that a tree tells where its links point, so
// that a render's walk can find a link to a folder that holds it.
func TestTreeReadsLinks(t *testing.T) {
	m := newMemFS()
	m.addFile("base/cm.yaml", []byte("a"), 0o444)
	m.addLink("deploy/base", "../base")
	m.addLink("deploy/up", "..")
	m.finish()
	for name, want := range map[string]string{"deploy/base": "../base", "deploy/up": ".."} {
		if got, err := fs.ReadLink(m, name); err != nil || got != want {
			t.Errorf("ReadLink(%s) = %q, %v; want %q", name, got, err, want)
		}
		if info, err := fs.Lstat(m, name); err != nil || info.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat(%s) = %v, %v; want a symlink", name, info, err)
		}
	}
	// The folders of a name are resolved, its last element is not.
	if info, err := fs.Lstat(m, "deploy/up/deploy/base"); err != nil || info.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(deploy/up/deploy/base) = %v, %v; want a symlink", info, err)
	}
	if info, err := fs.Lstat(m, "deploy/base/cm.yaml"); err != nil || !info.Mode().IsRegular() {
		t.Errorf("Lstat(deploy/base/cm.yaml) = %v, %v; want a file", info, err)
	}
	for _, name := range []string{"base/cm.yaml", "deploy/none", "base/cm.yaml/x", "."} {
		if _, err := fs.ReadLink(m, name); err == nil {
			t.Errorf("ReadLink(%s) read a link", name)
		}
	}
}

// TestURLMessagesHideOpaqueCredentials: a chart URL whose credentials Go
// does not read as user information (no "//") is not quoted with them.
func TestURLMessagesHideOpaqueCredentials(t *testing.T) {
	f := newTestFetcher(t, Options{})
	for _, spec := range []capstanv1.ChartSource{
		{Repo: "admin:s3cret@repo.example.com/charts", Name: "demo"},
		{Repo: "https:admin:s3cret@repo.example.com/charts", Name: "demo"},
		{URL: "https:admin:s3cret@repo.example.com/demo-1.0.0.tgz"},
		{OCI: "admin:s3cret@registry.example.com/charts/demo", Version: "1.0.0"},
	} {
		_, err := f.Chart(context.Background(), spec, nil)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%+v: got %v, want a refusal without the password", spec, err)
		}
	}
}

// TestByteSize checks the one size formatter of the package's messages:
// MiB from one up, KiB for a whole number of them below, bytes otherwise.
func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{
		1000:                     "1000 bytes",
		1 << 10:                  "1 KiB",
		64 << 10:                 "64 KiB",
		64<<10 + 1:               "65537 bytes",
		1 << 20:                  "1 MiB",
		10<<20 + 5:               "10 MiB",
		MaxRefAdvertisementBytes: "16 MiB",
	} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
