package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// clientReviewBurst is the burst of TokenReviews one client may cost
// (internal/server/auth.go).
const clientReviewBurst = 25

// clientReviewRate is how many reviews a second refill it, as the server's.
const clientReviewRate = 5

// randomToken is a token the API server never issued.
func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "random-" + hex.EncodeToString(b)
}

// from is an HTTP client whose connections come from the loopback address
// ip, a client of its own to the server.
func from(ip string) *http.Client {
	tr := apiClient().Transport.(*http.Transport).Clone()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr.DialContext = dialer.DialContext
	return &http.Client{Transport: tr, Timeout: apiClient().Timeout}
}

func getAs(t *testing.T, c *http.Client, url, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// TestTokenReviewsAreBoundedPerClient sends a new random token with each
// request from one client, as a flood of the controller's TokenReviews
// would: past the client's burst the server answers 429 with a
// Retry-After, and the API server sees no more reviews; a valid token
// from another address is still reviewed and served.
func TestTokenReviewsAreBoundedPerClient(t *testing.T) {
	base := serve(t, newServer())
	ns := namespace(t)
	valid := user(t, ns, "reader", addonRule("list"))
	flooder := from("127.0.0.1")

	before := tokenReviews(t)
	refused := 0
	for range clientReviewBurst + 20 {
		code, header, body := getAs(t, flooder, base+"/api/v1/addons", randomToken(t))
		if code == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(header.Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("a 429 with Retry-After %q; want whole seconds", header.Get("Retry-After"))
			}
			break
		}
		if code != http.StatusUnauthorized {
			t.Fatalf("a random token: %d %s; want 401 until the bound, then 429", code, body)
		}
		refused++
	}
	if refused < clientReviewBurst || refused >= clientReviewBurst+20 {
		t.Fatalf("%d random tokens were reviewed before a 429; want the burst of %d and a few refilled at most", refused, clientReviewBurst)
	}
	reviewed := tokenReviews(t)
	if n := reviewed - before; n != refused {
		t.Errorf("%d random tokens reviewed cost %d TokenReviews; want one each", refused, n)
	}
	// NOTE: the bucket refills clientReviewRate a second, so a slow
	// machine may let a review or two through among these five: as many
	// as the time they took refilled, and no more.
	past := time.Now()
	let := 0
	for range 5 {
		switch code, _, body := getAs(t, flooder, base+"/api/v1/addons", randomToken(t)); code {
		case http.StatusTooManyRequests:
		case http.StatusUnauthorized:
			let++
		default:
			t.Errorf("a random token past the bound: %d %s; want 429", code, body)
		}
	}
	refilled := int(time.Since(past).Seconds()*clientReviewRate) + 1
	if let > refilled {
		t.Errorf("%d of 5 random tokens past the bound were reviewed; want at most the %d refilled meanwhile", let, refilled)
	}
	if n := tokenReviews(t) - reviewed; n > refilled {
		t.Errorf("5 random tokens past the bound cost %d TokenReviews; want at most the %d refilled meanwhile", n, refilled)
	}

	code, _, body := getAs(t, from("127.0.0.2"), base+"/api/v1/namespaces/"+ns+"/addons", valid)
	expect(t, "a valid token from another address during the flood", code, body, http.StatusOK)
}

// TestOneReviewPerToken sends one new token in many requests at once: they
// wait for one TokenReview.
func TestOneReviewPerToken(t *testing.T) {
	base := serve(t, newServer())
	ns := namespace(t)
	token := user(t, ns, "reader", addonRule("list"))
	before := tokenReviews(t)
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/api/v1/namespaces/"+ns+"/addons", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := apiClient().Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("request %d: %d; want 200", i, code)
		}
	}
	if n := tokenReviews(t) - before; n != 1 {
		t.Errorf("10 requests at once with one new token cost %d TokenReviews; want 1", n)
	}
}
