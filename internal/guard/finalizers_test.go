package guard

import (
	"context"
	"strings"
	"testing"
)

func TestMetadataFinalizers(t *testing.T) {
	const app = "containers: [{name: app, image: nginx}]"
	withFinalizers := func(manifest, finalizers string) string {
		return strings.Replace(manifest, "  name: web\n", "  name: web\n  finalizers: "+finalizers+"\n", 1)
	}
	templateFinalizers := func(manifest, finalizers string) string {
		return strings.Replace(manifest, "      labels: {app: web}\n", "      labels: {app: web}\n      finalizers: "+finalizers+"\n", 1)
	}
	pvc := func(finalizers string) string {
		return "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, finalizers: " + finalizers + "}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}"
	}
	hookJob := `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {helm.sh/hook: post-install}
  finalizers: [orphan]
spec:
  template:
    metadata:
      finalizers: [x.io/y]
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: busybox}]
`
	runClause(t, []clauseCase{
		{"a finalizer nobody removes", withFinalizers(deployment(app), "[example.com/hold]"),
			[]string{"finalizers@metadata.finalizers[0]"}},
		{"orphan", withFinalizers(deployment(app), "[orphan]"),
			[]string{"finalizers@metadata.finalizers[0]"}},
		{"foregroundDeletion and another", withFinalizers(deployment(app), "[foregroundDeletion, example.com/hold]"),
			[]string{"finalizers@metadata.finalizers[0]", "finalizers@metadata.finalizers[1]"}},
		{"on the pod template", templateFinalizers(deployment(app), "[x.io/y]"),
			[]string{"finalizers@spec.template.metadata.finalizers[0]"}},
		{"on a hook Job and its template", hookJob,
			[]string{"finalizers@metadata.finalizers[0]", "finalizers@spec.template.metadata.finalizers[0]"}},
		{"on a ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, finalizers: [example.com/hold]}", []string{"finalizers@metadata.finalizers[0]"}},
		{"on a claim, beside the API server's own", pvc("[kubernetes.io/pvc-protection, example.com/hold]"), []string{"finalizers@metadata.finalizers[1]"}},
		{"the claim's protection on a Secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, finalizers: [kubernetes.io/pvc-protection]}", []string{"finalizers@metadata.finalizers[0]"}},
		{"near-miss: no finalizers", deployment(app), nil},
		{"near-miss: an empty list", withFinalizers(templateFinalizers(deployment(app), "[]"), "[]"), nil},
		{"near-miss: the claim's protection the API server sets anyway", pvc("[kubernetes.io/pvc-protection]"), nil},
	})
}

func TestFinalizersMessage(t *testing.T) {
	vs := Check(context.Background(), parse(t, strings.Replace(deployment("containers: [{name: app, image: nginx}]"), "  name: web\n", "  name: web\n  finalizers: [example.com/hold]\n", 1)), testContext())
	if len(vs) != 1 {
		t.Fatalf("want one violation: %+v", vs)
	}
	for _, want := range []string{`"example.com/hold"`, "orphan", "foregroundDeletion", "remove metadata.finalizers"} {
		if !strings.Contains(vs[0].Message, want) {
			t.Errorf("the message should say %s: %s", want, vs[0].Message)
		}
	}
}
