package gitops

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	corev1 "k8s.io/api/core/v1"
)

// AuthFunc turns a repository's credentials Secret into go-git's auth.
type AuthFunc func(ctx context.Context, url string, secret *corev1.Secret) (transport.AuthMethod, error)

// BasicAuth is the AuthFunc for an https token, or a username and password,
// with the keys of the source package's credentials Secrets (token, username,
// password). SSH keys and GitHub Apps need the source package's git auth, set
// as controller.AddonRepositoryReconciler.Auth and Writer.Auth.
// Without a Secret it is anonymous.
func BasicAuth(_ context.Context, _ string, secret *corev1.Secret) (transport.AuthMethod, error) {
	if secret == nil {
		return nil, nil
	}
	get := func(k string) string {
		if v, ok := secret.Data[k]; ok {
			return string(v)
		}
		return secret.StringData[k]
	}
	user, password, token := get("username"), get("password"), get("token")
	switch {
	case token != "" && password == "":
		if user == "" {
			user = "git" // Hosts ignore the user name that goes with a token.
		}
		return &githttp.BasicAuth{Username: user, Password: token}, nil
	case password != "" && token == "" && user != "":
		return &githttp.BasicAuth{Username: user, Password: password}, nil
	default:
		return nil, fmt.Errorf("the Secret %s/%s holds no https token (key token) or username and password (keys username and password); SSH keys and GitHub Apps need the controller's full git auth", secret.Namespace, secret.Name)
	}
}
