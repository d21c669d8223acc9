package testcluster_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// refusalTimeout is how long a refused webhook call may take. A webhook's
// own timeout is 30 s here, so a refusal that waits for it fails the test.
const refusalTimeout = 10 * time.Second

// webhookTimeoutSeconds is the webhooks' timeout in these tests.
const webhookTimeoutSeconds = 30

// TestEgressGuard checks that every connection kube-apiserver makes toward
// the cluster passes through the egress guard. The subtests run in order:
// the first proves, with loopback servers only, that the guard is in the
// path; only then do the others make the API server call Service addresses
// off loopback, which the guard must refuse without dialling.
func TestEgressGuard(t *testing.T) {
	if !t.Run("a webhook routed to a loopback server is called and honoured", testRoutedWebhook) {
		t.Fatal("the egress guard is not in the API server's path; the tests that name addresses off loopback do not run")
	}
	if !t.Run("a URL webhook on loopback passes through the guard", testURLWebhookOnLoopback) {
		t.Fatal("the control plane egress does not pass through the guard; the tests that name addresses off loopback do not run")
	}
	t.Run("a webhook whose Service has a pod is refused at once", testWebhookToAPodIsRefused)
	t.Run("an APIService whose Service has a pod is unavailable", testAPIServiceToAPodIsUnavailable)
	t.Run("no component holds a socket off loopback", func(t *testing.T) {
		socks, err := cluster.OffLoopbackSockets()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range socks {
			t.Errorf("a socket off loopback: %s", s)
		}
	})
}

// reviewer is an admission webhook on loopback that denies objects labelled
// verdictLabel=deny.
type reviewer struct {
	calls atomic.Int32
	addr  string
}

const verdictLabel = "capstan.dev/egress-verdict"

func serveReviewer(t *testing.T, hosts ...string) *reviewer {
	t.Helper()
	cert, err := cluster.ServingCertificate(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	r := &reviewer{addr: ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.calls.Add(1)
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		var obj metav1.PartialObjectMetadata
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: obj.Labels[verdictLabel] != "deny"}
		if !resp.Allowed {
			resp.Result = &metav1.Status{Message: "denied by the test webhook", Code: http.StatusForbidden}
		}
		review.Response = resp
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// namespaceWebhook is a ValidatingWebhookConfiguration that reviews the
// creation of namespaces labelled capstan.dev/egress-test=<key> only, so
// that the other tests sharing the cluster are not affected.
func namespaceWebhook(t *testing.T, key string, cc admissionregistrationv1.WebhookClientConfig) {
	t.Helper()
	cc.CABundle = cluster.CACertPEM()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: key},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "namespaces.egress.capstan.dev",
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"capstan.dev/egress-test": key}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](webhookTimeoutSeconds),
		}},
	}
	cs := client(t)
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the webhook configuration: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), key, metav1.DeleteOptions{})
	})
}

// createLabelledNamespace creates a namespace that the webhook with key
// reviews, and deletes it again if it was created.
func createLabelledNamespace(ctx context.Context, cs kubernetes.Interface, key, verdict string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "egress-",
		Labels:       map[string]string{"capstan.dev/egress-test": key, verdictLabel: verdict},
	}}
	created, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err == nil {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	}
	return err
}

// webhookError waits until the API server uses the new webhook, that is
// until creating a namespace with verdict fails, and returns that error.
func webhookError(t *testing.T, key, verdict string) error {
	t.Helper()
	cs := client(t)
	var last error
	eventually(t, "the API server to call the new webhook", func(ctx context.Context) (bool, error) {
		last = createLabelledNamespace(ctx, cs, key, verdict)
		return last != nil, nil
	})
	return last
}

func testRoutedWebhook(t *testing.T) {
	ns := namespace(t)
	cs := client(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := serveReviewer(t, "hook."+ns+".svc")
	if err := cluster.RouteService(t.Context(), ns, "hook", 443, r.addr); err != nil {
		t.Fatal(err)
	}
	namespaceWebhook(t, ns, admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "hook", Path: ptr.To("/validate"), Port: ptr.To[int32](443)},
	})

	err := webhookError(t, ns, "deny")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "denied by the test webhook") {
		t.Fatalf("creating a namespace the webhook denies: %v; want the webhook's denial", err)
	}
	if err := createLabelledNamespace(t.Context(), cs, ns, "allow"); err != nil {
		t.Fatalf("creating a namespace the webhook allows: %v", err)
	}
	if r.calls.Load() < 2 {
		t.Errorf("the webhook was called %d times; want at least 2", r.calls.Load())
	}
	if cluster.Egress.Allowed()[r.addr] < 1 {
		t.Errorf("the guard opened no connection to %s: the call did not pass through it (allowed: %v)", r.addr, cluster.Egress.Allowed())
	}
}

func testURLWebhookOnLoopback(t *testing.T) {
	key := fmt.Sprintf("url-%d", time.Now().UnixNano())
	r := serveReviewer(t, "127.0.0.1")
	namespaceWebhook(t, key, admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + r.addr + "/validate")})
	err := webhookError(t, key, "deny")
	if !strings.Contains(err.Error(), "denied by the test webhook") {
		t.Fatalf("creating a namespace the webhook denies: %v; want the webhook's denial", err)
	}
	if cluster.Egress.Allowed()[r.addr] < 1 {
		t.Errorf("the guard opened no connection to %s: URL webhooks bypass it (allowed: %v)", r.addr, cluster.Egress.Allowed())
	}
}

// podBehindService runs a Deployment that kwok "runs" behind a Service, and
// returns the Service's ClusterIP once the Deployment is Available.
func podBehindService(t *testing.T, ns, name string) string {
	t.Helper()
	cs := client(t)
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: name, Image: "registry.example/" + name + ":1.0",
					Ports: []corev1.ContainerPort{{ContainerPort: 8443}},
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}},
		},
	}
	created, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment "+name+" to become Available", func(ctx context.Context) (bool, error) {
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.AvailableReplicas == 1, nil
	})
	return created.Spec.ClusterIP
}

func testWebhookToAPodIsRefused(t *testing.T) {
	ns := namespace(t)
	dest := net.JoinHostPort(podBehindService(t, ns, "hook"), "443")
	namespaceWebhook(t, ns, admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "hook", Path: ptr.To("/validate")},
	})

	err := webhookError(t, ns, "allow")
	for _, want := range []string{"failed calling webhook", "egress guard", dest} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the webhook's error %q does not mention %q", err, want)
		}
	}
	began := time.Now()
	err = createLabelledNamespace(t.Context(), client(t), ns, "allow")
	if took := time.Since(began); err == nil || took > refusalTimeout {
		t.Errorf("a second create: %v after %s; want a refusal within %s, not the webhook's %d s timeout", err, took, refusalTimeout, webhookTimeoutSeconds)
	}
	if n := cluster.Egress.RefusalsTo(dest); n < 2 {
		t.Errorf("the guard counted %d refusals of %s; want at least 2", n, dest)
	}
	for _, r := range cluster.Egress.Refusals() {
		if r.Destination == dest && r.Caller != "kube-apiserver (cluster egress)" {
			t.Errorf("refusal %v: the caller should be kube-apiserver's cluster egress", r)
		}
	}
}

func testAPIServiceToAPodIsUnavailable(t *testing.T) {
	ns := namespace(t)
	dest := net.JoinHostPort(podBehindService(t, ns, "aggregated"), "443")
	group := ns + ".egress.capstan.dev"
	name := "v1alpha1." + group
	apiServices := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "version": "v1alpha1",
			"service":               map[string]any{"namespace": ns, "name": "aggregated", "port": int64(443)},
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(1000),
			"versionPriority":       int64(15),
		},
	}}
	if _, err := dyn.Resource(apiServices).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// NOTE: an unavailable APIService makes discovery incomplete for every
	// client of the cluster, so it must not outlive the test.
	t.Cleanup(func() {
		_ = dyn.Resource(apiServices).Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	var message string
	eventually(t, "the APIService to be unavailable after a failed discovery check", func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(apiServices).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c["type"] == "Available" && c["status"] == "False" && c["reason"] == "FailedDiscoveryCheck" {
				message, _ = c["message"].(string)
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", conds)
	})
	if !strings.Contains(message, "egress guard") || !strings.Contains(message, dest) {
		t.Errorf("the Available condition says %q; want the guard's refusal of %s", message, dest)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = dc.ServerGroupsAndResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if !errors.As(err, &failed) {
		t.Fatalf("discovery said %v; want the group %s reported as failed", err, group)
	}
	if _, ok := failed.Groups[schema.GroupVersion{Group: group, Version: "v1alpha1"}]; !ok {
		t.Errorf("discovery failed for %v; want %s/v1alpha1 among them", failed.Groups, group)
	}
	if n := cluster.Egress.RefusalsTo(dest); n < 1 {
		t.Errorf("the guard counted no refusal of %s", dest)
	}
}
