package controller_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestUninstallRunsTheAppliedVersionsDeleteHooks installs version 1.0.0
// of a chart from a chart repository whose pre-delete hook makes a
// ConfigMap named for its version, then asks for 2.0.0 under manual sync,
// which is never approved, and deletes the Addon: Helm runs the delete
// hooks of the release it installed, so 1.0.0's hook runs and 2.0.0's does
// not, and an event says whose hooks ran. When 1.0.0 is deleted from the
// repository before the uninstall, the hooks of 2.0.0, which the spec
// names, run as before, and a warning names the version they came from.
// When 1.0.0 was fetched but does not render with the values the spec has
// now for 2.0.0 (its schema refuses them, or a template fails), no delete
// hook of either runs, and the uninstall goes on without them.
func TestUninstallRunsTheAppliedVersionsDeleteHooks(t *testing.T) {
	ctx := context.Background()
	files := map[string]string{
		"templates/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  version: {{ .Chart.Version | quote }}\n",
		"templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ran-{{ .Chart.Version | replace \".\" \"-\" }}\n" +
			"  annotations:\n    helm.sh/hook: pre-delete\ndata: {hook: pre}\n",
	}
	// install installs 1.0.0 of repo, calls between, then asks for 2.0.0
	// under manual sync with change made to the spec too: the add-on waits
	// OutOfSync, with 1.0.0 running.
	install := func(t *testing.T, ns string, repo *chartRepository, between func(), change func(*capstanv1.AddonSpec)) *capstanv1.Addon {
		t.Helper()
		a := create(t, &capstanv1.Addon{
			ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "applied-" + ns[len(ns)-5:]},
			Spec: capstanv1.AddonSpec{TargetNamespace: ns, DeletionPolicy: capstanv1.DeletionDelete,
				Chart: &capstanv1.ChartSource{Repo: repo.url(), Name: repo.name, Version: "1.0.0"}},
		})
		if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Version != "1.0.0" {
			t.Fatalf("installed version %q, want 1.0.0", got.Status.Version)
		}
		between()
		update(t, a, func(cur *capstanv1.Addon) {
			cur.Spec.ManualSync = true
			cur.Spec.Chart.Version = "2.0.0"
			change(&cur.Spec)
		})
		waitFor(t, a, 90*time.Second, "2.0.0 waiting for an approval", func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.Version == "2.0.0" && cur.Generation == cur.Status.ObservedGeneration
		})
		if got := getAddon(t, a); got.Status.History[0].Version != "1.0.0" {
			t.Fatalf("the newest revision is %q, want 1.0.0: %s", got.Status.History[0].Version, describeStatus(got))
		}
		return a
	}

	t.Run("the applied version", func(t *testing.T) {
		ns := newNamespace(t)
		repo := newChartRepository(charts, "appliedhooks")
		repo.add(t, "1.0.0", files)
		repo.add(t, "2.0.0", files)
		a := install(t, ns, repo, func() {}, func(*capstanv1.AddonSpec) {})
		deleteAddon(t, a)
		if live(t, "v1", "ConfigMap", ns, "ran-2-0-0") != nil {
			t.Error("the uninstall ran the pre-delete hook of 2.0.0, which was never applied")
		}
		if live(t, "v1", "ConfigMap", ns, "ran-1-0-0") == nil {
			t.Error("the uninstall did not run the pre-delete hook of 1.0.0, the version that ran")
		}
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the uninstall left the inventory")
		}
		eventually(t, 30*time.Second, "a DeleteHooksFromApplied event that names 1.0.0", func() bool {
			note := addonEvent(t, a, "DeleteHooksFromApplied")
			return strings.Contains(note, "1.0.0") && strings.Contains(note, "2.0.0") && strings.Contains(note, "current values")
		})
	})

	// unrendered installs 1.0.0, whose chart has extra files, then asks
	// for 2.0.0 with values that fit only 2.0.0, and deletes the Addon:
	// neither version's hooks run, and the uninstall goes on without them.
	unrendered := func(t *testing.T, name string, extra map[string]string) {
		ns := newNamespace(t)
		repo := newChartRepository(charts, name)
		first := map[string]string{}
		for k, v := range files {
			first[k] = v
		}
		for k, v := range extra {
			first[k] = v
		}
		repo.add(t, "1.0.0", first)
		repo.add(t, "2.0.0", files)
		a := install(t, ns, repo, func() {}, func(s *capstanv1.AddonSpec) { s.Values = jsonValues("tier: gold") })
		deleteAddon(t, a)
		for _, hook := range []string{"ran-1-0-0", "ran-2-0-0"} {
			if live(t, "v1", "ConfigMap", ns, hook) != nil {
				t.Errorf("the uninstall ran a pre-delete hook (%s), though the applied 1.0.0 does not render with the current values", hook)
			}
		}
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the uninstall left the inventory")
		}
		eventually(t, 30*time.Second, "a DeleteHooksRefused warning that names 1.0.0", func() bool {
			note := addonEvent(t, a, "DeleteHooksRefused")
			return strings.Contains(note, "1.0.0, the version applied last") && strings.Contains(note, "does not render") && strings.Contains(note, "--no-hooks")
		})
	}

	t.Run("values the applied version's schema refuses", func(t *testing.T) {
		unrendered(t, "appliedschema", map[string]string{
			"values.schema.json": `{"type": "object", "additionalProperties": false}`,
		})
	})

	t.Run("values the applied version's template fails on", func(t *testing.T) {
		unrendered(t, "appliedfail", map[string]string{
			"templates/tier.yaml": "{{- if .Values.tier }}{{ fail \"1.0.0 knows no tier\" }}{{ end }}\n",
		})
	})

	t.Run("values the applied version's render loops on", func(t *testing.T) {
		ns := newNamespace(t)
		repo := newChartRepository(charts, "appliedspin")
		first := map[string]string{
			"templates/spin.yaml": "{{- if .Values.tier }}{{ range 1000000000000 }}{{ range 1000000000000 }}{{ end }}{{ end }}{{ end }}\n",
		}
		for k, v := range files {
			first[k] = v
		}
		repo.add(t, "1.0.0", first)
		repo.add(t, "2.0.0", files)
		a := install(t, ns, repo, func() {}, func(s *capstanv1.AddonSpec) { s.Values = jsonValues("tier: gold") })
		if err := admin.Delete(ctx, a); err != nil {
			t.Fatal(err)
		}
		// NOTE: the time bound may pass at the next try, on a less loaded
		// node: the uninstall waits for it, and runs no other version's
		// hooks meanwhile.
		waitFor(t, a, 2*time.Minute, "the uninstall to wait for the render stopped at the time bound", func(cur *capstanv1.Addon) bool {
			return strings.Contains(readyMessage(cur), "at its time bound") && strings.Contains(readyMessage(cur), "waits and tries again")
		})
		if live(t, "v1", "ConfigMap", ns, "ran-2-0-0") != nil {
			t.Error("the uninstall ran the pre-delete hook of 2.0.0, which was never applied")
		}
		if live(t, "v1", "ConfigMap", ns, "settings") == nil {
			t.Error("the uninstall deleted the inventory before the pre-delete hooks ran")
		}
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = nil })
		eventually(t, 90*time.Second, "the Addon to go", func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
		})
		if live(t, "v1", "ConfigMap", ns, "ran-1-0-0") == nil || live(t, "v1", "ConfigMap", ns, "ran-2-0-0") != nil {
			t.Error("once 1.0.0 rendered, the uninstall did not run its hook alone")
		}
	})

	t.Run("values the applied version's render loops on, at exactly that version", func(t *testing.T) {
		ns := newNamespace(t)
		repo := newChartRepository(charts, "appliedspinpin")
		spinning := map[string]string{
			"templates/spin.yaml": "{{- if .Values.tier }}{{ range 1000000000000 }}{{ range 1000000000000 }}{{ end }}{{ end }}{{ end }}\n",
		}
		for k, v := range files {
			spinning[k] = v
		}
		repo.add(t, "1.0.0", spinning)
		a := create(t, &capstanv1.Addon{
			ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "applied-" + ns[len(ns)-5:]},
			Spec: capstanv1.AddonSpec{TargetNamespace: ns, DeletionPolicy: capstanv1.DeletionDelete,
				Chart: &capstanv1.ChartSource{Repo: repo.url(), Name: repo.name, Version: "1.0.0"}},
		})
		waitPhase(t, a, capstanv1.PhaseSynced)
		update(t, a, func(cur *capstanv1.Addon) {
			cur.Spec.ManualSync = true
			cur.Spec.Values = jsonValues("tier: gold")
		})
		if err := admin.Delete(ctx, a); err != nil {
			t.Fatal(err)
		}
		// NOTE: the spec names the applied version itself, so its render
		// is not pinned; a stop at the time bound waits as a pinned one
		// does.
		waitFor(t, a, 2*time.Minute, "the uninstall to wait for the render stopped at the time bound", func(cur *capstanv1.Addon) bool {
			return strings.Contains(readyMessage(cur), "time bound") && strings.Contains(readyMessage(cur), "waits and tries again")
		})
		if live(t, "v1", "ConfigMap", ns, "settings") == nil {
			t.Error("the uninstall deleted the inventory before the pre-delete hooks ran")
		}
		// NOTE: a namespace being deleted ends the wait at once: no
		// hook could run there, and the uninstall must not hold it.
		if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, "the Addon to go", func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
		})
		if live(t, "v1", "ConfigMap", ns, "ran-1-0-0") != nil {
			t.Error("a pre-delete hook ran in a namespace being deleted")
		}
		eventually(t, 30*time.Second, "a DeleteHooksRefused warning that names the namespace", func() bool {
			return strings.Contains(addonEvent(t, a, "DeleteHooksRefused"), "the namespace "+ns+" is being deleted")
		})
	})

	t.Run("the applied version's archive refused (403)", func(t *testing.T) {
		ns := newNamespace(t)
		repo := newChartRepository(charts, "appliedforbidden")
		repo.add(t, "1.0.0", files)
		repo.add(t, "2.0.0", files)
		name := "creds-" + ns[len(ns)-5:]
		// NOTE: other credentials fetch anew, past what the fetcher keeps
		// of the first fetch.
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name, Labels: map[string]string{capstanv1.AddonLabel: "applied-" + ns[len(ns)-5:]}},
			StringData: map[string]string{"username": "reader", "password": "not-a-secret-" + ns},
		}
		if err := admin.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		a := install(t, ns, repo, func() {
			archive := strings.TrimPrefix(repo.versions["1.0.0"], charts.srv.URL)
			_, mend := charts.breakPath(archive, http.StatusForbidden, "")
			t.Cleanup(mend)
		}, func(s *capstanv1.AddonSpec) {
			s.Chart.SecretRef = &capstanv1.LocalObjectReference{Name: name}
		})
		deleteAddon(t, a)
		for _, hook := range []string{"ran-1-0-0", "ran-2-0-0"} {
			if live(t, "v1", "ConfigMap", ns, hook) != nil {
				t.Errorf("the uninstall ran a pre-delete hook (%s), though the applied 1.0.0 could not be fetched", hook)
			}
		}
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the uninstall left the inventory")
		}
		eventually(t, 30*time.Second, "a DeleteHooksRefused warning that says 1.0.0 is not gone", func() bool {
			note := addonEvent(t, a, "DeleteHooksRefused")
			return strings.Contains(note, "1.0.0, the version applied last") && strings.Contains(note, "not because it is gone") && strings.Contains(note, "403")
		})
	})

	t.Run("the applied version deleted from the repository", func(t *testing.T) {
		ns := newNamespace(t)
		repo := newChartRepository(charts, "appliedgone")
		repo.add(t, "1.0.0", files)
		repo.add(t, "2.0.0", files)
		name := "creds-" + ns[len(ns)-5:]
		// NOTE: the fetcher keeps an index it read a moment ago; other
		// credentials read the repository's index anew, which no longer
		// lists 1.0.0.
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name, Labels: map[string]string{capstanv1.AddonLabel: "applied-" + ns[len(ns)-5:]}},
			StringData: map[string]string{"username": "reader", "password": "not-a-secret-" + ns},
		}
		if err := admin.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		a := install(t, ns, repo, func() {
			delete(repo.versions, "1.0.0")
			repo.writeIndex()
		}, func(s *capstanv1.AddonSpec) {
			s.Chart.SecretRef = &capstanv1.LocalObjectReference{Name: name}
		})
		deleteAddon(t, a)
		if live(t, "v1", "ConfigMap", ns, "ran-1-0-0") != nil {
			t.Error("a pre-delete hook of 1.0.0 ran, though the repository no longer serves it")
		}
		if live(t, "v1", "ConfigMap", ns, "ran-2-0-0") == nil {
			t.Error("the uninstall did not fall back to the hooks of 2.0.0, which the spec names")
		}
		eventually(t, 30*time.Second, "a DeleteHooksNotFromApplied warning that names both versions", func() bool {
			note := addonEvent(t, a, "DeleteHooksNotFromApplied")
			return strings.Contains(note, "come from "+repo.url()+"/appliedgone 2.0.0") && strings.Contains(note, "1.0.0") && strings.Contains(note, "could not be fetched")
		})
	})
}
