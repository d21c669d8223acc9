// Package clientlimit bounds what one client of an HTTP endpoint may cost:
// a token bucket per client, the clients kept bounded in number, a client
// being the address its connection comes from. The API's token and access
// reviews and the git push webhook share it.
package clientlimit

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Of names the client of a request: the address its connection comes
// from, an IPv6 address by its /64, which one host holds whole; never a
// header it sends.
func Of(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String()
	}
	return ip.String()
}

// Limiter keeps a token bucket for each client, bounded in number.
type Limiter struct {
	rate    rate.Limit
	burst   int
	max     int
	mu      sync.Mutex
	clients map[string]*bucket
}

type bucket struct {
	limiter *rate.Limiter
	seen    time.Time
}

// New is a Limiter that lets each client cost burst at once and then
// perSecond, keeping at most maxClients.
func New(perSecond float64, burst, maxClients int) *Limiter {
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, max: maxClients, clients: map[string]*bucket{}}
}

// Allow takes one from the client's bucket at now; when it is empty, it
// answers false and how long until it holds one again.
func (l *Limiter) Allow(client string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.clients[client]
	if !ok {
		l.makeRoom(now)
		b = &bucket{limiter: rate.NewLimiter(l.rate, l.burst)}
		l.clients[client] = b
	}
	b.seen = now
	r := b.limiter.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// makeRoom drops clients until one more fits: first those unused for as
// long as their bucket takes to fill, which are full again, the same as
// new ones; then any.
func (l *Limiter) makeRoom(now time.Time) {
	if len(l.clients) < l.max {
		return
	}
	full := time.Duration(float64(l.burst) / float64(l.rate) * float64(time.Second))
	for k, b := range l.clients {
		if now.Sub(b.seen) >= full {
			delete(l.clients, k)
		}
	}
	for k := range l.clients {
		if len(l.clients) < l.max {
			return
		}
		delete(l.clients, k)
	}
}
