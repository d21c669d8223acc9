package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// chartServer serves the tests' charts over TLS on loopback;
// chartRequests counts the requests it answered.
var (
	chartServer   *httptest.Server
	chartRequests atomic.Int64
)

// formSchema has every kind of field the form renders.
const formSchema = `{
  "type": "object",
  "required": ["greeting"],
  "properties": {
    "greeting": {"type": "string", "default": "hello", "description": "What the page says."},
    "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
    "mode": {"type": "string", "enum": ["fast", "safe"]},
    "debug": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "auth": {"type": "object", "properties": {
      "password": {"type": "string", "writeOnly": true},
      "token": {"type": "string", "x-capstan-generate": {"length": 16}}
    }}
  }
}`

// togglesSchema has boxes whose chart default is true.
const togglesSchema = `{
  "type": "object",
  "properties": {
    "greeting": {"type": "string"},
    "persistence": {"type": "object", "properties": {"enabled": {"type": "boolean", "default": true}}},
    "rbac": {"type": "object", "properties": {"create": {"type": "boolean", "default": true}}}
  }
}`

// vaultSchema requires a secret, auth.password, and marks an object,
// creds, writeOnly as a whole.
const vaultSchema = `{
  "type": "object",
  "required": ["auth"],
  "properties": {
    "replicas": {"type": "integer", "minimum": 1},
    "auth": {"type": "object", "required": ["password"], "properties": {"password": {"type": "string", "writeOnly": true}}},
    "creds": {"type": "object", "writeOnly": true, "properties": {"accessKey": {"type": "string"}, "secretKey": {"type": "string"}}},
    "keys": {"type": "array", "items": {"type": "string", "writeOnly": true}}
  }
}`

// refsSchema makes fields writeOnly only through the compiled schema:
// apiKey by allOf, db.password by a $ref to $defs, token by a $ref to
// definitions, and sub.secret by the schema of the subchart sub;
// ldap.bindPassword only while mode is ldap.
const refsSchema = `{
  "type": "object",
  "if": {"required": ["mode"], "properties": {"mode": {"const": "ldap"}}},
  "then": {"properties": {"ldap": {"properties": {"bindPassword": {"writeOnly": true}}}}},
  "$defs": {"secret": {"type": "string", "writeOnly": true}},
  "definitions": {"hidden": {"writeOnly": true}},
  "properties": {
    "name": {"type": "string"},
    "mode": {"type": "string", "enum": ["local", "ldap"]},
    "ldap": {"type": "object", "properties": {"bindPassword": {"type": "string"}}},
    "apiKey": {"type": "string", "allOf": [{"writeOnly": true}]},
    "db": {"type": "object", "properties": {
      "host": {"type": "string"},
      "password": {"type": "string", "allOf": [{"$ref": "#/$defs/secret"}]}
    }},
    "token": {"type": "string", "allOf": [{"$ref": "#/definitions/hidden"}]},
    "sub": {"type": "object", "properties": {"plain": {"type": "string"}, "secret": {"type": "string"}}}
  }
}`

func serveCharts() *httptest.Server {
	form, _ := testcontroller.ChartArchive("form", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: form\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"values.yaml":        "greeting: hello\nreplicas: 1\n",
		"values.schema.json": formSchema,
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
	})
	// A chart whose schema is not JSON, for the bad-input test.
	broken, _ := testcontroller.ChartArchive("broken", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: broken\nversion: 1.0.0\n",
		"values.schema.json": "{not json",
	})
	// A public chart, not written for Capstan, for the plans' profiles.
	public, _ := testcontroller.ChartArchive("public", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: public\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  k: v\n",
	})
	// A chart whose template loops for ever, for the plans' sandbox.
	loop, _ := testcontroller.ChartArchive("loop", map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: loop\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/loop.yaml": "{{ range 1000000000000 }}{{ range 1000000000000 }}{{ end }}{{ end }}",
	})
	// A chart that reads the platform's facts, for the plans' platform.
	facts, _ := testcontroller.ChartArchive("facts", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: facts\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  host: {{ .Values.capstan.hostname | default \"none\" | quote }}\n",
	})
	// A chart with boxes ticked by default, for the saves of Edit values.
	toggles, _ := testcontroller.ChartArchive("toggles", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: toggles\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"values.schema.json": togglesSchema,
	})
	// A chart that requires a secret, and takes a secret object, for the
	// saves of Edit values whose secret comes from valuesFrom.
	vault, _ := testcontroller.ChartArchive("vault", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: vault\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"values.schema.json": vaultSchema,
	})
	// A chart whose secret fields only the compiled schema finds, for the
	// chart form's password inputs.
	refs, _ := testcontroller.ChartArchive("refs", map[string]string{
		"Chart.yaml":                    "apiVersion: v2\nname: refs\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"values.schema.json":            refsSchema,
		"charts/sub/Chart.yaml":         "apiVersion: v2\nname: sub\nversion: 1.0.0\n",
		"charts/sub/values.yaml":        "plain: p\n",
		"charts/sub/values.schema.json": `{"type": "object", "properties": {"secret": {"type": "string", "writeOnly": true}}}`,
	})
	archives := map[string][]byte{"/form-1.0.0.tgz": form, "/refs-1.0.0.tgz": refs, "/vault-1.0.0.tgz": vault, "/broken-1.0.0.tgz": broken, "/public-1.0.0.tgz": public, "/loop-1.0.0.tgz": loop,
		"/facts-1.0.0.tgz": facts, "/toggles-1.0.0.tgz": toggles}
	// An OCI registry at /v2/, for charts the tests push with Helm's
	// registry client.
	oci := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chartRequests.Add(1)
		if strings.HasPrefix(r.URL.Path, "/v2") {
			oci.ServeHTTP(w, r)
			return
		}
		data, ok := archives[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
}

// TestFormBadInput opens the chart form with a link the fetch guard
// refuses (a loopback address it does not allow, so nothing can leave the
// machine) and with a chart whose schema is broken: each shows a clear
// message on the page, and nothing is created.
func TestFormBadInput(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch"))
	ctx := browser(t)
	signIn(t, ctx, editor)
	for _, tc := range []struct{ link, says string }{
		{"https://127.0.0.2:9/blog-1.0.0.tgz", "fetch guard"},
		{chartServer.URL + "/broken-1.0.0.tgz", "values.schema.json is not JSON"},
	} {
		run(t, ctx, "opening the form of "+tc.link,
			chromedp.Navigate(api.URL+"/new"),
			chromedp.SetValue(chromedp.ID("chart"), tc.link),
			chromedp.SetValue(chromedp.ID("namespace"), ns),
			chromedp.SetValue(chromedp.ID("name"), "bad"),
			chromedp.Submit(chromedp.ID("chart")),
			chromedp.WaitVisible(`//*[contains(@class,"error")]`),
		)
		if text := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(text, tc.says) {
			t.Errorf("%s: the page says %q; want %q", tc.link, text, tc.says)
		}
	}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "bad"}, &capstanv1.Addon{}); err == nil {
		t.Error("a refused form created the Addon")
	}
}

// TestSchemaFormInAChromium adds an add-on from a chart link through the
// form the page renders from the chart's values.schema.json: a wrong value
// is refused next to its field, a secret input never appears in the page,
// and the Addon is created suspended.
func TestSchemaFormInAChromium(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch"),
		rbacPolicy("", "secrets", "create"))
	const password = "s3cret-form-password-Xy"
	ctx := browser(t)
	signIn(t, ctx, editor)
	run(t, ctx, "opening the form",
		chromedp.Navigate(api.URL+"/new"),
		chromedp.SetValue(chromedp.ID("chart"), chartServer.URL+"/form-1.0.0.tgz"),
		chromedp.SetValue(chromedp.ID("namespace"), ns),
		chromedp.SetValue(chromedp.ID("name"), "form"),
		chromedp.Submit(chromedp.ID("chart")),
		chromedp.WaitVisible(chromedp.ID("f-replicas")),
	)
	labels := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("form.schema-form input:not([type=hidden]), form.schema-form select, form.schema-form textarea").length`))
	unlabelled := value(t, ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("form.schema-form input:not([type=hidden]), form.schema-form select, form.schema-form textarea")].filter(e => !document.querySelector('label[for="'+e.id+'"]')).length`))
	kinds := value(t, ctx, chromedp.Evaluate[string](`document.getElementById("f-auth-password").type + " " + document.getElementById("f-mode").tagName + " " + document.getElementById("f-debug").type`))
	// debug has no default: false is a choice of its own, not an unticked box.
	if labels < 7 || unlabelled != 0 || kinds != "password SELECT select-one" {
		t.Errorf("the form has %d inputs, %d without a label, kinds %q; want every field, all labelled, a password, a select and a select for the boolean", labels, unlabelled, kinds)
	}
	screenshot(t, ctx, "schema-form.png")

	run(t, ctx, "sending a value over its maximum",
		chromedp.SetValue(chromedp.ID("f-replicas"), "9"),
		chromedp.SetValue(chromedp.ID("f-auth-password"), password),
		chromedp.SetValue(chromedp.ID("f-tags"), `[a, "b, c"]`),
		chromedp.Click(`//button[text()="Add, suspended"]`),
		chromedp.WaitVisible(`//div[contains(@class,"invalid")]//p[contains(@class,"error")]`),
	)
	html := value(t, ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if strings.Contains(html, password) {
		t.Fatal("the page shows the secret input back")
	}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "form"}, &capstanv1.Addon{}); err == nil {
		t.Fatal("a refused form created the Addon")
	}

	run(t, ctx, "fixing it",
		chromedp.SetValue(chromedp.ID("f-replicas"), "3"),
		chromedp.SetValue(chromedp.ID("f-auth-password"), password),
		chromedp.Click(`//button[text()="Add, suspended"]`),
	)
	// NOTE: the form's page stays until the answer arrives, so the wait is
	// for the add-on's page, not for any message.
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(waitCtx, chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Added")]`)); err != nil {
		t.Fatalf("the fixed form did not lead to the added add-on's page: %v", err)
	}
	if html := value(t, ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(html, password) {
		t.Fatal("the add-on's page shows the secret input")
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "form"}, a); err != nil {
		t.Fatal(err)
	}
	if !a.Spec.Suspend || !strings.Contains(string(a.Spec.Values.Raw), `"replicas":3`) || !strings.Contains(string(a.Spec.Values.Raw), `"tags":["a","b, c"]`) ||
		strings.Contains(string(a.Spec.Values.Raw), password) || len(a.Spec.ValuesFrom) != 1 || a.Spec.ValuesFrom[0].TargetPath != "auth.password" {
		t.Errorf("the added Addon: suspend %v, values %s, valuesFrom %+v", a.Spec.Suspend, a.Spec.Values.Raw, a.Spec.ValuesFrom)
	}
}

// TestEditValuesInAChromiumChangesOnlyWhatChanged opens Edit values of an
// add-on whose values pin a generated token, set a boolean without a
// default to false and hold a list with a comma in an item, and saves a
// change of replicas alone in a real browser: the values are the old ones
// with replicas changed, and the pinned token is not shown. A password
// (a secret input) pinned in the values is neither shown nor dropped, and
// does not block the save of another value: the controller Blocks the
// add-on until it is moved into its field.
func TestEditValuesInAChromiumChangesOnlyWhatChanged(t *testing.T) {
	ns := namespace(t)
	// NOTE: a multi-line greeting, with a line break first and last, is
	// shown in a text area and must come back from Chromium as it was.
	const vals = `{"greeting":"\nhi\n  there\n","replicas":1,"mode":"safe","debug":false,"tags":["a","b, c"],"auth":{"token":"pinned-token-Q2"}}`
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"}, Values: jsonValues(vals)}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	ctx := browser(t)
	signIn(t, ctx, editor)
	run(t, ctx, "opening Edit values",
		chromedp.Navigate(api.URL+"/addons/"+ns+"/pinned/edit"),
		chromedp.WaitVisible(chromedp.ID("f-replicas")),
	)
	if html := value(t, ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(html, "pinned-token-Q2") {
		t.Fatal("the edit form shows the pinned token")
	}
	run(t, ctx, "saving a change of replicas",
		chromedp.SetValue(chromedp.ID("f-replicas"), "3"),
		chromedp.Click(`//button[text()="Save values"]`),
	)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(waitCtx, chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Values changed")]`)); err != nil {
		t.Fatalf("the save did not lead to the add-on's page (%v): %s", err, value(t, ctx, chromedp.Text(chromedp.CSS("main"))))
	}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	_ = json.Unmarshal(a.Spec.Values.Raw, &got)
	_ = json.Unmarshal([]byte(strings.Replace(vals, `"replicas":1`, `"replicas":3`, 1)), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after changing replicas the values are %s; want %v", a.Spec.Values.Raw, want)
	}

	a.Spec.Values = jsonValues(`{"greeting":"hi","auth":{"password":"pinned-password-Q1"}}`)
	if err := admin.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "opening Edit values with a password pinned in the values",
		chromedp.Navigate(api.URL+"/addons/"+ns+"/pinned/edit"),
		chromedp.WaitVisible(chromedp.ID("f-replicas")),
	)
	if html := value(t, ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(html, "pinned-password-Q1") {
		t.Fatal("the edit form shows the pinned password")
	}
	run(t, ctx, "saving a change of replicas beside the pinned password",
		chromedp.SetValue(chromedp.ID("f-replicas"), "2"),
		chromedp.Click(`//button[text()="Save values"]`),
	)
	saved, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := chromedp.Do(saved, chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Values changed")]`)); err != nil {
		t.Fatalf("the save beside a pinned password did not lead to the add-on's page (%v): %s", err, value(t, ctx, chromedp.Text(chromedp.CSS("main"))))
	}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	got = nil
	_ = json.Unmarshal(a.Spec.Values.Raw, &got)
	if want := map[string]any{"greeting": "hi", "replicas": float64(2), "auth": map[string]any{"password": "pinned-password-Q1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("after changing replicas beside a pinned password the values are %s; want %v", a.Spec.Values.Raw, want)
	}
}

// TestCatalogInAChromium adds Longhorn from the built-in catalog, with a
// typed field and YAML merged over it on the server, and sees an operator's
// entry from a ConfigMap offered beside the built-in ones.
func TestCatalogInAChromium(t *testing.T) {
	ns := namespace(t)
	entry := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "catalog-grafana", Labels: map[string]string{"capstan.dev/catalog": "true"}},
		Data:       map[string]string{"entry.yaml": "id: grafana\ntitle: Grafana\ndescription: Dashboards.\nchart: {repo: 'https://grafana.github.io/helm-charts', name: grafana, version: 10.1.0}\n"},
	}
	if err := admin.Create(context.Background(), entry); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), entry) })
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch"))
	ctx := browser(t)
	signIn(t, ctx, editor)
	// NOTE: the page keeps the catalog it read for up to 10 s, so an entry
	// made just now shows up once that has passed.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		run(t, ctx, "opening the catalog", chromedp.Navigate(api.URL+"/catalog"))
		if strings.Contains(value(t, ctx, chromedp.Evaluate[string](`document.body.innerText`)), "Grafana") {
			break
		}
	}
	run(t, ctx, "opening the catalog",
		chromedp.Navigate(api.URL+"/catalog"),
		chromedp.WaitVisible(`//h2[text()="Grafana"]`),
		chromedp.WaitVisible(`//h2[text()="Longhorn"]`),
	)
	screenshot(t, ctx, "catalog.png")
	run(t, ctx, "adding Longhorn",
		chromedp.Click(`//a[text()="Add Longhorn"]`),
		chromedp.WaitVisible(chromedp.ID("f-persistence-defaultClassReplicaCount")),
		chromedp.SetValue(chromedp.ID("namespace"), ns),
		chromedp.SetValue(chromedp.ID("f-persistence-defaultClassReplicaCount"), "2"),
		chromedp.SetValue(chromedp.ID("yaml"), "persistence:\n  reclaimPolicy: Retain\n"),
		chromedp.Click(`//button[text()="Add, suspended"]`),
	)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(waitCtx, chromedp.WaitVisible(`//p[contains(@class,"flash") and contains(text(),"Added")]`)); err != nil {
		t.Fatalf("the catalog form did not lead to the added add-on's page: %v", err)
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "longhorn"}, a); err != nil {
		t.Fatal(err)
	}
	vals := string(a.Spec.Values.Raw)
	if !a.Spec.Suspend || a.Spec.Chart.Repo != "https://charts.longhorn.io/" ||
		!strings.Contains(vals, `"defaultClassReplicaCount":2`) || !strings.Contains(vals, `"reclaimPolicy":"Retain"`) {
		t.Errorf("the added Addon: suspend %v, chart %+v, values %s; want the typed field and the YAML merged", a.Spec.Suspend, a.Spec.Chart, vals)
	}
}
