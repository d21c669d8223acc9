package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/plan"
)

// TestWebhookWait checks which refused dry runs may wait for earlier
// waves: only calls that failed to a webhook an earlier wave registers,
// and only while the plan changes nothing of those waves.
func TestWebhookWait(t *testing.T) {
	obj := func(apiVersion, kind, name, wave string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{}}
		o.SetAPIVersion(apiVersion)
		o.SetKind(kind)
		o.SetName(name)
		if wave != "" {
			o.SetAnnotations(map[string]string{apply.WaveAnnotation: wave})
		}
		return o
	}
	hook := obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "op", "")
	hook.Object["webhooks"] = []any{map[string]any{"name": "validate.dbs.example.com"}}
	operator := obj("apps/v1", "Deployment", "operator", "")
	db := obj("example.com/v1", "DB", "main", "1")
	objs := []*unstructured.Unstructured{hook, operator, db}
	unreachable := `Internal error occurred: failed calling webhook "validate.dbs.example.com": failed to call webhook: Post "https://operator.apps.svc:443/validate": dial tcp 10.0.0.1:443: connect: connection refused`
	previews := func(actions [3]capstanv1.Action, dbError string) []plan.ObjectResult {
		var out []plan.ObjectResult
		for i, o := range objs {
			r := plan.ObjectResult{Ref: capstanv1.RefOf(o)}
			r.Action = actions[i]
			out = append(out, r)
		}
		out[2].Error = dbError
		return out
	}
	same := [3]capstanv1.Action{capstanv1.ActionUnchanged, capstanv1.ActionUnchanged, capstanv1.ActionCreate}
	for _, tc := range []struct {
		name     string
		previews []plan.ObjectResult
		want     bool
	}{
		{name: "the webhook of wave 0 does not answer", previews: previews(same, unreachable), want: true},
		{name: "no refusal", previews: previews(same, "")},
		{name: "the webhook answered and refused", previews: previews(same, `admission webhook "validate.dbs.example.com" denied the request: size too big`)},
		{name: "another product's webhook", previews: previews(same, `Internal error occurred: failed calling webhook "policy.kyverno.svc": failed to call webhook`)},
		{name: "a refusal of another kind", previews: previews(same, `DB.example.com "main" is invalid: spec.size: Invalid value`)},
		{name: "the plan changes wave 0, which cannot turn Current while it is refused",
			previews: previews([3]capstanv1.Action{capstanv1.ActionUnchanged, capstanv1.ActionUpdate, capstanv1.ActionCreate}, unreachable)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wave, before, refused, ok := webhookWait(objs, tc.previews)
			if ok != tc.want {
				t.Fatalf("webhookWait = %v; want %v", ok, tc.want)
			}
			if ok && (wave != 1 || len(before) != 2 || len(refused) != 1 || refused[0].Name != "main") {
				t.Errorf("webhookWait = wave %d, %d before, refused %v", wave, len(before), refused)
			}
		})
	}
}
