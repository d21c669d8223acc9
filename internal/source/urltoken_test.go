package source

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// TestHoldsCredentialsTokenUsers: a token with no known prefix as an
// http(s) URL's user is a credential; a user name, even a long one with
// digits, is not.
func TestHoldsCredentialsTokenUsers(t *testing.T) {
	hex40 := strings.Repeat("0123456789abcdef", 3)[:40]
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://" + hex40 + "@gitea.example.com/org/repo.git", true},
		{"https://" + strings.ToUpper(hex40) + "@github.com/org/repo.git", true},
		{"http://" + hex40 + "@127.0.0.1/repo.git", true},
		{"https://a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6@codeberg.org/org/repo.git", true},
		{"https://" + strings.Repeat("ab2", 17) + "c@dev.azure.com/org/p/_git/r", true},
		{"https://Zm9vYmFyYmF6cXV4_0123456789abcdef@git.example.com/r.git", true},
		{"https://org@dev.azure.com/org/p/_git/r", false},
		{"https://someone@bitbucket.org/ws/r.git", false},
		{"https://firstname-lastname-engineering@bitbucket.org/ws/r.git", false},
		{"https://build-bot-2024@git.example.com/r.git", false},
		{"https://a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p@codeberg.org/org/repo.git", false},
		{"https://platform-team-2024-ci-builds-eu-west@git.example.com/r.git", false},
		{"https://contoso.engineering2024.europe.west@dev.azure.com/o/p/_git/r", false},
		{"https://contosoengineering2024@dev.azure.com/o/p/_git/r", false},
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
