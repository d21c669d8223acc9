package server_test

import (
	"context"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAPIEditIsMadeToTheSpecItChecked: an edit of spec.values sent
// without uid and generation is checked against the Addon read before a
// chart fetch that may be slow; when another writer changes the spec
// meanwhile (moves a secret input out of spec.values, say), the edit is
// 409 and the other writer's spec is kept, so that a secret the check
// took for one held already is not written back.
func TestAPIEditIsMadeToTheSpecItChecked(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"))
	slow := newSlowCharts(t)
	key := client.ObjectKey{Namespace: ns, Name: "raced"}
	if err := admin.Create(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "raced"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: slow.URL + "/slow-1.0.0.tgz?race=" + ns},
			Values: jsonValues(`{"greeting":"hi","auth":{"password":"A"}}`)}}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		code, body, _ := callHeaders(t, api.URL, editor, http.MethodPatch, "/api/v1/namespaces/"+ns+"/addons/raced", map[string]any{
			"spec": map[string]any{"values": map[string]any{"greeting": "hello"}}})
		done <- answer{code, body}
	}()
	<-slow.asked
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Values = jsonValues(`{"greeting":"hi"}`)
	if err := admin.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	slow.release()
	got := <-done
	expect(t, "an edit whose Addon's spec changed during the check's fetch", got.code, got.body, http.StatusConflict)
	if values := specValuesOf(t, key); !equalJSON(values, map[string]any{"greeting": "hi"}) {
		t.Errorf("after the refused edit, spec.values is %v; want the other writer's", values)
	}
}
