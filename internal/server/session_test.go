package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/server"
)

// serve serves srv over TLS on loopback until the test ends, with the
// certificate api has, which apiClient trusts.
func serve(t *testing.T, srv *server.Server) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL
}

// recordingReviewer is the controller's client for TokenReviews and
// SubjectAccessReviews, which keeps the spec of every SubjectAccessReview
// it sends to the API server.
func recordingReviewer(t *testing.T) (kubernetes.Interface, func() []authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	var (
		mu   sync.Mutex
		sent []authorizationv1.SubjectAccessReviewSpec
	)
	cfg := rest.CopyConfig(cluster.ConfigFor(install.ControllerUser))
	cfg.ContentType = "application/json"
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/subjectaccessreviews") && req.Body != nil {
				data, err := io.ReadAll(req.Body)
				if err != nil {
					return nil, err
				}
				req.Body = io.NopCloser(bytes.NewReader(data))
				var review authorizationv1.SubjectAccessReview
				if err := json.Unmarshal(data, &review); err != nil {
					t.Errorf("a SubjectAccessReview that is no JSON: %v", err)
				}
				mu.Lock()
				sent = append(sent, review.Spec)
				mu.Unlock()
			}
			return next.RoundTrip(req)
		})
	})
	reviewer, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return reviewer, func() []authorizationv1.SubjectAccessReviewSpec {
		mu.Lock()
		defer mu.Unlock()
		return append([]authorizationv1.SubjectAccessReviewSpec(nil), sent...)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// gitManagedLonghorn is the Addon longhorn of ns, managed by the
// AddonRepository ops on a loopback git server; it returns the
// repository's URL.
func gitManagedLonghorn(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	git := gitserver.Start(t)
	url := git.Create(t, "ops")
	def, err := os.ReadFile(filepath.Join("..", "gitops", "testdata", "longhorn.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gitserver.Clone(t, url).Write("addons/longhorn.yaml", string(def)).CommitAndPush("longhorn")
	if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: url}}); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "longhorn", Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: "https://charts.longhorn.io/", Name: "longhorn", Version: "v1.10.2"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	return url
}

// TestCommitReviewNamesTheWholeUser suspends a git-managed Addon: the
// SubjectAccessReview made before the commit names the user as the
// token's review does, with the UID and the extra fields that a webhook
// authorizer or a scoped token decides on.
func TestCommitReviewNamesTheWholeUser(t *testing.T) {
	ns := namespace(t)
	gitManagedLonghorn(t, ns)
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	reviewer, reviews := recordingReviewer(t)
	srv := newServer()
	srv.Reviewer = reviewer
	base := serve(t, srv)

	code, body := callAt(t, base, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/longhorn/suspend", nil)
	expect(t, "an editor suspends a git-managed add-on", code, body, http.StatusAccepted)
	tr, err := kube.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: editor}}, metav1.CreateOptions{})
	if err != nil || !tr.Status.Authenticated {
		t.Fatalf("reviewing the editor's token: %v, %+v", err, tr.Status)
	}
	want := tr.Status.User
	if want.UID == "" || len(want.Extra) == 0 {
		t.Fatalf("a ServiceAccount token's review has UID %q and extra %v; the test needs both", want.UID, want.Extra)
	}
	sent := reviews()
	if len(sent) != 1 {
		t.Fatalf("%d SubjectAccessReviews for one commit; want 1", len(sent))
	}
	got := sent[0]
	extra := map[string]authenticationv1.ExtraValue{}
	for k, v := range got.Extra {
		extra[k] = authenticationv1.ExtraValue(v)
	}
	if got.User != want.Username || got.UID != want.UID || !reflect.DeepEqual(got.Groups, want.Groups) || !reflect.DeepEqual(extra, want.Extra) {
		t.Errorf("the review named user %q, UID %q, groups %v, extra %v; the token is %q, UID %q, groups %v, extra %v",
			got.User, got.UID, got.Groups, got.Extra, want.Username, want.UID, want.Groups, want.Extra)
	}
}
