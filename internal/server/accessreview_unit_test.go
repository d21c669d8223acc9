package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAccessReviewsAreBoundedPerUser: a signed-in user who loops the chart
// form of a namespace they may not create in causes a bounded number of
// SubjectAccessReviews, not one per request; the rest are 429 with
// Retry-After, so one caller cannot spend the reviewer's whole budget.
func TestAccessReviewsAreBoundedPerUser(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	now := time.Now()
	s, h := fakeReviewServer(t, &up, &now)
	var reviews atomic.Int32
	s.Reviewer.(interface {
		PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	}).PrependReactor("create", "subjectaccessreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		return true, &authorizationv1.SubjectAccessReview{}, nil
	})

	cookie := sessionCookieOf(postForm(h, "/signin", url.Values{"token": {"a-token"}}, nil))
	if cookie == nil {
		t.Fatal("signing in made no session")
	}
	throttled := 0
	for range 200 {
		req := httptest.NewRequest(http.MethodGet, "/new?chart=https://charts.example/c-1.0.0.tgz&namespace=a", nil)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.AddCookie(cookie)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusForbidden:
		case http.StatusTooManyRequests:
			throttled++
			if w.Header().Get("Retry-After") == "" {
				t.Fatal("a chart form refused for too many access reviews has no Retry-After")
			}
		default:
			t.Fatalf("a chart form in a namespace the user may not create in: %d; want 403 or 429", w.Code)
		}
	}
	if n := reviews.Load(); n > clientReviewBurst {
		t.Errorf("200 chart forms within an instant made %d access reviews; want at most %d", n, clientReviewBurst)
	}
	if throttled == 0 {
		t.Error("200 chart forms within an instant were never refused with 429")
	}
}

// TestTokenReviewsDoNotWaitBehindAccessReviews: while access reviews fill
// their client's rate limit, a TokenReview is still answered at once, since
// it has a client and a limit of its own.
func TestTokenReviewsDoNotWaitBehindAccessReviews(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			_ = json.NewEncoder(w).Encode(&authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{
				Authenticated: true, User: authenticationv1.UserInfo{Username: "alice"}}})
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			_ = json.NewEncoder(w).Encode(&authorizationv1.SubjectAccessReview{})
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	clientOf := func() kubernetes.Interface {
		c, err := kubernetes.NewForConfig(ReviewerConfig(&rest.Config{Host: api.URL}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s := &Server{Reviewer: clientOf(), AccessReviewer: clientOf()}
	s.Handler()

	// NOTE: the burst and then three seconds' worth of access reviews;
	// they queue in their limiter.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range reviewerBurst + 3*reviewerQPS {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = s.allowed(ctx, User{Name: "mallory"}, "create", client.ObjectKey{Namespace: "a"})
		}()
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if _, err := s.tokens.review(ctx, "a-token", "127.0.0.1"); err != nil {
		t.Fatalf("reviewing a token while access reviews fill their limit: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a TokenReview took %v while access reviews filled their limit; want it answered at once", d)
	}
	cancel()
	wg.Wait()
}
