package guard

import (
	"context"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestBadInput(t *testing.T) {
	runClause(t, []clauseCase{
		{"no apiVersion", "kind: ConfigMap\nmetadata: {name: c}", []string{"malformed-object@apiVersion"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: c}", []string{"malformed-object@kind"}},
		{"neither", "metadata: {name: c}\ndata: {a: b}", []string{"malformed-object@apiVersion,kind"}},
		{"kind is a number", "apiVersion: v1\nkind: 7\nmetadata: {name: c}", []string{"malformed-object@kind"}},
		{"apiVersion with two slashes", "apiVersion: apps/v1/beta\nkind: Deployment\nmetadata: {name: c}", []string{"malformed-object@apiVersion"}},
		{"List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}", []string{"kind-not-allowed@kind"}},
		{"ConfigMapList", "apiVersion: v1\nkind: ConfigMapList\nitems: []", []string{"kind-not-allowed@kind"}},
		{"unknown top-level field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nspec: {replicas: 1}", []string{"unknown-field@spec"}},
		{"misspelt pod field", deployment("containers: [{name: app, image: nginx}]\nHostNetwork: true"), []string{"unknown-field@spec.template.spec.HostNetwork"}},
		{"misspelt securityContext field", deployment("containers: [{name: app, image: nginx, securityContext: {privilaged: true}}]"), []string{"unknown-field@spec.template.spec.containers[0].securityContext.privilaged"}},
		{"pod template in an unexpected place", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  jobTemplate:\n    spec: {template: {spec: {hostNetwork: true, containers: [{name: a, image: b}]}}}",
			[]string{"malformed-object@spec.template.spec.containers", "unknown-field@spec.jobTemplate"}},
		{"volumes of unknown shape", deployment("containers: [{name: app, image: nginx}]\nvolumes: {root: {hostPath: {path: /}}}"), []string{"malformed-object@spec.template.spec.volumes"}},
		{"containers as a string", deployment("containers: nginx"), []string{"malformed-object@spec.template.spec.containers"}},
		{"hostNetwork as a string", deployment("hostNetwork: \"true\"\ncontainers: [{name: app, image: nginx}]"), []string{"malformed-object@spec.template.spec.hostNetwork"}},
		{"template as a list", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: [{spec: {}}]}", []string{"malformed-object@spec.template"}},
		{"near-miss: well-formed", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}", nil},
		{"bad quantity", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: d}\nspec: {resources: {requests: {storage: lots}}}", []string{"malformed-object@"}},
		{"empty document", "---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}", nil},
	})
}

func TestBadInputObjects(t *testing.T) {
	objs := []*unstructured.Unstructured{
		nil,
		{},
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "nan"}, "data": map[string]any{"x": math.NaN()}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": "c"}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}, "data": map[string]any{"k": "not base64!"}}},
	}
	got := ruleKeys(Check(context.Background(), objs, testContext()))
	want := []string{"malformed-object@", "malformed-object@", "malformed-object@", "malformed-object@", "malformed-object@metadata"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := Harden(objs); err != nil {
		t.Errorf("Harden touches only Deployments and Jobs, got %v", err)
	}
}

// TestMessagesCarryNoValues feeds values that only a secret would hold into
// fields of the wrong type and checks no message repeats them.
func TestMessagesCarryNoValues(t *testing.T) {
	const secret = "98765432109876543210"
	manifests := []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {password: " + secret + "}",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: " + secret + "}",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: [" + secret + "]}",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: " + secret,
		deployment("containers: [{name: app, image: nginx, env: [{name: TOKEN, value: {v: \"" + secret + "\"}}], ports: [{containerPort: " + secret + "}]}]"),
		deployment("containers: [{name: app, image: nginx, env: [{name: TOKEN, value: " + secret + "}]}]"),
		deployment("containers: [{name: app, image: nginx, resources: {limits: {cpu: \"" + secret + "x\"}}}]"),
		"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80, targetPort: " + secret + "}]}",
		"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80, targetPort: [" + secret + "]}]}",
	}
	for _, m := range manifests {
		vs := Check(context.Background(), parse(t, m), testContext())
		if len(vs) == 0 {
			t.Errorf("expected a violation for:\n%s", m)
		}
		t.Log(messages(vs))
		for _, v := range vs {
			if strings.Contains(v.Message, secret) || strings.Contains(v.Path, secret) {
				t.Errorf("violation repeats a value: %+v", v)
			}
		}
	}
}

func TestUnknownFieldMessage(t *testing.T) {
	vs := Check(context.Background(), parse(t, deployment("containers: [{name: app, image: nginx}]\nHostNetwork: true")), testContext())
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "HostNetwork") || !strings.Contains(vs[0].Message, "apps/v1 Deployment") {
		t.Fatalf("the message should name the field and the kind: %+v", vs)
	}
	vs = Check(context.Background(), parse(t, deployment("containers: nginx")), testContext())
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "needs a list") {
		t.Fatalf("the message should say a list is needed: %+v", vs)
	}
}
