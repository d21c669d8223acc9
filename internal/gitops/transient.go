package gitops

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"capstan.dev/capstan/internal/netguard"
)

// Transient reports whether a failed read of a repository is one that
// passes by itself, and that the syncer's backoff retries without anyone:
// a read that timed out, a connection refused, reset or cut short, a name
// server that did not answer, or a server that answered 408, 429 or 5xx.
// Anything else (credentials, a repository, branch or host that does not
// exist, an address the fetch guard refuses, a certificate, a repository
// too large) waits for a person, and so does an error this cannot place.
func Transient(err error) bool {
	var refused *netguard.RefusedError
	if err == nil || errors.Is(err, netguard.ErrRefused) || errors.As(err, &refused) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		// NOTE: a name that does not exist is a typo to fix; one the
		// name server did not answer for is a hiccup.
		return !dns.IsNotFound
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "read" || op.Op == "write") {
		return true
	}
	// NOTE: go-git reports an unexpected HTTP status as an
	// UnexpectedError, which does not unwrap to its cause.
	var he *githttp.Err
	var ue *plumbing.UnexpectedError
	if errors.As(err, &he) || (errors.As(err, &ue) && errors.As(ue.Err, &he)) {
		code := he.StatusCode()
		return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
	}
	return false
}
