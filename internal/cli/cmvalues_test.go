package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// ldapChart marks ldap.bindPassword writeOnly only while mode is ldap.
var ldapChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: ldap\nversion: 1.0.0\n",
	"values.schema.json": `{"type":"object",` +
		`"if":{"required":["mode"],"properties":{"mode":{"const":"ldap"}}},` +
		`"then":{"properties":{"ldap":{"properties":{"bindPassword":{"writeOnly":true}}}}},` +
		`"properties":{"name":{"type":"string"},"mode":{"type":"string","enum":["local","ldap"]},` +
		`"ldap":{"type":"object","properties":{"bindPassword":{"type":"string"}}}}}`,
	"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ldap\n",
}

// TestEditChecksValuesWithTheConfigMapsOfValuesFrom: a ConfigMap named in
// valuesFrom that sets mode: ldap makes ldap.bindPassword writeOnly, as
// the controller composes it over spec.values, so capstan addon edit
// --set refuses a bind password for it, reading the ConfigMap with the
// user's own kubeconfig. A ConfigMap that cannot be read is said on
// stderr, and the check goes on without it.
func TestEditChecksValuesWithTheConfigMapsOfValuesFrom(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	chartURL, fetch := servedChart(t, "ldap", ldapChart)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ldap-values-mode", Labels: map[string]string{capstanv1.AddonLabel: "ldap"}},
		Data: map[string]string{"values.yaml": "mode: ldap\n"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	newAddon(t, c, ns, "ldap", func(a *capstanv1.Addon) {
		a.Spec.Chart.URL = chartURL
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"name":"n"}`)}
		a.Spec.ValuesFrom = []capstanv1.ValuesReference{{Kind: "ConfigMap", Name: cm.Name}}
	})
	before := getAddon(t, c, ns, "ldap")
	edit := append([]string{"addon", "edit", "ldap", "-n", ns}, fetch...)

	out, err := capstan(t, cluster, append(edit, "--set", "ldap.bindPassword=hunter2")...)
	if err == nil || !strings.Contains(err.Error(), "ldap.bindPassword") || !strings.Contains(err.Error(), "--secret-input ldap.bindPassword=@FILE") ||
		strings.Contains(err.Error()+out, "hunter2") {
		t.Errorf("edit --set ldap.bindPassword with mode: ldap in a ConfigMap: %v; want it refused, naming --secret-input and not the value\n%s", err, out)
	}
	if after := getAddon(t, c, ns, "ldap"); after.Generation != before.Generation || string(after.Spec.Values.Raw) != `{"name":"n"}` {
		t.Errorf("the refused edit changed the Addon: generation %d to %d, spec.values %s", before.Generation, after.Generation, after.Spec.Values.Raw)
	}

	// A ConfigMap that does not exist: the check goes on without it, says
	// so, and the value is written as the check without it allows.
	a := getAddon(t, c, ns, "ldap")
	a.Spec.ValuesFrom = []capstanv1.ValuesReference{{Kind: "ConfigMap", Name: "ldap-values-gone"}}
	if err := c.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	out, err = capstan(t, cluster, append(edit, "--set", "name=m")...)
	if err != nil || !strings.Contains(out, "Warning: addon "+ns+"/ldap: the values were checked for secret inputs without") ||
		!strings.Contains(out, "ldap-values-gone") || !strings.Contains(out, "the ConfigMap does not exist") {
		t.Errorf("edit with a valuesFrom ConfigMap that does not exist: %v; want it written, with a warning that names the ConfigMap\n%s", err, out)
	}
}
