package source

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// TestHoldsCredentialsTokenUsers: a token with no known prefix as an
// http(s) URL's user is a credential; a user name, even a long one, is not.
func TestHoldsCredentialsTokenUsers(t *testing.T) {
	hex40 := strings.Repeat("0123456789abcdef", 3)[:40]
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://" + hex40 + "@gitea.example.com/org/repo.git", true},
		{"https://" + strings.ToUpper(hex40) + "@github.com/org/repo.git", true},
		{"http://" + hex40 + "@127.0.0.1/repo.git", true},
		{"https://a1b2c3d4e5f6g7h8i9j0@codeberg.org/org/repo.git", true},
		{"https://Zm9vYmFyYmF6cXV4_-0123@git.example.com/r.git", true},
		{"https://org@dev.azure.com/org/p/_git/r", false},
		{"https://someone@bitbucket.org/ws/r.git", false},
		{"https://firstname-lastname-engineering@bitbucket.org/ws/r.git", false},
		{"https://build-bot-2024@git.example.com/r.git", false},
		{"https://a1b2c3d4e5f6g7h8i9j@codeberg.org/org/repo.git", false},
		{"ssh://" + hex40 + "@github.com/org/repo.git", false},
	} {
		ep, err := transport.NewEndpoint(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := HoldsCredentials(ep); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.url, got, tc.want)
		}
	}
}
