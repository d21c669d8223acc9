package integration_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/values"
)

const schemaV1 = `{
  "type": "object",
  "properties": {
    "auth": {"type": "object", "properties": {
      "password": {"type": "string", "writeOnly": true, "x-capstan-generate": {"length": 24}},
      "apiKey": {"type": "string", "writeOnly": true}
    }},
    "replicas": {"type": "integer"}
  }
}`

// schemaV2 is the next chart version: the password's options changed and a
// new generated property appeared.
const schemaV2 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "auth": {"type": "object", "properties": {
      "password": {"type": "string", "writeOnly": true, "x-capstan-generate": {"length": 48, "alphabet": "hex"}},
      "apiKey": {"type": "string", "writeOnly": true}
    }},
    "metrics": {"type": "object", "properties": {"token": {"type": "string", "x-capstan-generate": true}}},
    "replicas": {"type": "integer", "minimum": 1}
  }
}`

func chartWith(t *testing.T, version, schema string) (*chartv2.Chart, *values.Schema) {
	t.Helper()
	ch := &chartv2.Chart{
		Metadata: &chartv2.Metadata{Name: "app", Version: version, APIVersion: "v2"},
		Values:   map[string]any{"replicas": 1.0},
		Schema:   []byte(schema),
	}
	s, err := values.SchemaForChart(ch)
	if err != nil {
		t.Fatalf("schema of chart %s: %v", version, err)
	}
	return ch, s
}

// render runs the values pipeline the controller runs, and returns the
// effective values.
func render(t *testing.T, c client.Client, a *capstanv1.Addon, ch *chartv2.Chart, s *values.Schema) *values.Result {
	t.Helper()
	gen, err := values.EnsureGenerated(t.Context(), c, a, capstanv1.ProfileRestricted, s)
	if err != nil {
		t.Fatalf("EnsureGenerated: %v", err)
	}
	src, err := values.Read(t.Context(), c, a, capstanv1.ProfileRestricted)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	res, err := values.Compose(values.Inputs{Chart: ch, Generated: gen, Sources: src,
		Platform: values.Platform{Namespace: "capstan-system"}.Values()})
	if err != nil {
		t.Fatalf("Compose: %v", err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("values errors: %+v", res.Errors)
	}
	return res
}

func at(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func TestGeneratedValueSurvivesRerendersAndAChartUpgrade(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	a := addon(t, c, ns, "app")
	ch, s := chartWith(t, "1.0.0", schemaV1)

	first := render(t, c, a, ch, s)
	password, _ := at(first.Effective, "auth", "password").(string)
	if len(password) != 24 {
		t.Fatalf("generated password %q, want 24 characters", password)
	}
	sec, ok := getSecret(t, c, ns, values.GeneratedName("app"))
	if !ok {
		t.Fatal("no generated Secret")
	}
	if sec.Labels[capstanv1.AddonLabel] != "app" || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != a.UID {
		t.Fatalf("generated Secret labels %v owners %v: want labelled for and owned by the Addon", sec.Labels, sec.OwnerReferences)
	}
	rv := sec.ResourceVersion

	for i := range 10 {
		res := render(t, c, a, ch, s)
		if got := at(res.Effective, "auth", "password"); got != password {
			t.Fatalf("render %d: password changed", i+1)
		}
	}
	if sec, _ := getSecret(t, c, ns, values.GeneratedName("app")); sec.ResourceVersion != rv {
		t.Fatalf("re-renders wrote the generated Secret (resourceVersion %s -> %s)", rv, sec.ResourceVersion)
	}

	// The chart upgrade changes the password's options and adds a property:
	// only the new property is generated.
	ch2, s2 := chartWith(t, "2.0.0", schemaV2)
	up := render(t, c, a, ch2, s2)
	if got := at(up.Effective, "auth", "password"); got != password {
		t.Fatal("the chart upgrade regenerated the password")
	}
	token, _ := at(up.Effective, "metrics", "token").(string)
	if len(token) != values.DefaultGenerateLength {
		t.Fatalf("new generated token %q, want %d characters", token, values.DefaultGenerateLength)
	}
	for i := range 3 {
		res := render(t, c, a, ch2, s2)
		if at(res.Effective, "metrics", "token") != token || at(res.Effective, "auth", "password") != password {
			t.Fatalf("render %d after the upgrade changed a generated value", i+1)
		}
	}
	// A downgrade does not lose the token: it stays in the Secret.
	render(t, c, a, ch, s)
	back := render(t, c, a, ch2, s2)
	if at(back.Effective, "metrics", "token") != token {
		t.Fatal("a downgrade and upgrade regenerated the token")
	}
	// Generated values are secret: they are redacted.
	if !slices.Contains(back.SecretPaths, "/auth/password") || !slices.Contains(back.SecretPaths, "/metrics/token") {
		t.Fatalf("SecretPaths %v miss the generated values", back.SecretPaths)
	}
}

// createOnlyUser binds a user to a Role that allows only create on Secrets.
func createOnlyUser(t *testing.T, c client.Client, ns, user string) client.Client {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-create-only", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-create-only", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	return clientFor(t, cluster.ConfigFor(user))
}

func TestWriteSecretInputsUnderACreateOnlyUser(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	a := addon(t, c, ns, "app")
	portal := createOnlyUser(t, c, ns, "portal-api")

	// The user really may only create: reading a Secret is forbidden.
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}}
	if err := c.Create(t.Context(), probe); err != nil {
		t.Fatal(err)
	}
	if err := portal.Get(t.Context(), client.ObjectKeyFromObject(probe), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the create-only user could get a Secret: %v", err)
	}

	refs, err := values.WriteSecretInputs(t.Context(), portal, a, map[string]string{
		"auth.apiKey":                 "0123",
		"feature.flag":                "true",
		`annotations.example\.com/id`: "[a]",
	})
	if err != nil {
		t.Fatalf("WriteSecretInputs as a create-only user: %v", err)
	}
	if len(refs) != 3 {
		t.Fatalf("refs = %+v, want 3", refs)
	}
	name := refs[0].Name
	if !strings.HasPrefix(name, values.ValuesPrefix("app")) {
		t.Fatalf("Secret name %q, want prefix %q", name, values.ValuesPrefix("app"))
	}
	sec, ok := getSecret(t, c, ns, name)
	if !ok {
		t.Fatal("the written Secret does not exist")
	}
	if sec.Labels[capstanv1.AddonLabel] != "app" || sec.Immutable == nil || !*sec.Immutable || len(sec.OwnerReferences) != 0 {
		t.Fatalf("written Secret: labels %v immutable %v owners %v; want labelled, immutable, unowned", sec.Labels, sec.Immutable, sec.OwnerReferences)
	}

	// A second write is a new Secret, never a change to the first.
	refs2, err := values.WriteSecretInputs(t.Context(), portal, a, map[string]string{"auth.apiKey": "rotated"})
	if err != nil {
		t.Fatal(err)
	}
	if refs2[0].Name == name {
		t.Fatal("the second write reused the first Secret")
	}

	// The Addon points at the first write; the raw strings stay strings.
	a.Spec.ValuesFrom = refs
	if err := c.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	ch, s := chartWith(t, "1.0.0", schemaV1)
	res := render(t, c, a, ch, s)
	if got := at(res.Effective, "auth", "apiKey"); got != "0123" {
		t.Fatalf("auth.apiKey = %#v, want the string 0123", got)
	}
	if got := at(res.Effective, "feature", "flag"); got != "true" {
		t.Fatalf("feature.flag = %#v, want the string true", got)
	}
	if got := at(res.Effective, "annotations", "example.com/id"); got != "[a]" {
		t.Fatalf("annotations[example.com/id] = %#v, want the string [a]", got)
	}
	if strings.Contains(fmtValues(res.Redacted()), "0123") {
		t.Fatal("the redacted values show a secret input")
	}

	// A bad targetPath is refused before anything is created.
	if _, err := values.WriteSecretInputs(t.Context(), portal, a, map[string]string{"auth..x": "v"}); !values.IsInvalid(err) {
		t.Fatalf("a bad targetPath: error = %v, want an invalid-values error", err)
	}
}

func fmtValues(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtAny(v), "\n", " "), "  ", " ")))
		b.WriteString(";")
	}
	return b.String()
}

func fmtAny(v any) string {
	switch t := v.(type) {
	case map[string]any:
		return "{" + fmtValues(t) + "}"
	case string:
		return t
	default:
		return ""
	}
}

func TestCleanupDeletesUnreferencedValuesSecrets(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	a := addon(t, c, ns, "app")
	writer := createOnlyUser(t, c, ns, "portal-api")

	old, err := values.WriteSecretInputs(t.Context(), writer, a, map[string]string{"auth.apiKey": "one"})
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.ValuesFrom = old
	if err := c.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	if _, err := values.Read(t.Context(), c, a, capstanv1.ProfileRestricted); err != nil {
		t.Fatal(err)
	}
	adopted, err := values.Adopt(t.Context(), c, a, capstanv1.ProfileRestricted)
	if err != nil || len(adopted) != 1 {
		t.Fatalf("Adopt = %v, %v; want the referenced Secret adopted", adopted, err)
	}
	if sec, _ := getSecret(t, c, ns, old[0].Name); len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != a.UID {
		t.Fatalf("adopted Secret owners %v, want the Addon", sec.OwnerReferences)
	}

	// A new write that the Addon does not name yet survives a cleanup.
	fresh, err := values.WriteSecretInputs(t.Context(), writer, a, map[string]string{"auth.apiKey": "two"})
	if err != nil {
		t.Fatal(err)
	}
	// Objects that are not values Secrets are never touched, even labelled.
	applied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-values-rendered", Namespace: ns, Labels: map[string]string{
		capstanv1.AddonLabel: "app", capstanv1.ManagedByLabel: "capstan"}}}
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-tls", Namespace: ns, Labels: map[string]string{capstanv1.AddonLabel: "app"}}}
	for _, o := range []client.Object{applied, tls} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	deleted, err := values.Cleanup(t.Context(), c, a, time.Now())
	if err != nil || len(deleted) != 0 {
		t.Fatalf("Cleanup = %v, %v; want nothing deleted while the old one is referenced and the new one is young", deleted, err)
	}

	// The Addon moves to the new Secret: the old, adopted one goes at once.
	a.Spec.ValuesFrom = fresh
	if err := c.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	if _, err := values.Adopt(t.Context(), c, a, capstanv1.ProfileRestricted); err != nil {
		t.Fatal(err)
	}
	deleted, err = values.Cleanup(t.Context(), c, a, time.Now())
	if err != nil || !slices.Equal(deleted, []string{"Secret/" + old[0].Name}) {
		t.Fatalf("Cleanup = %v, %v; want only %s", deleted, err, old[0].Name)
	}
	if _, ok := getSecret(t, c, ns, old[0].Name); ok {
		t.Fatal("the unreferenced Secret still exists")
	}

	// A write nothing ever referenced goes after the grace period.
	orphan, err := values.WriteSecretInputs(t.Context(), writer, a, map[string]string{"auth.apiKey": "three"})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err = values.Cleanup(t.Context(), c, a, time.Now().Add(values.UnreferencedGrace+time.Minute))
	if err != nil || !slices.Equal(deleted, []string{"Secret/" + orphan[0].Name}) {
		t.Fatalf("Cleanup after the grace = %v, %v; want only the orphan %s", deleted, err, orphan[0].Name)
	}
	for _, name := range []string{fresh[0].Name, applied.Name, tls.Name} {
		if _, ok := getSecret(t, c, ns, name); !ok {
			t.Fatalf("Cleanup deleted %s", name)
		}
	}
}

// TestCleanupKeepsWhatTheSpecNamesForAnyPurpose: a restricted add-on's
// credentials and keys carry the add-on's label, and may carry a values
// name too; the spec naming one for any purpose keeps it.
func TestCleanupKeepsWhatTheSpecNamesForAnyPurpose(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	a := addon(t, c, ns, "app")
	a.Spec.Chart.SecretRef = &capstanv1.LocalObjectReference{Name: "app-values-registry"}
	a.Spec.Chart.Verify = &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "app-values-keys"}}}
	a.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "app-values-kube"}}
	a.Spec.Decryption = &capstanv1.Decryption{Provider: "sops", SecretRef: capstanv1.LocalObjectReference{Name: "app-values-age"}}
	if err := c.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	named := []string{"app-values-registry", "app-values-keys", "app-values-kube", "app-values-age"}
	for _, name := range append(slices.Clone(named), "app-values-stale") {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: a.OwnerLabels()}}
		if err := c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	// The cleanup judges them past the grace, as a real one does an hour on.
	deleted, err := values.Cleanup(t.Context(), c, a, time.Now().Add(values.UnreferencedGrace+time.Minute))
	if err != nil || !slices.Equal(deleted, []string{"Secret/app-values-stale"}) {
		t.Fatalf("Cleanup = %v, %v; want only the Secret nothing names", deleted, err)
	}
	for _, name := range named {
		if _, ok := getSecret(t, c, ns, name); !ok {
			t.Errorf("Cleanup deleted %s, which the spec names", name)
		}
	}
}

// TestDeleteAllKeepsWhatTheSpecNamesForAnotherPurpose: a removal that
// does not keep values deletes the add-on's values objects, but not what
// its spec names for another purpose (credentials, keys, a kubeconfig),
// as Cleanup keeps them: an Addon made again with the same spec (a git
// move) needs them. What it keeps loses its owner reference, so the
// garbage collector keeps it too; a values Secret the spec names in
// valuesFrom goes.
func TestDeleteAllKeepsWhatTheSpecNamesForAnotherPurpose(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	a := addon(t, c, ns, "app")
	a.Spec.Chart.SecretRef = &capstanv1.LocalObjectReference{Name: "app-values-registry"}
	a.Spec.Chart.Verify = &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "app-values-keys"}}}
	a.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "app-values-kube"}}
	a.Spec.Decryption = &capstanv1.Decryption{Provider: "sops", SecretRef: capstanv1.LocalObjectReference{Name: "app-values-age"}}
	a.Spec.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: "app-values-inputs"}}
	if err := c.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	named := []string{"app-values-registry", "app-values-keys", "app-values-kube", "app-values-age"}
	owner := metav1.OwnerReference{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Name: a.Name, UID: a.UID}
	for _, name := range append(slices.Clone(named), "app-values-inputs", "app-values-stale") {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: a.OwnerLabels(), OwnerReferences: []metav1.OwnerReference{owner}}}
		if err := c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	deleted, err := values.DeleteAll(t.Context(), c, a)
	slices.Sort(deleted)
	if err != nil || !slices.Equal(deleted, []string{"Secret/app-values-inputs", "Secret/app-values-stale"}) {
		t.Fatalf("DeleteAll = %v, %v; want only the values Secrets", deleted, err)
	}
	for _, name := range named {
		sec, ok := getSecret(t, c, ns, name)
		if !ok {
			t.Errorf("DeleteAll deleted %s, which the spec names for another purpose", name)
		} else if len(sec.OwnerReferences) != 0 {
			t.Errorf("%s kept its owner reference %v, which the garbage collector would follow", name, sec.OwnerReferences)
		}
	}
}

func TestKeepOnRemoveHandsValuesToTheNextAddonOfTheName(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	first := addon(t, c, ns, "app")
	writer := createOnlyUser(t, c, ns, "portal-api")
	secretRefs, err := values.WriteSecretInputs(t.Context(), writer, first, map[string]string{"auth.apiKey": "kept-key"})
	if err != nil {
		t.Fatal(err)
	}
	// A plain values ConfigMap is kept the same way.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-values-plain", Namespace: ns, Labels: map[string]string{capstanv1.AddonLabel: "app"}},
		Data: map[string]string{"values.yaml": "replicas: 3\n"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	refs := append(secretRefs, capstanv1.ValuesReference{Kind: "ConfigMap", Name: cm.Name})
	first.Spec.ValuesFrom = refs
	if err := c.Update(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	ch, s := chartWith(t, "1.0.0", schemaV1)
	before := render(t, c, first, ch, s)
	if _, err := values.Adopt(t.Context(), c, first, capstanv1.ProfileRestricted); err != nil {
		t.Fatal(err)
	}
	password := at(before.Effective, "auth", "password")

	released, err := values.Release(t.Context(), c, first)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(released)
	want := []string{"Secret/" + values.GeneratedName("app"), "Secret/" + secretRefs[0].Name}
	slices.Sort(want)
	wantAll := append([]string{"ConfigMap/" + cm.Name}, want...)
	if !slices.Equal(released, wantAll) {
		t.Fatalf("Release = %v, want %v", released, wantAll)
	}
	for _, name := range want {
		sec, _ := getSecret(t, c, ns, strings.TrimPrefix(name, "Secret/"))
		if _, labelled := sec.Labels[capstanv1.AddonLabel]; labelled || len(sec.OwnerReferences) != 0 || sec.Annotations[values.ReleasedAnnotation] != "app" {
			t.Fatalf("released %s: labels %v owners %v annotations %v", name, sec.Labels, sec.OwnerReferences, sec.Annotations)
		}
	}
	if got := getConfigMap(t, c, ns, cm.Name); got == nil || got.Labels[capstanv1.AddonLabel] != "" || len(got.OwnerReferences) != 0 || got.Annotations[values.ReleasedAnnotation] != "app" {
		t.Fatalf("released ConfigMap: %+v", got)
	}

	// The Addon goes; the garbage collector runs, and the Secrets stay.
	if err := c.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Addon is gone", func() bool {
		err := c.Get(t.Context(), client.ObjectKeyFromObject(first), &capstanv1.Addon{})
		return apierrors.IsNotFound(err)
	})
	// A control Secret owned by the deleted Addon shows the collector ran.
	control := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gc-control", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Name: "app", UID: first.UID}}}}
	if err := c.Create(t.Context(), control); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the garbage collector deletes the control Secret", func() bool {
		_, ok := getSecret(t, c, ns, "gc-control")
		return !ok
	})
	for _, name := range want {
		if _, ok := getSecret(t, c, ns, strings.TrimPrefix(name, "Secret/")); !ok {
			t.Fatalf("kept Secret %s was deleted", name)
		}
	}
	if getConfigMap(t, c, ns, cm.Name) == nil {
		t.Fatal("the kept values ConfigMap was deleted")
	}

	// Another add-on cannot take them: app-values-* belongs to "app" by name,
	// and an add-on named like the prefix is refused by the released mark.
	other := addon(t, c, ns, "other", refs...)
	if _, err := values.Read(t.Context(), c, other, capstanv1.ProfileRestricted); !values.IsInvalid(err) {
		t.Fatalf("another add-on read the kept Secret: %v", err)
	}

	// A new add-on of the same name reuses both.
	second := addon(t, c, ns, "app", refs...)
	after := render(t, c, second, ch, s)
	if got := at(after.Effective, "auth", "password"); got != password {
		t.Fatal("the new add-on got a new generated password instead of the kept one")
	}
	if got := at(after.Effective, "auth", "apiKey"); got != "kept-key" {
		t.Fatalf("auth.apiKey = %#v, want the kept input", got)
	}
	if _, err := values.Adopt(t.Context(), c, second, capstanv1.ProfileRestricted); err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		sec, _ := getSecret(t, c, ns, strings.TrimPrefix(name, "Secret/"))
		if sec.Labels[capstanv1.AddonLabel] != "app" || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != second.UID {
			t.Fatalf("%s not adopted by the new add-on: labels %v owners %v", name, sec.Labels, sec.OwnerReferences)
		}
		if _, ok := sec.Annotations[values.ReleasedAnnotation]; ok {
			t.Fatalf("%s keeps the released mark after adoption", name)
		}
	}

	// Without keep, DeleteAll removes them, collector or not.
	if got := getConfigMap(t, c, ns, cm.Name); got == nil || got.Labels[capstanv1.AddonLabel] != "app" || len(got.OwnerReferences) != 1 {
		t.Fatalf("the values ConfigMap was not adopted by the new add-on: %+v", got)
	}
	deleted, err := values.DeleteAll(t.Context(), c, second)
	slices.Sort(deleted)
	if err != nil || !slices.Equal(deleted, wantAll) {
		t.Fatalf("DeleteAll = %v, %v; want %v", deleted, err, wantAll)
	}
	for _, name := range want {
		if _, ok := getSecret(t, c, ns, strings.TrimPrefix(name, "Secret/")); ok {
			t.Fatalf("%s survived DeleteAll", name)
		}
	}
	if getConfigMap(t, c, ns, cm.Name) != nil {
		t.Fatal("the values ConfigMap survived DeleteAll")
	}
}

func TestOwnedValuesGoWithTheAddonWhenNotKept(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	a := addon(t, c, ns, "app")
	ch, s := chartWith(t, "1.0.0", schemaV1)
	render(t, c, a, ch, s)
	if err := c.Delete(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the garbage collector deletes the generated Secret with its Addon", func() bool {
		_, ok := getSecret(t, c, ns, values.GeneratedName("app"))
		return !ok
	})
}

func TestPlatformConfigMapFromTheCluster(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "capstan-platform", Namespace: ns},
		Data: map[string]string{"hostname": "apps.example.com", "pullSecrets": "regcred"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	p, err := values.LoadPlatform(t.Context(), c, types.NamespacedName{Namespace: ns, Name: cm.Name}, ns)
	if err != nil {
		t.Fatal(err)
	}
	if p.Hostname != "apps.example.com" || p.Namespace != ns || !slices.Equal(p.PullSecrets, []string{"regcred"}) {
		t.Fatalf("platform = %+v", p)
	}
}

// TestWriteSecretInputsForALongAddonName writes secret inputs of an Addon
// whose name has 52 characters, near the 53 an Addon may have: the Secret
// keeps the whole "<addon>-values-" prefix, so the restricted profile
// reads it as the add-on's own.
func TestWriteSecretInputsForALongAddonName(t *testing.T) {
	c := admin(t)
	ns := namespace(t, c)
	long := strings.Repeat("a", 52)
	a := addon(t, c, ns, long)
	refs, err := values.WriteSecretInputs(t.Context(), createOnlyUser(t, c, ns, "portal-api"), a, map[string]string{"auth.apiKey": "0123"})
	if err != nil {
		t.Fatalf("WriteSecretInputs for a 52-character name: %v", err)
	}
	if name := refs[0].Name; !strings.HasPrefix(name, values.ValuesPrefix(long)) || len(name) != len(values.ValuesPrefix(long))+5 {
		t.Fatalf("Secret name %q, want %q and a 5-character suffix", name, values.ValuesPrefix(long))
	}
	a.Spec.ValuesFrom = refs
	if err := c.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	ch, s := chartWith(t, "1.0.0", schemaV1)
	if got := at(render(t, c, a, ch, s).Effective, "auth", "apiKey"); got != "0123" {
		t.Fatalf("auth.apiKey = %#v, want the secret input 0123", got)
	}
}
