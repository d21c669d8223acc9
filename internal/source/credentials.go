package source

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The keys of a credentials Secret.
const (
	SecretKeyUsername                = "username"
	SecretKeyPassword                = "password"
	SecretKeyToken                   = "token"
	SecretKeyIdentity                = "identity"
	SecretKeyKnownHosts              = "known_hosts"
	SecretKeyGitHubAppID             = "githubAppID"
	SecretKeyGitHubAppInstallationID = "githubAppInstallationID"
	SecretKeyGitHubAppPrivateKey     = "githubAppPrivateKey"
	SecretKeyGitHubAppBaseURL        = "githubAppBaseURL"
)

// Credentials authenticate a fetch. Exactly one kind is set: username and
// password, a token, an SSH identity with known_hosts, or a GitHub App.
type Credentials struct {
	// Username and Password are basic credentials (https). With Identity,
	// Username is the SSH user and Password the key's passphrase.
	Username string
	Password string
	// Token is a bearer token for chart repositories and registries, and the
	// password of basic credentials for git over https.
	Token string

	// Identity is an SSH private key (PEM or OpenSSH format).
	Identity []byte
	// KnownHosts are the SSH server's keys in known_hosts format. Required
	// with Identity: host keys are never trusted on first use.
	KnownHosts []byte

	// GitHubAppID, GitHubAppInstallationID and GitHubAppPrivateKey make an
	// installation token for git over https.
	GitHubAppID             int64
	GitHubAppInstallationID int64
	GitHubAppPrivateKey     []byte
	// GitHubAppBaseURL is the GitHub API for GitHub Enterprise; empty means
	// https://api.github.com.
	GitHubAppBaseURL string
}

// CredentialsFromSecret reads credentials from a Secret's data. Errors name
// the Secret and its keys, never a value.
func CredentialsFromSecret(s *corev1.Secret) (*Credentials, error) {
	if s == nil {
		return nil, nil
	}
	ref := fmt.Sprintf("Secret %s/%s", s.Namespace, s.Name)
	get := func(k string) []byte {
		if v, ok := s.Data[k]; ok {
			return v
		}
		if v, ok := s.StringData[k]; ok {
			return []byte(v)
		}
		return nil
	}
	str := func(k string) string { return strings.TrimSpace(string(get(k))) }
	c := &Credentials{
		Username:            str(SecretKeyUsername),
		Password:            string(get(SecretKeyPassword)),
		Token:               str(SecretKeyToken),
		Identity:            get(SecretKeyIdentity),
		KnownHosts:          get(SecretKeyKnownHosts),
		GitHubAppPrivateKey: get(SecretKeyGitHubAppPrivateKey),
		GitHubAppBaseURL:    str(SecretKeyGitHubAppBaseURL),
	}
	var err error
	if v := str(SecretKeyGitHubAppID); v != "" {
		if c.GitHubAppID, err = strconv.ParseInt(v, 10, 64); err != nil || c.GitHubAppID <= 0 {
			return nil, fmt.Errorf("%s: key %s must be a positive number", ref, SecretKeyGitHubAppID)
		}
	}
	if v := str(SecretKeyGitHubAppInstallationID); v != "" {
		if c.GitHubAppInstallationID, err = strconv.ParseInt(v, 10, 64); err != nil || c.GitHubAppInstallationID <= 0 {
			return nil, fmt.Errorf("%s: key %s must be a positive number", ref, SecretKeyGitHubAppInstallationID)
		}
	}

	kinds := 0
	app := c.GitHubAppID != 0 || c.GitHubAppInstallationID != 0 || len(c.GitHubAppPrivateKey) > 0
	for _, set := range []bool{c.Password != "" && len(c.Identity) == 0, c.Token != "", len(c.Identity) > 0, app} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		return nil, fmt.Errorf("%s holds no credentials: set %s and %s, or %s, or %s and %s, or %s, %s and %s",
			ref, SecretKeyUsername, SecretKeyPassword, SecretKeyToken, SecretKeyIdentity, SecretKeyKnownHosts,
			SecretKeyGitHubAppID, SecretKeyGitHubAppInstallationID, SecretKeyGitHubAppPrivateKey)
	case kinds > 1:
		return nil, fmt.Errorf("%s mixes kinds of credentials: set only one of %s, %s, %s or the GitHub App keys",
			ref, SecretKeyPassword, SecretKeyToken, SecretKeyIdentity)
	case c.Password != "" && c.Username == "" && len(c.Identity) == 0:
		return nil, fmt.Errorf("%s: key %s needs key %s", ref, SecretKeyPassword, SecretKeyUsername)
	case len(c.Identity) > 0 && len(c.KnownHosts) == 0:
		return nil, fmt.Errorf("%s: key %s needs key %s with the server's host keys (host keys are never trusted on first use)",
			ref, SecretKeyIdentity, SecretKeyKnownHosts)
	case app && (c.GitHubAppID == 0 || c.GitHubAppInstallationID == 0 || len(c.GitHubAppPrivateKey) == 0):
		return nil, fmt.Errorf("%s: a GitHub App needs all of %s, %s and %s",
			ref, SecretKeyGitHubAppID, SecretKeyGitHubAppInstallationID, SecretKeyGitHubAppPrivateKey)
	}
	return c, nil
}

// hasBasic reports whether the credentials are a username and password.
// Beside an SSH key, the password is the key's passphrase, which no server
// is sent.
func (c *Credentials) hasBasic() bool { return c != nil && c.Password != "" && len(c.Identity) == 0 }

// cacheKey identifies the credentials in cache keys without holding them, so
// a source fetched with one Secret is never served to a fetch with another
// (or with none). Nil credentials give "".
func (c *Credentials) cacheKey() string {
	if c == nil {
		return ""
	}
	h := sha256.New()
	for _, part := range [][]byte{
		[]byte(c.Username), []byte(c.Password), []byte(c.Token), c.Identity, c.KnownHosts,
		[]byte(strconv.FormatInt(c.GitHubAppID, 10)), []byte(strconv.FormatInt(c.GitHubAppInstallationID, 10)),
		c.GitHubAppPrivateKey, []byte(c.GitHubAppBaseURL),
	} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
