package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/values"
)

// sopsFile reads a file the real sops wrote (internal/sops/testdata,
// hack/sops-fixtures.sh).
func sopsFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "sops", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestSOPSDecryption: a git folder with files SOPS encrypted for an age
// key, a Secret and a ConfigMap, installs decrypted with spec.decryption,
// as a Flux Kustomization with decryption does. The plan hides what the
// ConfigMap's encrypted values held. Without spec.decryption the folder is
// refused, naming SOPS; with a Secret whose key opens none of the files,
// and with a file changed after it was encrypted, the add-on is Blocked
// with the file named, and what runs is left as it was.
func TestSOPSDecryption(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	name := "sops-" + ns[len(ns)-5:]
	repo := newFolderRepo(t)
	first := repo.commit(map[string]string{
		"app/secret.yaml": sopsFile(t, "secret.enc.yaml"),
		"app/config.yaml": sopsFile(t, "config.enc.yaml"),
		"app/multi.yaml":  sopsFile(t, "multi.enc.yaml"),
		// Outside the folder: never read, so never a problem.
		"other/foreign.yaml":  sopsFile(t, "other.enc.yaml"),
		"other/tampered.yaml": sopsFile(t, "tampered.enc.yaml"),
	})
	keys := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-keys"},
		Data:       map[string][]byte{"age.agekey": []byte(sopsFile(t, "age.agekey")), "notes": []byte("not a key")},
	}
	if err := admin.Create(ctx, keys); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), keys) })

	// Without spec.decryption: refused, nothing applied.
	a := create(t, &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: repo.url(), Revision: first, Path: "app"},
			TargetNamespace: ns, DeletionPolicy: capstanv1.DeletionDelete, ManualSync: true,
		},
	})
	failed := waitPhase(t, a, capstanv1.PhaseFailed)
	if msg := condition(failed, "Ready").Message; !strings.Contains(msg, "is encrypted with SOPS (it has a sops field): set spec.decryption") {
		t.Errorf("without decryption: %s", msg)
	}

	planned := update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Decryption = &capstanv1.Decryption{Provider: "sops", SecretRef: capstanv1.LocalObjectReference{Name: keys.Name}}
	})
	planned = waitPhase(t, planned, capstanv1.PhaseOutOfSync)
	for _, o := range planned.Status.Plan.Objects {
		if strings.Contains(o.Diff, "db-pass-9876") || strings.Contains(o.Diff, "hunter2-correct-horse") || strings.Contains(o.Diff, "ENC[") {
			t.Errorf("the plan shows a decrypted or encrypted value in %s:\n%s", o.Name, o.Diff)
		}
		if o.Name == "conn" && !strings.Contains(o.Diff, "url: (hidden)") {
			t.Errorf("the ConfigMap's decrypted url is not hidden:\n%s", o.Diff)
		}
	}
	update(t, planned, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest++
	})
	waitPhase(t, a, capstanv1.PhaseSynced)
	db := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, db); err != nil {
		t.Fatal(err)
	}
	if string(db.Data["password"]) != "hunter2-correct-horse" || string(db.Data["token"]) != "token-value-47" || string(db.Data["port"]) != "5432" {
		t.Errorf("Secret db holds %q", db.Data)
	}
	if url, _, _ := unstructured.NestedString(live(t, "v1", "ConfigMap", ns, "conn").Object, "data", "url"); url != "https://app:db-pass-9876@db.internal/app" {
		t.Errorf("ConfigMap conn's url is %q", url)
	}
	for _, s := range []string{"first", "second"} {
		if live(t, "v1", "Secret", ns, s) == nil {
			t.Errorf("Secret %s of the two-document file was not applied", s)
		}
	}

	// A key that opens none of the files: Blocked, the file named.
	keys.Data = map[string][]byte{"age.agekey": []byte(sopsFile(t, "other.agekey"))}
	if err := admin.Update(ctx, keys); err != nil {
		t.Fatal(err)
	}
	blocked := waitPhase(t, a, capstanv1.PhaseBlocked)
	if errs := blocked.Status.Plan.ValuesErrors; len(errs) != 1 || !strings.Contains(errs[0].Message, "app/config.yaml: no age key of the Secret opens it: it is encrypted for age1") {
		t.Errorf("values errors %+v", errs)
	}

	// A file changed after it was encrypted: Blocked, the file named.
	keys.Data = map[string][]byte{"age.agekey": []byte(sopsFile(t, "age.agekey"))}
	if err := admin.Update(ctx, keys); err != nil {
		t.Fatal(err)
	}
	second := repo.commit(map[string]string{"app/secret.yaml": sopsFile(t, "tampered.enc.yaml")})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Git.Revision = second })
	blocked = waitFor(t, a, 60*time.Second, "the changed file refused", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseBlocked && cur.Status.ObservedGeneration == cur.Generation
	})
	if errs := blocked.Status.Plan.ValuesErrors; len(errs) != 1 || !strings.Contains(errs[0].Message, "app/secret.yaml: it was changed after SOPS encrypted it") {
		t.Errorf("values errors %+v", errs)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, db); err != nil || string(db.Data["password"]) != "hunter2-correct-horse" {
		t.Errorf("Secret db changed while the add-on was blocked: %v %q", err, db.Data)
	}
}

// TestFolderSecretValuesAreBounded: a git folder's Secret variables and
// the values its SOPS files hold are hidden as a chart's secret values
// are, within the same bound, counted together. Past it the add-on is
// Blocked with the source named and nothing applied: first Secret
// variables alone, then a SOPS file that takes them past the bound.
func TestFolderSecretValuesAreBounded(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	name := "sopsbound-" + ns[len(ns)-5:]
	repo := newFolderRepo(t)
	rev := repo.commit(map[string]string{"app/secret.yaml": sopsFile(t, "secret.enc.yaml")})
	keys := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-keys"},
		Data:       map[string][]byte{"age.agekey": []byte(sopsFile(t, "age.agekey"))},
	}
	vars := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-vars"}, StringData: map[string]string{}}
	for i := range values.MaxSecretValues + 1 {
		vars.StringData[fmt.Sprintf("V%05d", i)] = fmt.Sprintf("variable-%05d", i)
	}
	for _, o := range []client.Object{keys, vars} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	a := create(t, &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: repo.url(), Revision: rev, Path: "app"},
			TargetNamespace: ns, DeletionPolicy: capstanv1.DeletionDelete,
			SubstituteFrom: []capstanv1.SubstituteReference{{Kind: "Secret", Name: vars.Name}},
			Decryption:     &capstanv1.Decryption{Provider: "sops", SecretRef: capstanv1.LocalObjectReference{Name: keys.Name}},
		},
	})
	blocked := waitPhase(t, a, capstanv1.PhaseBlocked)
	if errs := blocked.Status.Plan.ValuesErrors; len(errs) != 1 || errs[0].Path != "spec.substituteFrom" || errs[0].Rule != values.RuleTooManySecrets ||
		!strings.Contains(errs[0].Message, "hold 4097 secret values") {
		t.Errorf("values errors with 4097 Secret variables: %+v", errs)
	}

	// One variable fewer: within the bound alone, past it with the
	// values of the SOPS file.
	cur := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vars), cur); err != nil {
		t.Fatal(err)
	}
	delete(cur.Data, "V00000")
	if err := admin.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	blocked = waitFor(t, a, 60*time.Second, "the SOPS file past the bound", func(cur *capstanv1.Addon) bool {
		p := cur.Status.Plan
		return cur.Status.Phase == capstanv1.PhaseBlocked && p != nil && len(p.ValuesErrors) == 1 && p.ValuesErrors[0].Path == "spec.decryption"
	})
	if msg := blocked.Status.Plan.ValuesErrors[0].Message; !strings.Contains(msg, "app/secret.yaml: with it the folder's SOPS files and Secret variables hold 4") || !strings.Contains(msg, "more than the 4096 values") ||
		strings.Contains(msg, "hunter2") {
		t.Errorf("the SOPS file past the bound: %s", msg)
	}
	if live(t, "v1", "Secret", ns, "db") != nil {
		t.Error("a folder past the bound was applied")
	}
}
