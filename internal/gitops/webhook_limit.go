package gitops

import (
	"math"
	"net/http"
	"strconv"
	"time"
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

// tooManyWebhooks answers 429 with a Retry-After of d, in whole seconds.
func tooManyWebhooks(w http.ResponseWriter, why string, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
	http.Error(w, "too many push webhooks: "+why+"; nothing was queued: deliver the push again later", http.StatusTooManyRequests)
}
