package gitops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"capstan.dev/capstan/internal/netguard"
)

// TestTransient checks which failed reads of a repository pass by
// themselves, and which wait for a person.
func TestTransient(t *testing.T) {
	status := func(code int) error {
		return githttp.NewErr(&http.Response{StatusCode: code, Status: http.StatusText(code)})
	}
	dial := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://git.example.com/r.git/info/refs", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"a read that timed out", fmt.Errorf("cannot list the branches: %w", context.DeadlineExceeded), true},
		{"a connection refused", dial(syscall.ECONNREFUSED), true},
		{"a connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"a pack cut short", fmt.Errorf("cannot fetch: %w", io.ErrUnexpectedEOF), true},
		{"a name server that did not answer", &net.DNSError{Err: "server misbehaving", Name: "git.example.com", IsTemporary: true}, true},
		{"a name server timeout", &net.DNSError{Err: "i/o timeout", Name: "git.example.com", IsTimeout: true}, true},
		{"a 502", status(http.StatusBadGateway), true},
		{"a 503 with its cause kept", netguard.RedactError(fmt.Errorf("cannot list: %w", status(http.StatusServiceUnavailable)), "https://u:p@h/r"), true},
		{"a 429", status(http.StatusTooManyRequests), true},
		{"a 400", status(http.StatusBadRequest), false},
		{"the cause of a 502, unwrapped", plumbing.NewUnexpectedError(&githttp.Err{Response: &http.Response{StatusCode: http.StatusBadGateway}}).Err, true},
		{"a host that does not exist", &net.DNSError{Err: "no such host", Name: "gti.example.com", IsNotFound: true}, false},
		{"credentials refused", status(http.StatusUnauthorized), false},
		{"no access", status(http.StatusForbidden), false},
		{"no such repository", status(http.StatusNotFound), false},
		{"an empty repository", transport.ErrEmptyRemoteRepository, false},
		{"an address the guard refuses", dial(&netguard.RefusedError{Host: "metadata", Reason: netguard.ReasonLinkLocal}), false},
		{"the guard's refusal", fmt.Errorf("dial: %w", netguard.ErrRefused), false},
		{"a missing branch", errors.New(`the repository https://h/r has no branch "nope": create it or set spec.branch to an existing branch`), false},
		{"an error of no known kind", errors.New("something else"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
