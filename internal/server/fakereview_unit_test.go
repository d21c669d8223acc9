package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fakeReviewServer is a Server whose Reviewer is a fake clientset: its
// TokenReviews accept every token while up is true and fail, as an API
// server that does not answer, once it is false. Its clock is *now.
func fakeReviewServer(t *testing.T, up *atomic.Bool, now *time.Time) (*Server, http.Handler) {
	t.Helper()
	reviewer := fake.NewClientset()
	reviewer.PrependReactor("create", "tokenreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !up.Load() {
			return true, nil, errors.New("the API server is slow to answer")
		}
		return true, &authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{Authenticated: true,
			User: authenticationv1.UserInfo{Username: "alice"}}}, nil
	})
	s := &Server{Reviewer: reviewer, Now: func() time.Time { return *now }}
	return s, s.Handler()
}

// postForm sends a form to h as a browser on the page would, with the
// cookie when it is not nil, and returns the answer.
func postForm(h http.Handler, path string, form url.Values, cookie *http.Cookie) *http.Response {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

// sessionCookieOf is the session cookie an answer sets, or nil.
func sessionCookieOf(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	return nil
}
