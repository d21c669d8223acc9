package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestSignInFromAnotherSite signs in with a valid token from another
// site's page, as a browser reports it: refused, and no session is made,
// so that no page can sign a browser in as someone else.
func TestSignInFromAnotherSite(t *testing.T) {
	ns := namespace(t)
	token := user(t, ns, "person", addonRule("get"))
	body, _ := json.Marshal(map[string]string{"token": token})
	form := url.Values{"token": {token}}.Encode()
	for _, tc := range []struct {
		what    string
		headers map[string]string
		want    int
	}{
		{"an Origin of another site", map[string]string{"Origin": "https://elsewhere.example"}, http.StatusForbidden},
		{"an opaque Origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"Sec-Fetch-Site same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": api.URL}, http.StatusForbidden},
		{"the server's own Origin", map[string]string{"Origin": api.URL}, http.StatusOK},
		// A proxy that rewrites Host: the browser's word decides.
		{"same-origin behind a proxy", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "https://capstan.example.com"}, http.StatusOK},
	} {
		for _, page := range []bool{false, true} {
			path, payload, contentType := "/api/v1/session", string(body), "application/json"
			if page {
				path, payload, contentType = "/signin", form, "application/x-www-form-urlencoded"
			}
			req, err := http.NewRequest(http.MethodPost, api.URL+path, strings.NewReader(payload))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", contentType)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			// NOTE: no redirect is followed: a sign-in's own answer is checked.
			resp, err := (&http.Client{Transport: apiClient().Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := tc.want
			if page && want == http.StatusOK {
				want = http.StatusSeeOther
			}
			signedIn := false
			for _, c := range resp.Cookies() {
				signedIn = signedIn || (c.Name == sessionCookieName && c.Value != "")
			}
			if resp.StatusCode != want || signedIn != (want != http.StatusForbidden) {
				t.Errorf("POST %s with %s: %d, session cookie %v; want %d", path, tc.what, resp.StatusCode, signedIn, want)
			}
		}
	}
}

// TestSignInWithNoToken signs the page in with an empty token: refused at
// once, without asking the API server about it.
func TestSignInWithNoToken(t *testing.T) {
	reviews := func() int { return tokenReviews(t) }
	before := reviews()
	resp, err := apiClient().PostForm(api.URL+"/signin", url.Values{"token": {"  "}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a sign-in with no token: %d; want 401", resp.StatusCode)
	}
	if n := reviews() - before; n != 0 {
		t.Errorf("a sign-in with no token cost %d TokenReviews; want none", n)
	}
}
