package server_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/cli"
)

// TestEditFormKeepsNulls saves the edit form with the YAML editor setting
// a map the add-on has to null, a key inside another map to null, and a
// new key to null, as Helm's key: null removes a chart default: the saved
// spec.values holds those nulls, as the schema check saw them, and keeps
// every other value.
func TestEditFormKeepsNulls(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "nulls"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"},
			Values: jsonValues(`{"greeting":"hi","replicas":1,"resources":{"limits":{"cpu":"1"}},"extra":{"cpu":1,"mem":2}}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))
	edit := "/addons/" + ns + "/nulls/edit"
	code, page := sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d %s", code, page)
	}
	form := url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")}, "mode": {hidden(t, page, "mode")},
		"v.greeting": {"hi"}, "v.replicas": {"1"},
		"yaml": {"resources: null\nextra:\n  cpu: null\n  mem: 2\nnewkey: null\n"}}
	if code, page = sess.send(t, http.MethodPost, edit, form); code != http.StatusSeeOther {
		t.Fatalf("saving the values: %d\n%s", code, page)
	}
	want := map[string]any{"greeting": "hi", "replicas": float64(1), "resources": nil, "extra": map[string]any{"cpu": nil, "mem": float64(2)}, "newkey": nil}
	if got := specValuesOf(t, key); !equalJSON(got, want) {
		t.Errorf("the values saved: %v; want %v, the nulls kept", got, want)
	}
}

// TestReplaceValuesOfAChangedSpec changes an Addon's spec between the
// check of the generation a form was filled from and the write: the API
// server refuses the write, which tests that generation, so nothing of the
// other person's change is undone; the error says that the Addon changed,
// and the Secret made for the secret inputs is deleted again.
func TestReplaceValuesOfAChangedSpec(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	a := addonWithPlan(t, ns, "racing", hashOf("a"))
	key := client.ObjectKeyFromObject(a)
	real, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	racing := interceptor.NewClient(real, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*capstanv1.Addon); ok {
				other := &capstanv1.Addon{}
				if err := c.Get(ctx, key, other); err != nil {
					return err
				}
				before := client.MergeFrom(other.DeepCopy())
				other.Spec.Values = jsonValues(`{"theirs":true}`)
				if err := c.Patch(ctx, other, before); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	_, err = addons.ReplaceValues(ctx, racing, key, addons.Seen{UID: a.UID, Generation: a.Generation},
		map[string]any{"mine": true}, map[string]string{"auth.password": "s3cret"})
	if !errors.Is(err, addons.ErrChanged) {
		t.Fatalf("the write after a change: %v; want ErrChanged", err)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"theirs": true}) {
		t.Errorf("the values after the refused write: %v; want the other change kept", got)
	}
	if left := valuesSecrets(t, ns, "racing"); len(left) > 0 {
		t.Errorf("a refused write left the values Secrets %v", left)
	}
}

// TestEditFormKeepsExactNumbers saves the edit form with one value changed
// in the YAML editor as the page shows it: an integer past 2^53 that
// nobody changed is saved with the digits spec.values had, not rounded by
// the page's float64, so a save writes no drift into a value it did not
// change.
func TestEditFormKeepsExactNumbers(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "exact"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"},
			Values: jsonValues(`{"greeting":"hi","replicas":1,"id":9007199254740993,"x":1}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))
	edit := "/addons/" + ns + "/exact/edit"
	code, page := sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d %s", code, page)
	}
	m := regexp.MustCompile(`(?s)<textarea id="yaml" name="yaml"[^>]*>(.*?)</textarea>`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(m[1], "x: 1\n") {
		t.Fatalf("the YAML editor does not show x: 1:\n%s", page)
	}
	form := url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")}, "mode": {hidden(t, page, "mode")},
		"v.greeting": {"hi"}, "v.replicas": {"1"}, "yaml": {strings.Replace(html.UnescapeString(m[1]), "x: 1\n", "x: 2\n", 1)}}
	if code, page = sess.send(t, http.MethodPost, edit, form); code != http.StatusSeeOther {
		t.Fatalf("saving the values: %d\n%s", code, page)
	}
	got := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	raw := string(got.Spec.Values.Raw)
	if !strings.Contains(raw, `"id":9007199254740993`) || !strings.Contains(raw, `"x":2`) {
		t.Errorf("the values saved: %s; want id 9007199254740993 as it was, and x 2", raw)
	}
}
