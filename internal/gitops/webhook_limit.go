package gitops

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The bounds of the push webhook, which anyone who can reach the controller
// may call. Each request that carries a signature header costs a read of the
// body and one or two reads from the API server, made as the controller past
// its cache; these bounds keep a flood from filling the controller's memory
// or its share of the API server.
const (
	// maxWebhooksInFlight is how many pushes are checked at once; one
	// more is answered 429 at once. A push is checked in milliseconds.
	maxWebhooksInFlight = 8
	// webhookBodyTimeout bounds the read of a push's body, which comes
	// before a check takes one of maxWebhooksInFlight. A git host sends
	// its at most MaxWebhookBody in well under a second.
	webhookBodyTimeout = 5 * time.Second
	// maxWebhookBodyReads is how many bodies are read at once, each up to
	// MaxWebhookBody: a bound on the memory they take however many
	// addresses send them, apart from the checks' slots, so that slow
	// senders cannot hold those. One more is answered 429 at once.
	maxWebhookBodyReads = 32
	// webhookClientRate and webhookClientBurst bound one client (an
	// address; an IPv6 address by its /64). A git host delivers from a
	// few addresses for all its repositories, and an ingress sends every
	// push from its own, so the burst allows many repositories at once.
	webhookClientRate  = 10
	webhookClientBurst = 40
	// maxWebhookClients bounds the clients whose buckets are kept.
	maxWebhookClients = 1024
)

// webhookClients keeps a token bucket for each client.
type webhookClients struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// allow takes one push from the client's bucket at now; when it is empty,
// it answers false and how long until it holds one again.
func (c *webhookClients) allow(client string, now time.Time) (bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buckets == nil {
		c.buckets = map[string]*rate.Limiter{}
	}
	b, ok := c.buckets[client]
	if !ok {
		if len(c.buckets) >= maxWebhookClients {
			// NOTE: a full bucket is the same as a new one, so those go
			// first; then any, as the in-flight bound still holds.
			for k, l := range c.buckets {
				if l.TokensAt(now) >= webhookClientBurst {
					delete(c.buckets, k)
				}
			}
			for k := range c.buckets {
				if len(c.buckets) < maxWebhookClients {
					break
				}
				delete(c.buckets, k)
			}
		}
		b = rate.NewLimiter(webhookClientRate, webhookClientBurst)
		c.buckets[client] = b
	}
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); !r.OK() || d > 0 {
		r.CancelAt(now)
		return false, max(d, time.Second)
	}
	return true, 0
}

// webhookClientOf names the client of a request: the address its
// connection comes from, an IPv6 address by its /64, which one host holds
// whole.
func webhookClientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() == nil:
		return ip.Mask(net.CIDRMask(64, 128)).String()
	}
	return ip.String()
}

// tooManyWebhooks answers 429 with a Retry-After of d, in whole seconds.
func tooManyWebhooks(w http.ResponseWriter, why string, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
	http.Error(w, "too many push webhooks: "+why+"; nothing was queued: deliver the push again later", http.StatusTooManyRequests)
}
