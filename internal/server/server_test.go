package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/server"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

var (
	cluster *testcluster.Cluster
	admin   client.Client
	kube    kubernetes.Interface
	api     *httptest.Server
	apiLog  = &testcontroller.SyncBuffer{}
)

func TestMain(m *testing.M) {
	// Plans render in a sandbox, whose workers are this test binary.
	render.ServeWorkerIfAsked()
	testcluster.Main(m, func(c *testcluster.Cluster) {
		cluster = c
		if err := setup(); err != nil {
			panic(err)
		}
	})
}

// setup installs Capstan's CRDs and RBAC and serves the API as the
// controller's account, over TLS on loopback.
func setup() error {
	ctx := context.Background()
	var err error
	if admin, err = client.New(cluster.Config, client.Options{Scheme: cli.Scheme()}); err != nil {
		return err
	}
	if kube, err = kubernetes.NewForConfig(cluster.Config); err != nil {
		return err
	}
	if err := install.Apply(ctx, admin, false); err != nil {
		return err
	}
	controllerCfg := cluster.ConfigFor(install.ControllerUser)
	reviewer, err := kubernetes.NewForConfig(controllerCfg)
	if err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(controllerCfg)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(controllerCfg, httpClient)
	if err != nil {
		return err
	}
	// Plans and the chart form fetch from the tests' loopback servers only:
	// the guard is loopback-only, so a chart at a public name, such as the
	// catalog's Longhorn, is refused before its name is resolved.
	chartServer = serveCharts()
	fetcher, err := source.NewFetcher(source.Options{Guard: netguard.Config{Allow: []string{"127.0.0.1/32"}, LoopbackOnly: true},
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: chartServer.Certificate().Raw})})
	if err != nil {
		return err
	}
	controllerClient, err := client.New(controllerCfg, client.Options{Scheme: cli.Scheme(), Mapper: mapper})
	if err != nil {
		return err
	}
	// Renders are bounded as the controller bounds them, with a short time
	// bound so that a chart that loops is stopped soon.
	sandbox, err := render.NewSandbox(render.SandboxConfig{Timeout: planRenderTimeout, Workers: 2})
	if err != nil {
		return err
	}
	newServer = func() *server.Server {
		return &server.Server{
			Base: controllerCfg, Reviewer: reviewer, Scheme: cli.Scheme(), Mapper: mapper, Fetcher: fetcher,
			// Commits and syncs use the controller's own git auth, whose
			// fetches and pushes go through the fetch guard.
			Controller: controllerClient, GitAuth: fetcher.GitAuth,
			Syncer: syncNow{&controller.AddonRepositoryReconciler{Client: controllerClient, APIReader: controllerClient, Auth: fetcher.GitAuth}},
			Config: controller.Config{Namespace: install.Namespace, TrustedNamespaces: []string{install.Namespace, trustedNamespace}, Sandbox: sandbox},
			Log:    funcr.New(func(prefix, args string) { fmt.Fprintln(apiLog, prefix, args) }, funcr.Options{}),
		}
	}
	api = httptest.NewUnstartedServer(newServer().Handler())
	api.StartTLS()
	return nil
}

// newServer is a server set up as the tests' own, api, for a test that
// needs one of its own: with another clock, say.
var newServer func() *server.Server

// syncNow syncs a repository at once when the server asks, with the real
// AddonRepository reconciler: no manager runs in these tests.
type syncNow struct {
	r *controller.AddonRepositoryReconciler
}

func (s syncNow) Trigger(ctx context.Context, key types.NamespacedName) error {
	_, err := s.r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	return err
}

// user is a ServiceAccount of ns with a Role of rules, and a token for it
// from the TokenRequest API: a real user of the cluster.
func user(t testing.TB, ns, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(rules) > 0 {
		if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// userIn is a ServiceAccount of ns with a Role of rules in another
// namespace, in, and a token for it.
func userIn(t testing.TB, ns, name, in string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	token := user(t, ns, name)
	ctx := context.Background()
	if _, err := kube.RbacV1().Roles(in).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(in).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: ns + "-" + name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return token
}

// hashOf is a plan hash of one repeated hex digit.
func hashOf(digit string) string { return "sha256:" + strings.Repeat(digit, 64) }

func rbacPolicy(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

func addonRule(verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"capstan.dev"}, Resources: []string{"addons"}, Verbs: verbs}
}

var (
	apiClientOnce sync.Once
	apiHTTP       *http.Client
)

// apiClient trusts the test server's certificate and keeps its
// connections, as a browser or the CLI would.
func apiClient() *http.Client {
	apiClientOnce.Do(func() {
		apiHTTP = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: api.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, MinVersion: tls.VersionTLS12},
		}}
	})
	return apiHTTP
}

// call makes one API request as token and returns the status and body.
func call(t testing.TB, token, method, path string, body any) (int, []byte) {
	t.Helper()
	return callAt(t, api.URL, token, method, path, body)
}

// callAt makes one API request to the server at base.
func callAt(t testing.TB, base, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := apiClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func expect(t testing.TB, what string, code int, body []byte, want int) {
	t.Helper()
	if code != want {
		t.Errorf("%s: %d %s; want %d", what, code, body, want)
	}
}

func namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// addonWithPlan creates an Addon and writes a plan into its status, as the
// controller would: the API's approvals are checked against it.
func addonWithPlan(t testing.TB, ns, name, hash string, violations ...capstanv1.Violation) *capstanv1.Addon {
	t.Helper()
	ctx := context.Background()
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Status.Plan = &capstanv1.Plan{Hash: hash, Generation: a.Generation, Violations: violations}
	if err := admin.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthentication(t *testing.T) {
	code, body := call(t, "", http.MethodGet, "/api/v1/addons", nil)
	expect(t, "no token", code, body, http.StatusUnauthorized)
	code, body = call(t, "not-a-token", http.MethodGet, "/api/v1/addons", nil)
	expect(t, "a bad token", code, body, http.StatusUnauthorized)
	var e struct{ Code int }
	if json.Unmarshal(body, &e) != nil || e.Code != http.StatusUnauthorized {
		t.Errorf("the error body %s is not {code, reason, message}", body)
	}
}

// TestTheUsersOwnRBAC checks that the API gives each user what kubectl
// would: a viewer reads its namespace only and approves nothing; an editor
// approves exactly the current, unblocked plan.
func TestTheUsersOwnRBAC(t *testing.T) {
	ns, other := namespace(t), namespace(t)
	viewer := user(t, ns, "viewer", addonRule("get", "list", "watch"))
	editor := user(t, ns, "editor", addonRule("get", "list", "watch", "create", "update", "patch", "delete"), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	addonWithPlan(t, ns, "demo", hashOf("a"))
	addonWithPlan(t, other, "elsewhere", hashOf("b"))

	code, body := call(t, viewer, http.MethodGet, "/api/v1/namespaces/"+ns+"/addons", nil)
	expect(t, "a viewer lists its namespace", code, body, http.StatusOK)
	if !strings.Contains(string(body), `"name":"demo"`) {
		t.Errorf("the list does not hold demo: %s", body)
	}
	code, body = call(t, viewer, http.MethodGet, "/api/v1/namespaces/"+other+"/addons", nil)
	expect(t, "a viewer lists another namespace", code, body, http.StatusForbidden)
	if strings.Contains(string(body), "elsewhere") {
		t.Errorf("a refused list shows another namespace's Addon: %s", body)
	}
	code, body = call(t, viewer, http.MethodGet, "/api/v1/addons", nil)
	expect(t, "a viewer lists every namespace", code, body, http.StatusForbidden)
	code, body = call(t, viewer, http.MethodGet, "/api/v1/namespaces/"+ns+"/addons/demo", nil)
	expect(t, "a viewer gets an Addon", code, body, http.StatusOK)
	code, body = call(t, viewer, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/demo/install", map[string]string{"hash": hashOf("a")})
	expect(t, "a viewer installs", code, body, http.StatusForbidden)

	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/demo/install", map[string]string{"hash": hashOf("0")})
	expect(t, "an editor installs a stale hash", code, body, http.StatusConflict)
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/demo/install", map[string]string{})
	expect(t, "an install without a hash", code, body, http.StatusBadRequest)
	got := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, got); err != nil || !got.Spec.Suspend || got.Spec.SyncRequest != 0 {
		t.Fatalf("refused installs changed the Addon: %v, suspend %v, syncRequest %d", err, got.Spec.Suspend, got.Spec.SyncRequest)
	}
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/demo/install", map[string]string{"hash": hashOf("a")})
	expect(t, "an editor installs the reviewed plan", code, body, http.StatusOK)
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, got); err != nil || got.Spec.Suspend || got.Spec.ApprovedPlan != hashOf("a") || got.Spec.SyncRequest != 1 {
		t.Errorf("after the install: suspend %v, approvedPlan %q, syncRequest %d", got.Spec.Suspend, got.Spec.ApprovedPlan, got.Spec.SyncRequest)
	}
	if !strings.Contains(apiLog.String(), `"verb"="install"`) || !strings.Contains(apiLog.String(), "system:serviceaccount:"+ns+":editor") {
		t.Errorf("the install left no audit line naming the editor: %s", apiLog.String())
	}

	addonWithPlan(t, ns, "blocked", hashOf("c"), capstanv1.Violation{Rule: "kind", Message: "ClusterRole is not allowed"})
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/blocked/install", map[string]string{"hash": hashOf("c")})
	expect(t, "installing a blocked plan", code, body, http.StatusUnprocessableEntity)

	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/demo/suspend", nil)
	expect(t, "suspend", code, body, http.StatusNoContent)
	// keepValues of an add-on the controller placed in the cluster profile:
	// refused, and nothing written.
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, got); err != nil {
		t.Fatal(err)
	}
	got.Status.Profile = capstanv1.ProfileCluster
	if err := admin.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, editor, http.MethodDelete, "/api/v1/namespaces/"+ns+"/addons/demo?uninstall=true&keepValues=true", nil)
	expect(t, "keepValues of a cluster-profile add-on", code, body, http.StatusBadRequest)
	if !strings.Contains(string(body), "remove it without keepValues") {
		t.Errorf("the refusal %s does not say what to do", body)
	}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, got); err != nil || got.DeletionTimestamp != nil || len(got.Annotations) > 0 {
		t.Fatalf("a refused removal touched the Addon: %v, deleting %v, annotations %v", err, got.DeletionTimestamp, got.Annotations)
	}
	code, body = call(t, editor, http.MethodDelete, "/api/v1/namespaces/"+ns+"/addons/demo?uninstall=true", nil)
	expect(t, "remove", code, body, http.StatusNoContent)
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, got); !apierrors.IsNotFound(err) {
		t.Errorf("the removed Addon: %v", err)
	}
}

// TestBadInput checks the refusals that happen before the API server is
// asked anything.
func TestBadInput(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "patch"), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	code, body := call(t, editor, http.MethodGet, "/api/v1/namespaces/"+ns+"/addons/Bad_Name", nil)
	expect(t, "a malformed name", code, body, http.StatusBadRequest)
	code, body = call(t, editor, http.MethodGet, "/api/v1/namespaces/NS!/addons", nil)
	expect(t, "a malformed namespace", code, body, http.StatusBadRequest)
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", bytes.Repeat([]byte(" "), server.MaxBody+10))
	expect(t, "a body over the limit", code, body, http.StatusRequestEntityTooLarge)
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", []byte(`{"name": "x", "surprise": 1}`))
	expect(t, "an unknown field", code, body, http.StatusBadRequest)
	// A Latin-1 password: decoded, it would reach the Secret as U+FFFD.
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons",
		[]byte("{\"name\":\"latin\",\"spec\":{\"chart\":{\"url\":\"https://charts.example/blog-1.0.0.tgz\"}},\"secretInputs\":{\"auth.password\":\"p\xe4ss\"}}"))
	expect(t, "a body that is not UTF-8", code, body, http.StatusBadRequest)
	if !strings.Contains(string(body), "not UTF-8 at byte") {
		t.Errorf("the refusal of a body that is not UTF-8 does not say where: %s", body)
	}
	var secrets corev1.SecretList
	if err := admin.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Type != corev1.SecretTypeServiceAccountToken {
			t.Errorf("a refused add left the Secret %s", s.Name)
		}
	}
	code, body = call(t, editor, http.MethodGet, "/api/v1/nowhere", nil)
	expect(t, "an unknown path", code, body, http.StatusNotFound)
}

// TestAddWithSecretInputs adds a suspended Addon with a secret input, and
// checks that the input is in a new Secret and nowhere else.
func TestAddWithSecretInputs(t *testing.T) {
	ns := namespace(t)
	const marker = "s3cret-marker-Zq81"
	editor := user(t, ns, "editor", addonRule("get", "create", "patch"), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	noSecrets := user(t, ns, "nosecrets", addonRule("get", "create", "patch"))
	req := map[string]any{
		"name":         "blog",
		"spec":         map[string]any{"chart": map[string]any{"url": "https://charts.example/blog-1.0.0.tgz"}},
		"secretInputs": map[string]string{"auth.password": marker},
	}
	code, body := call(t, noSecrets, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", req)
	expect(t, "secret inputs without the right to create Secrets", code, body, http.StatusForbidden)
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "blog"}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused add left an Addon: %v", err)
	}
	// A name the CRD refuses (over 53 characters) and a key that is no
	// targetPath are the request's fields at fault, refused before any
	// Secret is written, not a Secret's label or a valuesFrom's path.
	for _, tc := range []struct {
		what, name, path, field string
	}{
		{"a 70-character name", strings.Repeat("n", 70), "auth.password", "name"},
		{"a secret input that is no targetPath", "blog", "a[", `secretInputs["a["]`},
	} {
		bad := map[string]any{"name": tc.name, "spec": req["spec"], "secretInputs": map[string]string{tc.path: marker}}
		code, body := call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", bad)
		expect(t, tc.what, code, body, http.StatusBadRequest)
		var got struct{ Field string }
		if err := json.Unmarshal(body, &got); err != nil || got.Field != tc.field {
			t.Errorf("%s: the refusal names the field %q (%v); want %q: %s", tc.what, got.Field, err, tc.field, body)
		}
		var secrets corev1.SecretList
		if err := admin.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(secrets.Items) > 0 {
			t.Errorf("%s: the refused add left the Secret %s", tc.what, secrets.Items[0].Name)
		}
	}
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", req)
	expect(t, "add", code, body, http.StatusCreated)
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "blog"}, a); err != nil {
		t.Fatal(err)
	}
	if !a.Spec.Suspend || len(a.Spec.ValuesFrom) != 1 || a.Spec.ValuesFrom[0].TargetPath != "auth.password" {
		t.Fatalf("the added Addon: suspend %v, valuesFrom %+v; want suspended, the input in a values Secret", a.Spec.Suspend, a.Spec.ValuesFrom)
	}
	secret := &corev1.Secret{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: a.Spec.ValuesFrom[0].Name}, secret); err != nil || !ptr.Deref(secret.Immutable, false) {
		t.Fatalf("the values Secret: %v (immutable %v)", err, secret.Immutable)
	}
	code, got := call(t, editor, http.MethodGet, "/api/v1/namespaces/"+ns+"/addons/blog", nil)
	expect(t, "get", code, got, http.StatusOK)
	for what, text := range map[string]string{"the add's answer": string(body), "the get's answer": string(got), "the API's log": apiLog.String()} {
		if strings.Contains(text, marker) {
			t.Errorf("%s shows the secret input", what)
		}
	}
}

// TestTokenReviewsAreCached counts, in the API server's audit log, the
// TokenReviews that many requests with one token cost.
func TestTokenReviewsAreCached(t *testing.T) {
	ns := namespace(t)
	token := user(t, ns, "reader", addonRule("list"))
	reviews := func() int { return tokenReviews(t) }
	before := reviews()
	for range 5 {
		code, body := call(t, token, http.MethodGet, "/api/v1/namespaces/"+ns+"/addons", nil)
		expect(t, "list", code, body, http.StatusOK)
	}
	if got := reviews() - before; got != 1 {
		t.Errorf("five requests with one token cost %d TokenReviews; want 1", got)
	}
}

// bindClusterRole binds a ServiceAccount to a ClusterRole in its namespace
// and returns its token.
func bindClusterRole(t testing.TB, ns, name, clusterRole string) string {
	t.Helper()
	token := user(t, ns, name)
	if _, err := kube.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return token
}

// TestAggregatedRoles checks that Kubernetes' own view and edit roles
// carry Capstan's: the capstan-view and capstan-edit ClusterRoles
// aggregate into them.
func TestAggregatedRoles(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "demo", hashOf("a"))
	viewer := bindClusterRole(t, ns, "viewer", "view")
	editor := bindClusterRole(t, ns, "editor", "edit")
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := call(t, viewer, http.MethodGet, "/api/v1/namespaces/"+ns+"/addons/demo", nil)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a namespace viewer still cannot read Addons: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, body := call(t, viewer, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/demo/suspend", nil)
	expect(t, "a namespace viewer suspends", code, body, http.StatusForbidden)
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/demo/install", map[string]string{"hash": hashOf("a")})
	expect(t, "a namespace editor installs", code, body, http.StatusOK)
}

// TestEditPlanAndCapabilities plans a proposed change without saving it,
// then makes it, and asks which actions each user may take.
func TestEditPlanAndCapabilities(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	git := gitserver.Start(t)
	url := git.Create(t, "demo")
	gitserver.Clone(t, url).
		Write("a/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-a\ndata: {k: v}\n").
		Write("b/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-b\ndata: {k: v}\n").
		CommitAndPush("two folders")
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: capstanv1.AddonSpec{Suspend: true, Git: &capstanv1.GitSource{URL: url, Path: "a"}}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	path := "/api/v1/namespaces/" + ns + "/addons/demo"

	code, body := call(t, editor, http.MethodPost, path+"/plan", map[string]any{"spec": map[string]any{"git": map[string]any{"path": "b"}}})
	expect(t, "a plan of a proposed change", code, body, http.StatusOK)
	var p capstanv1.Plan
	if err := json.Unmarshal(body, &p); err != nil || len(p.Objects) != 1 || p.Objects[0].Name != "from-b" || p.Objects[0].Action != capstanv1.ActionCreate {
		t.Fatalf("the proposed plan %s; want one create of from-b", body)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil || a.Spec.Git.Path != "a" {
		t.Fatalf("planning a change saved it: %v, path %q", err, a.Spec.Git.Path)
	}

	code, body = call(t, viewer, http.MethodPatch, path, map[string]any{"spec": map[string]any{"git": map[string]any{"path": "b"}}})
	expect(t, "a viewer edits", code, body, http.StatusForbidden)
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"spec": map[string]any{"nope": 1}})
	expect(t, "an edit of a field the spec does not have", code, body, http.StatusBadRequest)
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"spec": map[string]any{"git": map[string]any{"path": "b"}}})
	expect(t, "an editor edits", code, body, http.StatusOK)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil || a.Spec.Git.Path != "b" || a.Spec.Git.URL != url {
		t.Errorf("after the edit: %v, git %+v; want the path changed and the URL kept", err, a.Spec.Git)
	}

	caps := func(token, path string) map[string]bool {
		t.Helper()
		code, body := call(t, token, http.MethodGet, path, nil)
		expect(t, "capabilities", code, body, http.StatusOK)
		out := map[string]bool{}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if c := caps(viewer, path+"/capabilities"); !c["get"] || c["update"] || c["approve"] || c["delete"] || c["setSecretInputs"] {
		t.Errorf("a viewer's capabilities: %v", c)
	}
	if c := caps(editor, path+"/capabilities"); !c["get"] || !c["update"] || !c["approve"] || c["delete"] || !c["setSecretInputs"] {
		t.Errorf("an editor's capabilities: %v", c)
	}
	if c := caps(viewer, "/api/v1/namespaces/"+ns+"/capabilities"); !c["list"] || c["create"] {
		t.Errorf("a viewer's capabilities in the namespace: %v", c)
	}
	// A role with update but not patch cannot make the API's changes,
	// which are patches: it is not told it may.
	updater := user(t, ns, "updater", addonRule("get", "update"))
	if c := caps(updater, path+"/capabilities"); c["update"] || c["approve"] {
		t.Errorf("a role with update alone: %v", c)
	}
	code, body = call(t, updater, http.MethodPatch, path, map[string]any{"spec": map[string]any{"git": map[string]any{"path": "c"}}})
	expect(t, "an edit by a role with update alone", code, body, http.StatusForbidden)
}

// TestGitManagedChangesAreCommits changes an Addon that git manages: never
// in the cluster, always by a commit that names the person, and only after
// the API server says the person may make that change.
func TestGitManagedChangesAreCommits(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	url := gitManagedLonghorn(t, ns)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "longhorn"}}
	def, err := os.ReadFile(filepath.Join("..", "gitops", "testdata", "longhorn.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	path := "/api/v1/namespaces/" + ns + "/addons/longhorn"
	log := func() string { return gitserver.Clone(t, url).Git("log", "--format=%an|%s") }

	code, body := call(t, viewer, http.MethodPost, path+"/suspend", nil)
	expect(t, "a viewer suspends a git-managed add-on", code, body, http.StatusForbidden)
	if l := log(); strings.Count(l, "\n") != 1 {
		t.Errorf("a refused change made a commit:\n%s", l)
	}
	code, body = call(t, editor, http.MethodPost, path+"/suspend", nil)
	expect(t, "an editor suspends a git-managed add-on", code, body, http.StatusAccepted)
	if l := log(); !strings.Contains(l, "system:serviceaccount:"+ns+":editor|") || !strings.Contains(l, "longhorn") {
		t.Errorf("the commit does not name the editor:\n%s", l)
	}
	var answer struct {
		Commit string
		Addon  *capstanv1.Addon
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Commit == "" || answer.Addon == nil {
		t.Fatalf("the answer %s should name the commit and hold the Addon the syncer wrote from it", body)
	}
	if !answer.Addon.Spec.Suspend || answer.Addon.Annotations[gitops.GitCommitAnnotation] != answer.Commit {
		t.Errorf("the synced Addon: suspend %v, from commit %q; want suspended, from %s", answer.Addon.Spec.Suspend, answer.Addon.Annotations[gitops.GitCommitAnnotation], answer.Commit)
	}

	edited := strings.Replace(string(def), "version: v1.10.2", "version: v1.10.3", 1)
	code, body = call(t, viewer, http.MethodPatch, path, map[string]any{"definition": edited})
	expect(t, "a viewer edits a git-managed definition", code, body, http.StatusForbidden)
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"definition": "name: longhorn\nhelm: {repo: 12}\n"})
	expect(t, "an invalid definition", code, body, http.StatusUnprocessableEntity)
	// The file the editor started from is the one before the suspend's
	// commit: the edit would undo it.
	stale := plumbing.ComputeHash(plumbing.BlobObject, def).String()
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"definition": edited, "base": stale})
	expect(t, "an edit from a version git no longer has", code, body, http.StatusConflict)
	if l := log(); strings.Contains(l, "Edit add-on longhorn") {
		t.Errorf("a refused edit made a commit:\n%s", l)
	}
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"definition": edited})
	expect(t, "an editor edits a git-managed definition", code, body, http.StatusAccepted)
	if err := json.Unmarshal(body, &answer); err != nil || answer.Addon == nil || answer.Addon.Spec.Chart.Version != "v1.10.3" {
		t.Errorf("after the edit: %s; want the Addon synced at v1.10.3", body)
	}
	if l := log(); !strings.Contains(l, "Edit add-on longhorn") {
		t.Errorf("no edit commit:\n%s", l)
	}
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"spec": map[string]any{"suspend": true}})
	expect(t, "an edit of a git-managed add-on in the cluster", code, body, http.StatusConflict)
	code, body = call(t, editor, http.MethodPost, path+"/install", map[string]string{"hash": hashOf("a")})
	expect(t, "an install of a git-managed add-on in the cluster", code, body, http.StatusConflict)
	code, body = call(t, editor, http.MethodDelete, path+"?keepValues=true", nil)
	expect(t, "keep-values for a git-managed add-on", code, body, http.StatusBadRequest)
	code, body = call(t, editor, http.MethodDelete, path, nil)
	expect(t, "an editor without delete removes a git-managed add-on", code, body, http.StatusForbidden)
	// The editor may patch the Addon, so it could write the uninstall mark;
	// the access review must come first.
	code, body = call(t, editor, http.MethodDelete, path+"?uninstall=true", nil)
	expect(t, "an editor without delete uninstalls a git-managed add-on", code, body, http.StatusForbidden)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil || a.Annotations[capstanv1.UninstallAnnotation] != "" {
		t.Errorf("a refused uninstall left the Addon marked: %v, annotations %v", err, a.Annotations)
	}
}

// TestOpenAPIDescribesEveryPath reads the OpenAPI document, which needs no
// token, and checks that it describes every path the API serves.
func TestOpenAPIDescribesEveryPath(t *testing.T) {
	resp, err := apiClient().Get(api.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK || doc.OpenAPI == "" {
		t.Fatalf("the OpenAPI document: %d, %v", resp.StatusCode, err)
	}
	served := map[string][]string{
		"/api/v1/addons":                                            {"get"},
		"/api/v1/session":                                           {"post", "delete"},
		"/api/v1/namespaces/{namespace}/addons":                     {"get", "post"},
		"/api/v1/namespaces/{namespace}/capabilities":               {"get"},
		"/api/v1/namespaces/{namespace}/addons/{name}":              {"get", "patch", "delete"},
		"/api/v1/namespaces/{namespace}/addons/{name}/plan":         {"post"},
		"/api/v1/namespaces/{namespace}/addons/{name}/install":      {"post"},
		"/api/v1/namespaces/{namespace}/addons/{name}/approve":      {"post"},
		"/api/v1/namespaces/{namespace}/addons/{name}/refresh":      {"post"},
		"/api/v1/namespaces/{namespace}/addons/{name}/test":         {"post"},
		"/api/v1/namespaces/{namespace}/addons/{name}/suspend":      {"post"},
		"/api/v1/namespaces/{namespace}/addons/{name}/resume":       {"post"},
		"/api/v1/namespaces/{namespace}/addons/{name}/capabilities": {"get"},
		"/api/v1/namespaces/{namespace}/addons/{name}/events":       {"get"},
	}
	for path, methods := range served {
		for _, m := range methods {
			if _, ok := doc.Paths[path][m]; !ok {
				t.Errorf("the OpenAPI document lacks %s %s", strings.ToUpper(m), path)
			}
		}
	}
	if len(doc.Paths) != len(served) {
		t.Errorf("the OpenAPI document has %d paths; the API serves %d", len(doc.Paths), len(served))
	}

	// The answers the code gives: every request with a token may be
	// throttled (429) or find the API server not answering its review
	// (503); a change of a git-managed Addon is a commit (202).
	type operation struct {
		Responses map[string]struct {
			Description string `json:"description"`
			Content     map[string]struct {
				Schema struct {
					Ref string `json:"$ref"`
				} `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
		RequestBody struct {
			Content map[string]struct {
				Schema struct {
					Properties map[string]any `json:"properties"`
				} `json:"schema"`
			} `json:"content"`
		} `json:"requestBody"`
	}
	var raw struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument(t), &raw); err != nil {
		t.Fatal(err)
	}
	var ops struct {
		Paths map[string]map[string]operation
	}
	ops.Paths = map[string]map[string]operation{}
	for path, methods := range raw.Paths {
		ops.Paths[path] = map[string]operation{}
		for m, data := range methods {
			if m == "parameters" {
				continue
			}
			var op operation
			if err := json.Unmarshal(data, &op); err != nil {
				t.Fatalf("%s %s: %v", m, path, err)
			}
			ops.Paths[path][m] = op
		}
	}
	for path, methods := range served {
		for _, m := range methods {
			if path == "/api/v1/session" && m == "delete" {
				continue
			}
			for _, code := range []string{"401", "429", "503"} {
				if _, ok := ops.Paths[path][m].Responses[code]; !ok {
					t.Errorf("the OpenAPI document lacks the %s of %s %s", code, strings.ToUpper(m), path)
				}
			}
		}
	}
	one := "/api/v1/namespaces/{namespace}/addons/{name}"
	for _, op := range []struct{ path, method string }{{one, "patch"}, {one, "delete"}, {one + "/suspend", "post"}, {one + "/resume", "post"}} {
		r := ops.Paths[op.path][op.method].Responses
		if r["202"].Content["application/json"].Schema.Ref != "#/components/schemas/Commit" {
			t.Errorf("%s %s: the OpenAPI document lacks the 202 with a Commit of a git-managed Addon", strings.ToUpper(op.method), op.path)
		}
		if _, ok := r["501"]; !ok {
			t.Errorf("%s %s: the OpenAPI document lacks the 501 of a server that does not commit", strings.ToUpper(op.method), op.path)
		}
	}
	// A git-managed change runs the user's access review, which has a
	// per-user bound, and waits for a commit's turn: both answer 429.
	for _, op := range []struct{ path, method string }{
		{"/api/v1/namespaces/{namespace}/addons", "post"}, {one, "patch"}, {one, "delete"}, {one + "/suspend", "post"}, {one + "/resume", "post"},
	} {
		if d := ops.Paths[op.path][op.method].Responses["429"].Description; !strings.Contains(d, "access reviews") || !strings.Contains(d, "two commits") {
			t.Errorf("%s %s: the OpenAPI document's 429 (%q) lacks the user's access-review bound or the commits' turn", strings.ToUpper(op.method), op.path, d)
		}
	}
	if d := ops.Paths[one+"/plan"]["post"].Responses["409"].Description; !strings.Contains(d, "held since its profile changed") {
		t.Errorf("the OpenAPI document's 409 of a plan (%q) lacks an Addon held since its profile changed", d)
	}
	if _, ok := ops.Paths[one]["patch"].RequestBody.Content["application/json"].Schema.Properties["definition"]; !ok {
		t.Errorf("the OpenAPI document's PATCH body lacks definition, which a git-managed Addon's edit requires")
	}
	if _, ok := ops.Paths[one+"/plan"]["post"].RequestBody.Content["application/json"].Schema.Properties["secretInputs"]; ok {
		t.Errorf("the OpenAPI document's plan body offers secretInputs, which a plan refuses")
	}
}

// openAPIDocument reads the OpenAPI document the API serves.
func openAPIDocument(t *testing.T) []byte {
	t.Helper()
	resp, err := apiClient().Get(api.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestPageSession signs a page in with a token, and checks the session
// cookie's attributes and that every write needs the session's CSRF token.
func TestPageSession(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "demo", hashOf("a"))
	token := user(t, ns, "editor", addonRule("get", "list", "patch", "update"))
	send := func(method, path, cookie, csrf string, body any) (int, []byte, *http.Response) {
		t.Helper()
		var r io.Reader
		if body != nil {
			data, _ := json.Marshal(body)
			r = bytes.NewReader(data)
		}
		req, err := http.NewRequest(method, api.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: cookie})
		}
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := apiClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out, resp
	}

	code, body, _ := send(http.MethodPost, "/api/v1/session", "", "", map[string]string{"token": "not-a-token"})
	expect(t, "sign in with a bad token", code, body, http.StatusUnauthorized)
	code, body, resp := send(http.MethodPost, "/api/v1/session", "", "", map[string]string{"token": token})
	expect(t, "sign in", code, body, http.StatusOK)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteStrictMode || strings.Contains(cookie.Value, token) {
		t.Fatalf("the session cookie %+v must be HttpOnly, Secure, SameSite=Strict, and not the token", cookie)
	}
	// NOTE: the __Host- prefix holds only with Secure, Path=/ and no
	// Domain: a browser refuses such a cookie otherwise.
	if !strings.HasPrefix(cookie.Name, "__Host-") || cookie.Path != "/" || cookie.Domain != "" {
		t.Fatalf("the session cookie %+v must be a __Host- cookie: Path=/ and no Domain, so that no sibling subdomain can set one", cookie)
	}
	var signedIn struct{ User, CSRFToken string }
	if err := json.Unmarshal(body, &signedIn); err != nil || signedIn.CSRFToken == "" || signedIn.User != "system:serviceaccount:"+ns+":editor" {
		t.Fatalf("the sign-in answer %s; want the user and a CSRF token", body)
	}
	path := "/api/v1/namespaces/" + ns + "/addons/demo"
	code, body, _ = send(http.MethodGet, path, cookie.Value, "", nil)
	expect(t, "a read with the session", code, body, http.StatusOK)
	code, body, _ = send(http.MethodPost, path+"/resume", cookie.Value, "", nil)
	expect(t, "a write without the CSRF token", code, body, http.StatusForbidden)
	code, body, _ = send(http.MethodPost, path+"/resume", cookie.Value, "wrong", nil)
	expect(t, "a write with another CSRF token", code, body, http.StatusForbidden)
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, a); err != nil || !a.Spec.Suspend {
		t.Fatalf("a refused write changed the Addon: %v, suspend %v", err, a.Spec.Suspend)
	}
	code, body, _ = send(http.MethodPost, path+"/resume", cookie.Value, signedIn.CSRFToken, nil)
	expect(t, "a write with the CSRF token", code, body, http.StatusNoContent)
	code, body, _ = send(http.MethodDelete, "/api/v1/session", cookie.Value, "", nil)
	expect(t, "sign out", code, body, http.StatusNoContent)
	code, body, _ = send(http.MethodGet, path, cookie.Value, "", nil)
	expect(t, "a read after signing out", code, body, http.StatusUnauthorized)
}

// TestEvents reads an Addon's events through the API, with the user's own
// right to list events.
func TestEvents(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "demo", hashOf("a"))
	reader := user(t, ns, "reader", addonRule("get"), rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"list"}})
	blind := user(t, ns, "blind", addonRule("get"))
	// Two of the Addon's, one of another Addon, one of another group's
	// kind that is also named Addon.
	for i, ev := range []struct{ note, apiVersion, name string }{
		{"first note", capstanv1.GroupVersion.String(), "demo"},
		{"second note", capstanv1.GroupVersion.String(), "demo"},
		{"another add-on's", capstanv1.GroupVersion.String(), "other"},
		{"another group's", "example.com/v1", "demo"},
	} {
		e := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("demo.%d", i)},
			EventTime:           metav1.NewMicroTime(time.Now().Add(time.Duration(i) * time.Second)),
			ReportingController: "capstan.dev/controller", ReportingInstance: "test",
			Action: "Synced", Reason: "Synced", Type: corev1.EventTypeNormal, Note: ev.note,
			Regarding: corev1.ObjectReference{APIVersion: ev.apiVersion, Kind: "Addon", Namespace: ns, Name: ev.name},
		}
		if err := admin.Create(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	path := "/api/v1/namespaces/" + ns + "/addons/demo/events"
	code, body := call(t, blind, http.MethodGet, path, nil)
	expect(t, "events without the right to list them", code, body, http.StatusForbidden)
	code, body = call(t, reader, http.MethodGet, path, nil)
	expect(t, "events", code, body, http.StatusOK)
	var got struct{ Items []eventsv1.Event }
	if err := json.Unmarshal(body, &got); err != nil || len(got.Items) != 2 || got.Items[0].Note != "second note" {
		t.Errorf("events = %s; want both, newest first", body)
	}
}

// TestListPages: a list answers in pages as the Kubernetes API does, and
// refuses a query it does not take.
func TestListPages(t *testing.T) {
	ns := namespace(t)
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	for _, name := range []string{"a", "b", "c"} {
		addonWithPlan(t, ns, name, hashOf(name))
	}
	path := "/api/v1/namespaces/" + ns + "/addons"
	var names []string
	next := ""
	for page := 0; page < 3; page++ {
		q := "?limit=2"
		if next != "" {
			q += "&continue=" + url.QueryEscape(next)
		}
		code, body := call(t, viewer, http.MethodGet, path+q, nil)
		expect(t, "a page", code, body, http.StatusOK)
		var list capstanv1.AddonList
		if err := json.Unmarshal(body, &list); err != nil || len(list.Items) > 2 {
			t.Fatalf("page %d: %d Addons, %v", page, len(list.Items), err)
		}
		for _, a := range list.Items {
			names = append(names, a.Name)
		}
		if next = list.Continue; next == "" {
			break
		}
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("the pages held %v; want a, b and c once each", names)
	}
	for _, q := range []string{"?limit=0", "?limit=251", "?limit=two", "?limit=1&limit=2", "?labelSelector=x"} {
		code, body := call(t, viewer, http.MethodGet, path+q, nil)
		expect(t, "a list with "+q, code, body, http.StatusBadRequest)
	}
}

// tokenReviews counts, in the API server's audit log, the TokenReviews the
// server has made.
func tokenReviews(t *testing.T) int {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.ObjectRef != nil && e.ObjectRef.Resource == "tokenreviews" && e.User.Username == install.ControllerUser {
			n++
		}
	}
	return n
}
