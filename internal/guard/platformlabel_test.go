package guard

import (
	"context"
	"strings"
	"testing"
)

func TestPlatformLabelAndSubdomain(t *testing.T) {
	const app = "containers: [{name: app, image: nginx}]"
	templateLabels := func(manifest, lbls string) string {
		return strings.Replace(manifest, "      labels: {app: web}\n", "      labels: "+lbls+"\n", 1)
	}
	objectLabels := func(manifest, lbls string) string {
		return strings.Replace(manifest, "  name: web\n", "  name: web\n  labels: "+lbls+"\n", 1)
	}
	headless := "---\napiVersion: v1\nkind: Service\nmetadata: {name: web-headless}\nspec: {clusterIP: None, selector: {app: web}, ports: [{port: 80}]}\n"
	hookJob := `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {helm.sh/hook: pre-delete}
spec:
  template:
    metadata:
      labels: {capstan.dev/platform: migrate}
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: busybox}]
`
	runClause(t, []clauseCase{
		{"on a Deployment's pod template", templateLabels(deployment(app), "{app: web, capstan.dev/platform: api}"),
			[]string{"platform-label@spec.template.metadata.labels[capstan.dev/platform]"}},
		{"on a pod template with an empty value", templateLabels(deployment(app), `{app: web, capstan.dev/platform: ""}`),
			[]string{"platform-label@spec.template.metadata.labels[capstan.dev/platform]"}},
		{"on a hook Job's pod template", hookJob,
			[]string{"platform-label@spec.template.metadata.labels[capstan.dev/platform]"}},
		{"on the Deployment itself", objectLabels(deployment(app), "{capstan.dev/platform: api}"),
			[]string{"platform-label@metadata.labels[capstan.dev/platform]"}},
		{"on a Service, which the platform's monitoring may select", "apiVersion: v1\nkind: Service\nmetadata: {name: api, labels: {capstan.dev/platform: api}}\nspec: {selector: {app: web}, ports: [{port: 80}]}",
			[]string{"platform-label@metadata.labels[capstan.dev/platform]"}},
		{"on a ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, labels: {capstan.dev/platform: dashboards}}",
			[]string{"platform-label@metadata.labels[capstan.dev/platform]"}},
		{"a subdomain naming a Service the chart does not render", deployment("subdomain: postgres-headless\nhostname: postgres-0\n" + app),
			[]string{"subdomain-not-rendered@spec.template.spec.subdomain"}},
		{"a Job's subdomain naming a Service the chart does not render", job("subdomain: platform\n"+app, false),
			[]string{"subdomain-not-rendered@spec.template.spec.subdomain"}},
		{"near-miss: the label as a value", templateLabels(deployment(app), "{app: web, tier: capstan.dev/platform}"), nil},
		{"near-miss: a label in Capstan's domain of another name", templateLabels(deployment(app), "{app: web, capstan.dev/platform-client: api}"), nil},
		{"near-miss: the label as an annotation", deploymentWithAnnotations("capstan.dev/platform: api", app), nil},
		{"near-miss: labels any chart sets", objectLabels(templateLabels(deployment(app), "{app: web, app.kubernetes.io/managed-by: Helm}"), "{app.kubernetes.io/managed-by: Helm}"), nil},
		{"near-miss: a subdomain naming the chart's own headless Service", deployment("subdomain: web-headless\nhostname: web-0\n"+app) + headless, nil},
	})
}

func TestPlatformLabelMessage(t *testing.T) {
	manifest := strings.Replace(deployment("containers: [{name: app, image: nginx}]"), "      labels: {app: web}\n", "      labels: {app: web, capstan.dev/platform: api}\n", 1)
	vs := Check(context.Background(), parse(t, manifest), testContext())
	if len(vs) != 1 {
		t.Fatalf("want one violation: %+v", vs)
	}
	for _, want := range []string{PlatformLabel, "spec.template.metadata.labels", "platform", "remove it"} {
		if !strings.Contains(vs[0].Message, want) {
			t.Errorf("the message should say %s: %s", want, vs[0].Message)
		}
	}
}
