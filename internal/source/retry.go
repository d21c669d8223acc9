package source

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A chart repository, registry or git server that is overloaded answers
// 429 Too Many Requests, or 503 with a Retry-After header. Coming back at
// once, or on the controller's own backoff, would hammer it with every
// add-on that uses it; so the answer becomes a RetryAfterError, and the
// controller waits as long as the server asked before it tries again.

// MaxRetryAfter bounds how long a server may ask Capstan to wait.
const MaxRetryAfter = 10 * time.Minute

// RetryAfterError is a server's answer to come back later.
type RetryAfterError struct {
	Status int
	// After is how long the server asked to wait, at most MaxRetryAfter;
	// zero when it did not say.
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.After > 0 {
		msg += fmt.Sprintf(": the server asks to retry in %s, and Capstan waits that long", e.After)
	}
	return msg
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date,
// bounded to MaxRetryAfter; zero when absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(h, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		d = time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(h); err == nil {
		d = at.Sub(now).Round(time.Second)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// retryAfterTransport turns 429, and 503 with Retry-After, into a
// RetryAfterError, for every client of the Fetcher: chart repositories,
// OCI registries and git.
type retryAfterTransport struct {
	next http.RoundTripper
	now  func() time.Time
}

func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	after := retryAfter(resp.Header.Get("Retry-After"), t.now())
	if resp.StatusCode == http.StatusServiceUnavailable && after == 0 {
		return resp, nil
	}
	resp.Body.Close()
	return nil, &RetryAfterError{Status: resp.StatusCode, After: after}
}
