package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	addonvalues "capstan.dev/capstan/internal/values"
)

// TestSecretInputFilesAreKeptByteForByte: a --secret-input file is taken
// as it is, except that a file of one line loses its one line ending, so
// that echo pw > file gives pw and a key or PEM bundle keeps its last
// newline.
func TestSecretInputFilesAreKeptByteForByte(t *testing.T) {
	const pemBlock = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	for _, tc := range []struct{ content, want string }{
		{"pw\n", "pw"},
		{"pw\r\n", "pw"},
		{"pw", "pw"},
		{"", ""},
		{"\n", ""},
		{"pw\n\n", "pw\n\n"},
		{"a\nb", "a\nb"},
		{pemBlock, pemBlock},
		{"pw\r", "pw\r"},
		{"\x00\x01\x0a\x0d\x0a", "\x00\x01\x0a\x0d\x0a"},
	} {
		file := filepath.Join(t.TempDir(), "input")
		if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		v := &valuesFlags{secretInputs: []string{"auth.password=@" + file}}
		_, inputs, err := v.read()
		if err != nil || inputs["auth.password"] != tc.want {
			t.Errorf("a file of %q: %q, %v; want %q", tc.content, inputs["auth.password"], err, tc.want)
		}
	}
}

// TestSecretInputFilesAreBounded: a --secret-input file is read only up
// to what a Secret holds, so /dev/zero cannot grow the command's memory
// without end, and a directory is no file; each is refused before the
// cluster is called (the kubeconfig names a loopback port where nothing
// listens).
func TestSecretInputFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), addonvalues.MaxDocumentBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "half")
	if err := os.WriteFile(half, bytes.Repeat([]byte("x"), addonvalues.MaxDocumentBytes/2+1), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := closedKubeconfig(t)
	for _, tc := range []struct {
		inputs []string
		want   string
	}{
		{[]string{"a=@" + big}, "--secret-input a=@...: it holds more than 1048576 bytes"},
		{[]string{"a=@" + half, "b=@" + half}, "the secret inputs are 1048578 bytes together"},
		{[]string{"a=@/dev/zero"}, "--secret-input a=@...: it holds more than 1048576 bytes"},
		{[]string{"a=@" + dir}, "--secret-input a=@...: it is a directory"},
	} {
		args := []string{"edit", "blog", "--kubeconfig", kubeconfig}
		for _, in := range tc.inputs {
			args = append(args, "--secret-input", in)
		}
		done := make(chan error, 1)
		go func() {
			_, err := runAddon(t, "", args...)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), dir) {
				t.Errorf("%v: %v; want %q, before the cluster is called, and no file name", tc.inputs, err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%v: still reading after 10s; want it refused at once", tc.inputs)
		}
	}
}

// TestSecretInputFilesMayBePipes: a --secret-input file may be a pipe,
// as @/dev/stdin and @<(command) give one (a named pipe, or /dev/fd/N),
// so that a secret touches neither the command line nor the disk; what
// the pipe gives until it is closed is the value.
func TestSecretInputFilesMayBePipes(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		_, _ = f.WriteString("from-a-fifo\n")
		_ = f.Close()
	}()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	go func() {
		_, _ = w.WriteString("from-a-pipe")
		_ = w.Close()
	}()
	fd := fmt.Sprintf("/dev/fd/%d", r.Fd())

	done := make(chan struct{})
	go func() {
		defer close(done)
		v := &valuesFlags{secretInputs: []string{"a=@" + fifo, "b=@" + fd}}
		_, inputs, err := v.read()
		if err != nil || inputs["a"] != "from-a-fifo" || inputs["b"] != "from-a-pipe" {
			t.Errorf("a named pipe and %s: %q, %q, %v; want from-a-fifo and from-a-pipe", fd, inputs["a"], inputs["b"], err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still reading the pipes after 10s")
	}
}

// TestSecretInputFromAnEmptyPipeIsRefused: a pipe that gives nothing was
// most likely read already (-f - before @/dev/stdin), so its empty secret
// is refused rather than stored; an empty regular file stays an empty
// secret, as helm --set-file takes it.
func TestSecretInputFromAnEmptyPipeIsRefused(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	_ = w.Close()
	v := &valuesFlags{secretInputs: []string{fmt.Sprintf("a=@/dev/fd/%d", r.Fd())}}
	if _, _, err := v.read(); err == nil || !strings.Contains(err.Error(), "gave nothing") {
		t.Errorf("a secret input from an empty pipe: %v; want it refused, saying the pipe gave nothing", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	v = &valuesFlags{secretInputs: []string{"a=@" + empty}}
	if _, inputs, err := v.read(); err != nil || inputs["a"] != "" {
		t.Errorf("a secret input from an empty file: %q, %v; want an empty secret", inputs["a"], err)
	}
}
