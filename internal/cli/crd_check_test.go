package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/crdschema"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

// TestControllerWaitsForItsCRDs runs the controller, as `capstan
// controller` does, against an Addon CRD stamped with another schema, as
// after a `helm upgrade` that left the chart's crds/ unapplied. It
// reconciles no add-on, takes no Lease, and /readyz says which CRD, both
// stamps and the command to run, while /healthz stays ok. Once the CRD of
// this version is applied again, the same process starts, without a
// restart, and the Addon gets its status.
func TestControllerWaitsForItsCRDs(t *testing.T) {
	cluster, admin := apiServer(t)
	ctx := t.Context()
	want, err := crdschema.Expected()
	if err != nil {
		t.Fatal(err)
	}
	var addons *apiextensionsv1.CustomResourceDefinition
	for _, c := range want {
		if c.Name == "addons.capstan.dev" {
			addons = c
		}
	}
	if addons == nil {
		t.Fatal("the binary embeds no Addon CRD")
	}
	stamp := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, crdschema.Annotation, value)
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: addons.Name}}
		if err := admin.Patch(context.Background(), crd, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	const old = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	stamp(old)
	t.Cleanup(func() { stamp(addons.Annotations[crdschema.Annotation]) })

	ns := testNamespace(t, admin)
	// A chart on loopback, which the fetch guard refuses: any status the
	// controller writes shows that it reconciled, with nothing dialled.
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://127.0.0.1:1/held-1.0.0.tgz"}}}
	if err := admin.Create(ctx, addon); err != nil {
		t.Fatal(err)
	}

	ports, err := testcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	probes := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	const lease = "capstan-crd-check"
	o := parseControllerFlags(t, "--namespace="+install.Namespace, "--metrics-bind-address=0", "--http-bind-address=0",
		"--health-probe-bind-address="+strings.TrimPrefix(probes, "http://"), "--render-in-process",
		"--leader-elect", "--leader-election-id="+lease)
	o.crdCheckInterval = 300 * time.Millisecond
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runController(runCtx, cluster.ConfigFor(install.ControllerUser), o) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the controller did not stop within 30 s")
		}
	})

	probe := func(path string) (int, string) {
		resp, err := http.Get(probes + path)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var code int
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = probe("/readyz")
		return code != 0, nil
	}); err != nil {
		t.Fatalf("/readyz did not answer within 30 s: %s", body)
	}
	if code != http.StatusInternalServerError {
		t.Errorf("/readyz answers %d with the CRD of another version; want 500:\n%s", code, body)
	}
	for _, part := range []string{"CRD addons.capstan.dev is not the one this controller was built with", old, addons.Annotations[crdschema.Annotation],
		crdschema.FixCommand} {
		if !strings.Contains(body, part) {
			t.Errorf("/readyz does not say %q:\n%s", part, body)
		}
	}
	if code, body := probe("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answers %d while the controller waits; want 200 (a restart does not help): %s", code, body)
	}

	// Long enough for a reconcile: the controller writes a fetch failure's
	// status within a second when it runs.
	time.Sleep(3 * time.Second)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(addon), addon); err != nil {
		t.Fatal(err)
	}
	if addon.Status.ObservedGeneration != 0 || addon.Status.Phase != "" || len(addon.Status.Conditions) > 0 {
		t.Errorf("the Addon was reconciled through the CRD of another version: %+v", addon.Status)
	}
	err = admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: lease}, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the waiting controller campaigned for the Lease (%v); it would take it from a replica that works", err)
	}

	stamp(addons.Annotations[crdschema.Annotation])
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(addon), addon); err != nil {
			return false, err
		}
		return addon.Status.ObservedGeneration > 0, nil
	}); err != nil {
		t.Fatalf("the Addon has no status 90 s after its CRD was applied again (%v): %+v", err, addon.Status)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = probe("/readyz")
		return code == http.StatusOK, nil
	}); err != nil {
		t.Errorf("/readyz answers %d once the CRDs match: %s", code, body)
	}
}
