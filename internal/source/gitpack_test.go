package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// packRepo serves a repository whose one commit holds files, from a
// loopback git server, and returns its bare repository's folder too.
func packRepo(t *testing.T, files map[string][]byte) (*gitServer, string, string) {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, work, "init", "-q", "-b", "main")
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, work, "add", ".")
	run(t, work, "commit", "-q", "-m", "files")
	bare := filepath.Join(root, "repo.git")
	run(t, root, "clone", "-q", "--bare", work, bare)
	run(t, bare, "update-server-info")
	srv := newGitServer(t, root)
	return srv, srv.URL + "/repo.git", bare
}

// TestGitPackBounds: a push of a few KiB that unpacks to far more than the
// limits (a file of zeros) is refused before it is unpacked into memory;
// so are two files that fit alone but not together, the second sent as a
// delta of the first, whose size only the delta's header tells; and a
// repository within the limits is read as before.
func TestGitPackBounds(t *testing.T) {
	const limit = 4 << 20
	f := func(srv *gitServer) *Fetcher {
		return newTestFetcher(t, Options{Limits: Limits{MaxUncompressedBytes: limit}}, srv.Server)
	}

	zeros := bytes.Repeat([]byte{0}, 64<<20)
	srv, url, _ := packRepo(t, map[string][]byte{"zeros.bin": zeros, "cm.yaml": []byte("kind: ConfigMap\n")})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := f(srv).Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrGitTooLarge) {
		t.Fatalf("a pack of 64 MiB of zeros: %v; want it refused for its size", err)
	}
	t.Log(err)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Fatalf("refusing the pack allocated %d MiB: it was unpacked", grew>>20)
	}

	// Two files of 9 MiB that differ in one byte: the pack holds one, and
	// the other as a delta of a few bytes; together they are over the
	// fetch's bound (the tree's limit, times historyFactor for history).
	noise := make([]byte, 9<<20)
	for i := range noise {
		noise[i] = byte(i*7 + i/4096)
	}
	other := bytes.Clone(noise)
	other[len(other)/2]++
	srv, url, _ = packRepo(t, map[string][]byte{"a.bin": noise, "b.bin": other})
	if _, err := f(srv).Git(context.Background(), capstanv1.GitSource{URL: url}, nil); !errors.Is(err, ErrGitTooLarge) {
		t.Fatalf("two files of 9 MiB, one a delta: %v; want it refused for its size", err)
	}

	small := noise[:3<<20]
	srv, url, _ = packRepo(t, map[string][]byte{"a.bin": small})
	tree, err := f(srv).Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
	if err != nil {
		t.Fatalf("one file of 3 MiB, within the limit: %v", err)
	}
	if got, err := fs.ReadFile(tree.FS, "a.bin"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("a.bin read back: %d bytes, %v", len(got), err)
	}
}

// TestGitNoFallbackAfterCapOrRetryAfter: over https, a pack over
// --fetch-max-response-bytes and a server's 429 end the fetch at its first
// step, as over ssh: the fallback fetches would only download the same
// bytes again, or come back at once to a server that asked for a wait.
func TestGitNoFallbackAfterCapOrRetryAfter(t *testing.T) {
	noise := make([]byte, 512<<10)
	for i := range noise {
		noise[i] = byte(i*7 + i/251 + i*i>>9)
	}
	srv, url, _ := packRepo(t, map[string][]byte{"a.bin": noise})
	f := newTestFetcher(t, Options{Guard: netguard.Config{MaxResponseBytes: 64 << 10}}, srv.Server)
	_, err := f.Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
	if !errors.As(err, new(*netguard.TooLargeError)) {
		t.Fatalf("a pack over the response cap: %v; want a TooLargeError", err)
	}
	t.Log(err)
	srv.mu.Lock()
	uploads := srv.uploads
	srv.uploads, srv.busy = 0, true
	srv.mu.Unlock()
	if uploads != 1 {
		t.Errorf("a pack over the response cap was asked for %d times, want once", uploads)
	}

	f = newTestFetcher(t, Options{}, srv.Server)
	_, err = f.Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
	var ra *RetryAfterError
	if !errors.As(err, &ra) || ra.After != time.Minute {
		t.Fatalf("a server that answers 429: %v; want a RetryAfterError of a minute", err)
	}
	t.Log(err)
	srv.mu.Lock()
	uploads = srv.uploads
	srv.mu.Unlock()
	if uploads != 1 {
		t.Errorf("a server that answered 429 was asked %d times, want once", uploads)
	}
}

// TestGitTreeNamesWithControlCharacters: go-git's tree walker refuses a
// commit with a C0 or DEL character in a file's name, quoting it. Other
// names are read like any: the whole commit is walked, and a C1 character
// or bytes that are not UTF-8 in a file of another team's folder must not
// stop every add-on of the repository; the CLI escapes whatever name it
// prints.
func TestGitTreeNamesWithControlCharacters(t *testing.T) {
	for name, refused := range map[string]bool{
		"a\n---\nkind: Secret\n.yaml": true,
		"\x1b[2Jcm.yaml":              true,
		"csi\u009b2Jcm.yaml":          false,
		"\xffcm.yaml":                 false,
		"caf\u00e9.yaml":              false,
	} {
		srv, url, _ := packRepo(t, map[string][]byte{name: []byte("kind: ConfigMap\n")})
		f := newTestFetcher(t, Options{}, srv.Server)
		_, err := f.Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
		switch {
		case !refused && err != nil:
			t.Errorf("%q: %v", name, err)
		case refused && (err == nil || !strings.Contains(err.Error(), "control character") || !strings.Contains(err.Error(), fmt.Sprintf("%q", name))):
			t.Errorf("%q: got %v; want it refused, the name quoted", name, err)
		}
	}
}

// TestPacksCountTogether: the packs of one storage (a shallow fetch, then
// the whole history) are held to its limits together.
func TestPacksCountTogether(t *testing.T) {
	files := map[string][]byte{}
	for i := range 3 {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(i*31 + j*7 + j/4096)
		}
		files[string(rune('a'+i))+".bin"] = b
	}
	_, _, bare := packRepo(t, files)
	run(t, bare, "repack", "-a", "-d", "-q")
	packs, err := filepath.Glob(filepath.Join(bare, "objects", "pack", "*.pack"))
	if err != nil || len(packs) != 1 {
		t.Fatalf("the packs of the repository: %v, %v", packs, err)
	}
	pack, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	s := GitStorage(Limits{MaxUncompressedBytes: 5 << 20, MaxFiles: 100})
	for i, want := range []bool{true, false} {
		w, _ := s.PackfileWriter()
		_, werr := w.Write(pack)
		err := errors.Join(werr, w.Close())
		if (err == nil) != want {
			t.Fatalf("pack %d: %v; want taken %v", i+1, err, want)
		}
	}
}

// TestDeltaTargetSize reads a delta's header.
func TestDeltaTargetSize(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want int64
		ok   bool
	}{
		{[]byte{0x05, 0x07}, 7, true},
		{[]byte{0x80, 0x01, 0x80, 0x80, 0x02}, 2 << 14, true},
		{[]byte{0x05}, 0, false},
		{[]byte{0x05, 0x80}, 0, false},
		{bytes.Repeat([]byte{0xff}, 12), 0, false},
	} {
		got, err := deltaTargetSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%x: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
