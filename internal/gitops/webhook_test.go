package gitops

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestVerify(t *testing.T) {
	const body = `{"ref":"refs/heads/main"}`
	good := sign("s3cret", body)
	bad := sign("other", body)
	cases := []struct {
		name    string
		headers map[string]string
		secret  string
		ok      bool
	}{
		{"github good", map[string]string{"X-Hub-Signature-256": "sha256=" + good}, "s3cret", true},
		{"github bad", map[string]string{"X-Hub-Signature-256": "sha256=" + bad}, "s3cret", false},
		{"github without prefix", map[string]string{"X-Hub-Signature-256": good}, "s3cret", false},
		{"github not hex", map[string]string{"X-Hub-Signature-256": "sha256=zz"}, "s3cret", false},
		{"gitea good", map[string]string{"X-Gitea-Signature": good}, "s3cret", true},
		{"gitea bad", map[string]string{"X-Gitea-Signature": bad}, "s3cret", false},
		{"forgejo good", map[string]string{"X-Forgejo-Signature": good}, "s3cret", true},
		{"gitlab good", map[string]string{"X-Gitlab-Token": "s3cret"}, "s3cret", true},
		{"gitlab bad", map[string]string{"X-Gitlab-Token": "s3cre"}, "s3cret", false},
		{"no signature", map[string]string{}, "s3cret", false},
		{"no secret configured", map[string]string{"X-Gitlab-Token": ""}, "", false},
		{"no secret but a signature of the empty key", map[string]string{"X-Hub-Signature-256": "sha256=" + sign("", body)}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			err := Verify(h, []byte(body), []byte(tc.secret))
			if (err == nil) != tc.ok {
				t.Fatalf("Verify = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && strings.Contains(err.Error(), tc.secret) && tc.secret != "" {
				t.Fatalf("the error carries the secret: %v", err)
			}
		})
	}
}

func TestParsePush(t *testing.T) {
	cases := []struct{ body, want string }{
		{`{"ref":"refs/heads/main","before":"0","commits":[]}`, "refs/heads/main"},
		{`{"object_kind":"push","ref":"refs/heads/dev"}`, "refs/heads/dev"},
		{`{"ref":"refs/tags/v1"}`, "refs/tags/v1"},
		{`{"zen":"ping"}`, ""},
		{`[1,2]`, ""},
		{`not json`, ""},
	}
	for _, tc := range cases {
		got, err := ParsePush([]byte(tc.body))
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("ParsePush(%s) = %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
}

// FuzzParsePush feeds any body to the push event parser: it returns a ref
// under refs/ or an error, never both.
func FuzzParsePush(f *testing.F) {
	f.Add([]byte(`{"ref":"refs/heads/main"}`))
	f.Add([]byte(`{"ref":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ref, err := ParsePush(body)
		if err == nil && !strings.HasPrefix(ref, "refs/") {
			t.Fatalf("accepted ref %q", ref)
		}
		if err != nil && ref != "" {
			t.Fatalf("ref %q with error %v", ref, err)
		}
	})
}

// FuzzVerify feeds any signature header, body and secret to the webhook
// check. It accepts a request only when the header holds the body's
// HMAC-SHA256 under the secret (or, for GitLab, the secret itself).
func FuzzVerify(f *testing.F) {
	body := []byte(`{"ref":"refs/heads/main"}`)
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(body)
	sig := hex.EncodeToString(mac.Sum(nil))
	headers := []string{"X-Hub-Signature-256", "X-Gitea-Signature", "X-Forgejo-Signature", "X-Gitlab-Token", "X-Other"}
	for i := range headers {
		v := sig
		switch i {
		case 0:
			v = "sha256=" + sig
		case 3:
			v = "s3cret"
		}
		f.Add(uint8(i), v, body, []byte("s3cret"))
		f.Add(uint8(i), v, body, []byte{})
		f.Add(uint8(i), v+" ", append(body, ' '), []byte("s3cret"))
	}
	f.Fuzz(func(t *testing.T, which uint8, value string, body, secret []byte) {
		h := http.Header{}
		name := headers[int(which)%len(headers)]
		h.Set(name, value)
		if Verify(h, body, secret) != nil {
			return
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		want := mac.Sum(nil)
		got := h.Get(name)
		switch name {
		case "X-Gitlab-Token":
			if got != string(secret) {
				t.Fatalf("accepted the GitLab token %q for the secret %q", got, secret)
			}
		case "X-Hub-Signature-256":
			got = strings.TrimPrefix(got, "sha256=")
			fallthrough
		default:
			sum, err := hex.DecodeString(strings.TrimSpace(got))
			if err != nil || !hmac.Equal(sum, want) {
				t.Fatalf("accepted %s: %q for the body %q", name, h.Get(name), body)
			}
		}
		if len(secret) == 0 {
			t.Fatal("accepted a request with no secret")
		}
	})
}
