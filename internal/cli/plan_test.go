package cli

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// TestPlanTakesTheControllersConfiguration plans an Addon of a second
// trusted namespace whose chart reads the platform's facts under another
// key than the default. With the default flags the plan is of the
// restricted profile and without the facts; with --trusted-namespaces,
// --platform-configmap and --platform-key as the controller would run, it
// is the controller's: the cluster profile, the facts under their key.
func TestPlanTakesTheControllersConfiguration(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	platform := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: ns + "-platform"},
		Data: map[string]string{"hostname": "apps.example.com"}}
	if err := c.Create(t.Context(), platform); err != nil {
		t.Fatal(err)
	}

	archive, err := testcontroller.ChartArchive("facts", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: facts\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: facts\ndata:\n  host: {{ (.Values.platform).hostname | default \"none\" | quote }}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	charts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(charts.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: charts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "facts"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: charts.URL + "/facts-1.0.0.tgz"}}}
	if err := c.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}

	// The plan's diff of the chart's ConfigMap: a restricted add-on's
	// objects carry an owner reference to the Addon, a cluster-profile
	// add-on's none.
	diff := func(flags ...string) string {
		t.Helper()
		args := append([]string{"plan", "facts", "-n", ns, "-o", "json", "--fetch-allow", "127.0.0.1/32", "--ca-file", caFile}, flags...)
		out, err := capstan(t, cluster, args...)
		if err != nil {
			t.Fatalf("capstan plan %s: %v\n%s", strings.Join(flags, " "), err, out)
		}
		var p capstanv1.Plan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("capstan plan %s printed no plan: %v\n%s", strings.Join(flags, " "), err, out)
		}
		for _, o := range p.Objects {
			if o.Kind == "ConfigMap" && o.Name == "facts" {
				return o.Diff
			}
		}
		t.Fatalf("capstan plan %s: no ConfigMap in the plan\n%s", strings.Join(flags, " "), out)
		return ""
	}

	if d := diff(); !strings.Contains(d, "ownerReferences") || !strings.Contains(d, "host: none") {
		t.Errorf("with the default flags, the diff is\n%s\nwant the restricted profile's owner reference and no facts", d)
	}
	d := diff("--trusted-namespaces", install.Namespace+","+ns, "--platform-configmap", platform.Name, "--platform-key", "platform")
	if strings.Contains(d, "ownerReferences") || !strings.Contains(d, "host: apps.example.com") {
		t.Errorf("with the controller's flags, the diff is\n%s\nwant the cluster profile, with no owner reference, and the platform's hostname", d)
	}
}
