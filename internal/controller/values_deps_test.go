package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/testcontroller"
	"capstan.dev/capstan/internal/values"
)

// chartFiles reads a chart folder of testdata into a chart's files, with
// the annotation of a chart written for Capstan added to its Chart.yaml.
func chartFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := testcontroller.ChartFolderFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	files["Chart.yaml"] += "annotations:\n  capstan.dev/addon: \"true\"\n"
	return files
}

// TestValuesFollowTheResolvedDependencies installs a chart with an aliased
// subchart (sub as db) and one its values.yaml disables (other, whose schema
// requires a token): the disabled subchart's schema blocks nothing, the
// aliased one's value is generated under its alias, checked and deleted
// under it, as helm template does.
func TestValuesFollowTheResolvedDependencies(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "deps", version: "1.0.0", files: chartFiles(t, "../values/testdata/charts/deps")})
	a := create(t, newAddon(ns, "deps", url))

	waitPhase(t, a, capstanv1.PhaseSynced)
	if cm := live(t, "v1", "ConfigMap", ns, "deps-db"); cm == nil || cm.Object["data"].(map[string]any)["port"] != "5432" {
		t.Fatalf("ConfigMap deps-db = %v; want port 5432", cm)
	}
	gen := &corev1.Secret{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: values.GeneratedName("deps")}, gen); err != nil {
		t.Fatal(err)
	}
	if doc := string(gen.Data["values.yaml"]); !strings.HasPrefix(doc, "db:\n  apiKey: ") {
		t.Errorf("the generated values are not under the alias db: %d bytes, starting %q", len(doc), strings.SplitN(doc, ":", 2)[0])
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{db: {port: bad, password: hunter22}}`) })
	blocked := waitFor(t, a, 90*time.Second, "Blocked by values errors", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseBlocked && cur.Status.ObservedGeneration == cur.Generation
	})
	var got []string
	for _, e := range blocked.Status.Plan.ValuesErrors {
		got = append(got, e.Path+" "+e.Rule)
	}
	if strings.Join(got, ", ") != "/db/password writeOnly, /db/port type" {
		t.Errorf("values errors = %v; want /db/password writeOnly and /db/port type", got)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{db: {port: null}}`) })
	waitPhase(t, a, capstanv1.PhaseSynced)
	if cm := live(t, "v1", "ConfigMap", ns, "deps-db"); cm == nil || cm.Object["data"].(map[string]any)["port"] != "none" {
		t.Errorf("ConfigMap deps-db = %v; want port none: the null deletes the subchart's default", cm)
	}
}

// TestTooManySecretValuesBlock: a chart whose schema marks a list of its
// own defaults writeOnly makes every element a value to hide in every
// message. Past values.MaxSecretValues the add-on is Blocked by a values
// error that names the list, and nothing is rendered or applied.
func TestTooManySecretValuesBlock(t *testing.T) {
	ns := newNamespace(t)
	var doc strings.Builder
	doc.WriteString("junk:\n")
	for i := range values.MaxSecretValues + 1 {
		fmt.Fprintf(&doc, "  - aaaa%06d\n", i)
	}
	url, _ := charts.publish(t, chart{name: "junk", version: "1.0.0", files: map[string]string{
		"values.yaml":        doc.String(),
		"values.schema.json": `{"properties": {"junk": {"writeOnly": true}}}`,
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: junk\ndata:\n  all: {{ .Values.junk | join \",\" | quote }}\n",
	}})
	a := create(t, newAddon(ns, "junk", url))
	blocked := waitFor(t, a, 90*time.Second, "Blocked by too many secret values", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseBlocked && cur.Status.Plan != nil && len(cur.Status.Plan.ValuesErrors) > 0
	})
	e := blocked.Status.Plan.ValuesErrors[0]
	if e.Path != "/junk" || e.Rule != values.RuleTooManySecrets {
		t.Errorf("values error = %s %s: %s; want /junk %s", e.Path, e.Rule, e.Message, values.RuleTooManySecrets)
	}
	if cm := live(t, "v1", "ConfigMap", ns, "junk"); cm != nil {
		t.Error("the ConfigMap was applied from values that were refused")
	}
}
