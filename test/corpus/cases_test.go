package corpus_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// chartCase is one chart of the corpus: its name in bin/charts (see
// hack/charts/corpus.txt), the values both tools install it with, and the
// fields it generates at random.
type chartCase struct {
	name      string
	values    string
	generated []generated
	// helmFails, when set, is part of the error with which helm install
	// fails: Capstan must fail with it too, and apply nothing.
	helmFails string
	// healthChecks are the Addon's spec.healthChecks.
	healthChecks []capstanv1.HealthCheck
}

// apiServicesJudged is the health check of a chart that registers an
// APIService backed by its own pods. Capstan waits for an APIService's
// Available condition, which helm --wait does not read; on the local
// control plane kwok starts no containers and the egress guard refuses the
// Service's cluster IP, so the aggregator can only ever find it
// unavailable. The check waits for the aggregator to have judged it at
// all, as helm's wait ends once it exists.
var apiServicesJudged = []capstanv1.HealthCheck{{
	APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService",
	Current: "has(status.conditions) && status.conditions.exists(c, c.type == 'Available')",
}}

// corpus is every chart that hack/charts/corpus.txt fetches; the features
// each exercises are in docs/rendering.md.
var corpus = []chartCase{
	{name: "cert-manager", values: "crds:\n  enabled: true\n"},
	{name: "trust-manager", values: "app:\n  trust:\n    namespace: corpus-trust-manager\n  webhook:\n    tls:\n      helmCert:\n        enabled: true\n",
		// The webhook's certificate, from genCA and genSignedCert, and a
		// random annotation that restarts the pods when it changes.
		generated: []generated{
			{key: "/Secret/corpus-trust-manager/trust-manager-tls", path: []string{"data", "ca.crt"}},
			{key: "/Secret/corpus-trust-manager/trust-manager-tls", path: []string{"data", "tls.crt"}},
			{key: "/Secret/corpus-trust-manager/trust-manager-tls", path: []string{"data", "tls.key"}},
			{key: "admissionregistration.k8s.io/ValidatingWebhookConfiguration//trust-manager", path: []string{"webhooks", "0", "clientConfig", "caBundle"}},
			{key: "apps/Deployment/corpus-trust-manager/trust-manager", path: []string{"spec", "template", "metadata", "annotations", "rollme-due-to-helm-cert"}},
		}},
	{name: "sealed-secrets"},
	{name: "dapr", values: "dapr_scheduler:\n  cluster:\n    inMemoryStorage: true\n"},
	{name: "flagger"},
	{name: "grafana"},
	// This podinfo's HorizontalPodAutoscaler sets autoscaling/v2beta1's
	// fields in autoscaling/v2, which the API server refuses.
	{name: "podinfo", helmFails: "targetAverageUtilization"},
	{name: "loadtester"},
	{name: "kyverno"},
	{name: "gatekeeper"},
	{name: "vertical-pod-autoscaler"},
	{name: "ingress-nginx"},
	{name: "descheduler"},
	{name: "kueue", healthChecks: apiServicesJudged},
	{name: "kwok"},
	{name: "metrics-server", healthChecks: apiServicesJudged},
}

// result is one chart's figures, printed at the end.
type result struct {
	chart          string
	objects, hooks int
	helm, capstan  time.Duration
}

var results []result

// report prints every checked chart's figures.
func report() {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(os.Stdout, "%-24s %8s %6s %10s %10s\n", "chart", "objects", "hooks", "helm", "capstan")
	for _, r := range results {
		fmt.Fprintf(os.Stdout, "%-24s %8d %6d %10s %10s\n", r.chart, r.objects, r.hooks,
			r.helm.Round(100*time.Millisecond), r.capstan.Round(100*time.Millisecond))
	}
}

// jsonValues turns the case's YAML values into the Addon's spec.values.
func jsonValues(t *testing.T, y string) *apiextensionsv1.JSON {
	t.Helper()
	if y == "" {
		return nil
	}
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(j) {
		t.Fatalf("values %q are not JSON", y)
	}
	return &apiextensionsv1.JSON{Raw: j}
}
