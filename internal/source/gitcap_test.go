package source

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/net/proxy"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// refsServer is a smart-http git server on loopback that answers the ref
// advertisement with refs branches, up to stopAt bytes, and counts what
// it wrote and whether it got to the end.
type refsServer struct {
	*httptest.Server
	written  atomic.Int64
	finished atomic.Bool
}

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func newRefsServer(t *testing.T, refs int, stopAt int64) *refsServer {
	t.Helper()
	s := &refsServer{}
	const hash = "0123456789abcdef0123456789abcdef01234567"
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info/refs") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		bw := bufio.NewWriterSize(w, 64<<10)
		write := func(s string) bool {
			n, err := bw.WriteString(s)
			return err == nil && n == len(s)
		}
		write(pkt("# service=git-upload-pack\n") + "0000")
		write(pkt(hash + " HEAD\x00multi_ack side-band-64k ofs-delta symref=HEAD:refs/heads/main\n"))
		write(pkt(hash + " refs/heads/main\n"))
		var sent int64
		for i := 0; i < refs && sent < stopAt; i++ {
			line := pkt(fmt.Sprintf("%s refs/heads/branch-%d\n", hash, i))
			if !write(line) {
				return
			}
			sent += int64(len(line))
			s.written.Store(sent)
		}
		write("0000")
		if bw.Flush() == nil {
			s.finished.Store(true)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// TestGitRefAdvertisementIsBounded: a server whose list of refs never
// ends is read up to MaxRefAdvertisementBytes, not to the guard's cap
// on every response, and one that lists more than MaxGitRefs refs is
// refused; both say what to do.
func TestGitRefAdvertisementIsBounded(t *testing.T) {
	ctx := context.Background()
	t.Run("endless", func(t *testing.T) {
		srv := newRefsServer(t, 1<<30, 2*MaxRefAdvertisementBytes)
		f := newTestFetcher(t, Options{}, srv.Server)
		_, err := f.Git(ctx, capstanv1.GitSource{URL: srv.URL + "/repo.git"}, nil)
		if !errors.Is(err, ErrTooManyRefs) || !strings.Contains(err.Error(), "list of refs is larger than 16 MiB") || !strings.Contains(err.Error(), "delete stale branches") {
			t.Fatalf("want the refs' byte bound, got %v", err)
		}
		if srv.finished.Load() {
			t.Fatalf("the whole endless list (%d bytes) was read", srv.written.Load())
		}
	})
	t.Run("too many", func(t *testing.T) {
		srv := newRefsServer(t, MaxGitRefs+1, MaxRefAdvertisementBytes/2)
		f := newTestFetcher(t, Options{}, srv.Server)
		_, err := f.Git(ctx, capstanv1.GitSource{URL: srv.URL + "/repo.git"}, nil)
		if !srv.finished.Load() {
			t.Fatalf("the list should fit in the byte bound; the server wrote %d bytes", srv.written.Load())
		}
		if !errors.Is(err, ErrTooManyRefs) || !strings.Contains(err.Error(), fmt.Sprintf("it lists %d refs", MaxGitRefs+3)) {
			t.Fatalf("want the refs' count bound, got %v", err)
		}
	})
}

// TestCappedConn: an ssh connection reads up to its limit, and past it
// only once raised; going over says which bound it broke.
func TestCappedConn(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	go func() {
		chunk := make([]byte, 1024)
		for {
			if _, err := server.Write(chunk); err != nil {
				return
			}
		}
	}()
	c := newCappedConn(client, 4096)
	defer c.Close()
	readAll := func(n int64) (int64, error) {
		got, err := io.CopyN(io.Discard, c, n)
		return got, err
	}
	if n, err := readAll(4096); err != nil || n != 4096 {
		t.Fatalf("within the limit: read %d, %v", n, err)
	}
	_, err := readAll(1)
	if !errors.Is(err, ErrTooManyRefs) || !c.over.Load() {
		t.Fatalf("over the refs' limit: want ErrTooManyRefs, got %v", err)
	}

	c = newCappedConn(client, 1024)
	c.raise(2048)
	if n, err := readAll(3072); err != nil || n != 3072 {
		t.Fatalf("within the raised limit: read %d, %v", n, err)
	}
	_, err = readAll(1)
	if !errors.Is(err, ErrGitTooLarge) || !strings.Contains(err.Error(), "--fetch-max-response-bytes") {
		t.Fatalf("over the pack's limit: want ErrGitTooLarge, got %v", err)
	}
}

// TestSSHDialsThroughTheCappedConn: the endpoint sshGuard hands go-git
// names a proxy that dials the pinned address with a capped connection,
// so go-git's ssh dial (golang.org/x/net/proxy) reads through the cap.
func TestSSHDialsThroughTheCappedConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(make([]byte, MaxRefAdvertisementBytes+sshOverheadBytes+1))
	}()
	g, err := netguard.New(netguard.Config{Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &sshGuard{guard: g}
	port := ln.Addr().(*net.TCPAddr).Port
	pinned, d, err := s.dial(&transport.Endpoint{Protocol: "ssh", Host: "127.0.0.1", Port: port, Path: "/repo.git"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.release()
	u, err := pinned.Proxy.FullURL()
	if err != nil {
		t.Fatal(err)
	}
	dialer, err := proxy.FromURL(u, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialer.(proxy.ContextDialer).DialContext(ctx, "tcp", fmt.Sprintf("%s:%d", pinned.Host, pinned.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n, err := io.Copy(io.Discard, conn)
	if !errors.Is(err, ErrTooManyRefs) || n != MaxRefAdvertisementBytes+sshOverheadBytes {
		t.Fatalf("read %d bytes, %v; want the refs' cap", n, err)
	}
	if !errors.Is(d.explain(io.ErrUnexpectedEOF), ErrTooManyRefs) {
		t.Fatal("a truncated answer after the cap is not explained by it")
	}
}

// sshRefsServer is an ssh server on loopback that takes any key and
// answers every command with a list of refs that never ends, counting
// what it wrote.
func sshRefsServer(t *testing.T) (addr string, hostKey ssh.PublicKey, written *atomic.Int64) {
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	written = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					ch, chReqs, err := nc.Accept()
					if err != nil {
						return
					}
					go func() {
						for r := range chReqs {
							_ = r.Reply(r.Type == "exec", nil)
						}
					}()
					go func() {
						defer ch.Close()
						const hash = "0123456789abcdef0123456789abcdef01234567"
						bw := bufio.NewWriterSize(ch, 64<<10)
						_, _ = bw.WriteString(pkt(hash + " HEAD\x00multi_ack side-band-64k ofs-delta symref=HEAD:refs/heads/main\n"))
						for i := 0; written.Load() < 2*MaxRefAdvertisementBytes; i++ {
							line := pkt(fmt.Sprintf("%s refs/heads/branch-%d\n", hash, i))
							if _, err := bw.WriteString(line); err != nil {
								return
							}
							written.Add(int64(len(line)))
						}
						_, _ = bw.WriteString("0000")
						_ = bw.Flush()
					}()
				}
			}()
		}
	}()
	pub, err := ssh.NewPublicKey(hostPriv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return ln.Addr().String(), pub, written
}

// TestGitRefAdvertisementIsBoundedOverSSH: over ssh, where no http body
// cap applies, a list of refs that never ends is cut at the refs' bound,
// and the error says so rather than that the answer was truncated.
func TestGitRefAdvertisementIsBoundedOverSSH(t *testing.T) {
	addr, hostKey, written := sshRefsServer(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	creds := &Credentials{Identity: pem.EncodeToMemory(block), KnownHosts: []byte(knownhosts.Line([]string{addr}, hostKey) + "\n")}
	f := newTestFetcher(t, Options{})
	_, err = f.Git(context.Background(), capstanv1.GitSource{URL: "ssh://git@" + addr + "/repo.git"}, creds)
	if !errors.Is(err, ErrTooManyRefs) || !strings.Contains(err.Error(), "over ssh, its list of refs is larger than 16 MiB") {
		t.Fatalf("want the refs' byte bound over ssh, got %v", err)
	}
	if n := written.Load(); n >= 2*MaxRefAdvertisementBytes {
		t.Fatalf("the server wrote its whole list, %d bytes", n)
	}
}
