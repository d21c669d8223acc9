package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// tenantNS is where the restricted add-ons of TestKillTheSyncer live.
const tenantNS = "chaos-tenant"

// tenantChartFiles is a chart written for Capstan, as a restricted add-on
// needs: two ConfigMaps, one with the version from the values.
var tenantChartFiles = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: tenant\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
	"values.yaml": "version: \"0\"\n",
	"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  version: {{ .Values.version | quote }}
`,
	"templates/more.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-more
`,
}

// TestKillTheSyncer kills the controller while the git syncer applies
// commits of definitions (an add-on added, changed or removed with
// uninstall) and while restricted add-ons, whose objects carry owner
// references to their Addon, are installed, upgraded and uninstalled.
// CAPSTAN_CHAOS_SYNCER_KILLS sets the count (6 by default, for make test).
// After the last kill: every definition of the last commit has its Addon,
// Synced with that commit's content; no other Addon of the repository is
// left; every applied object is in an inventory; every restricted object is
// owned by its live Addon; no object was applied twice with different
// content, nor an older content after a newer one.
func TestKillTheSyncer(t *testing.T) {
	seed := envInt("CAPSTAN_CHAOS_SEED", time.Now().UnixNano())
	kills := int(envInt("CAPSTAN_CHAOS_SYNCER_KILLS", 6))
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	t.Logf("seed %d, %d kills", seed, kills)
	ctx := t.Context()
	tenantChart, err := testcontroller.ChartArchive("tenant", tenantChartFiles)
	if err != nil {
		t.Fatal(err)
	}
	env := newChaosEnv(t, tenantChart)
	admin, charts := env.admin, env.charts
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	git := gitserver.Start(t)
	repoURL := git.Create(t, "ops")
	work := gitserver.Clone(t, repoURL)
	// NOTE: the definitions folder is there from the start, and stays when
	// its last definition is removed: a folder that is not there is an
	// error that changes nothing.
	work.Write("README.md", "the chaos test's gitops repository\n").Write("addons/README.md", "definitions\n").CommitAndPush("start")
	gitHost := strings.TrimPrefix(git.URL, "http://")
	start := func() *testcontroller.Process {
		return env.start("--fetch-allow="+gitHost, "--resync-interval=1h", "--trusted-namespaces="+install.Namespace)
	}
	rec := watchHistory(t)
	ctrl := start()
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "chaos-ops"},
		// NOTE: allowEmpty, as the kills remove files at random and may
		// remove the last one: that removal is meant.
		Spec: capstanv1.AddonRepositorySpec{URL: repoURL, Interval: &metav1.Duration{Duration: time.Second}, AllowEmpty: true}}
	if err := admin.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}

	synced := []string{"sierra", "tango", "uniform"}
	tenants := []string{"romeo", "quebec"}
	version := map[string]int{} // the content each present add-on should end with
	points, phases := map[string]int{}, map[string]int{}
	asks := renders{} // every content asked for, by Addon
	for k := 1; k <= kills; k++ {
		var point string
		var key client.ObjectKey
		if rng.IntN(3) > 0 {
			name := synced[rng.IntN(len(synced))]
			key = client.ObjectKey{Namespace: install.Namespace, Name: name}
			switch _, present := version[name]; {
			case !present:
				point = "git add"
				work.Write("addons/"+name+".yaml", definition(name)).Write("apps/"+name+"/config.yaml", appConfig(name, k))
				version[name] = k
				asks.add(key, fmt.Sprint(k), true)
			case rng.IntN(2) == 0:
				point = "git change"
				work.Write("apps/"+name+"/config.yaml", appConfig(name, k))
				version[name] = k
				asks.add(key, fmt.Sprint(k), false)
			default:
				point = "git remove"
				work.Remove("addons/" + name + ".yaml").Remove("apps/" + name)
				delete(version, name)
			}
			work.CommitAndPush(fmt.Sprintf("%s %d", point, k))
		} else {
			name := tenants[rng.IntN(len(tenants))]
			key = client.ObjectKey{Namespace: tenantNS, Name: name}
			switch _, present := version[name]; {
			case !present:
				point = "restricted install"
				waitGone(t, admin, key)
				a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name},
					Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: charts.URL + "/tenant-1.0.0.tgz"},
						Values: jsonValues(t, fmt.Sprintf(`{"version":"%d"}`, k))}}
				if err := admin.Create(ctx, a); err != nil {
					t.Fatal(err)
				}
				version[name] = k
				asks.add(key, fmt.Sprint(k), true)
			case rng.IntN(2) == 0:
				point = "restricted upgrade"
				patch := fmt.Appendf(nil, `{"spec":{"values":{"version":"%d"}}}`, k)
				if err := admin.Patch(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name}},
					client.RawPatch("application/merge-patch+json", patch)); err != nil {
					t.Fatal(err)
				}
				version[name] = k
				asks.add(key, fmt.Sprint(k), false)
			default:
				point = "restricted uninstall"
				if err := admin.Delete(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name}}); err != nil {
					t.Fatal(err)
				}
				delete(version, name)
			}
		}
		points[point]++
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
		phases[point+": "+killPoint(ctx, admin, key)]++
		ctrl.Kill()
		ctrl = start()
	}

	began := time.Now()
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := ctrl.Alive(); err != nil {
			return false, err
		}
		last = converged(ctx, admin, synced, tenants, version)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("not converged 5 minutes after the last kill: %s (%v)\n%s", last, err, ctrl.LogTail(20))
	}
	t.Logf("converged %s after the last kill", time.Since(began).Round(time.Second))
	orphans := checkOwned(t, admin, synced, tenants)
	objects, contents, twice := rec.checkContents(t, asks)
	t.Logf("figures: %d kills at %v; phases at the kills: %v", kills, points, phases)
	t.Logf("figures: %d orphans or objects without their owner; %d objects with %d contents, %d applied twice with different content",
		orphans, objects, contents, twice)
	if objects == 0 {
		t.Error("nothing was applied: the test exercised nothing")
	}
}

func definition(name string) string {
	return fmt.Sprintf("name: %s\nnamespace: chaos-%s\ncreateNamespace: true\ngit:\n  path: apps/%s\nprune: true\ndeletionPolicy: Delete\n", name, name, name)
}

func appConfig(name string, version int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-config\ndata:\n  version: %q\n", name, fmt.Sprint(version))
}

func jsonValues(t *testing.T, s string) *apiextensionsv1.JSON {
	t.Helper()
	return &apiextensionsv1.JSON{Raw: []byte(s)}
}

// converged says what is not yet as the last change left it; "" when all is.
func converged(ctx context.Context, admin client.Client, synced, tenants []string, version map[string]int) string {
	for _, name := range append(append([]string{}, synced...), tenants...) {
		ns, target := install.Namespace, "chaos-"+name
		if !contains(synced, name) {
			ns, target = tenantNS, tenantNS
		}
		a := &capstanv1.Addon{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a)
		want, present := version[name]
		switch {
		case !present && !apierrors.IsNotFound(err):
			return name + ": the Addon is still there"
		case !present:
			cm := &corev1.ConfigMap{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: target, Name: name + "-config"}, cm); !apierrors.IsNotFound(err) {
				return name + ": its ConfigMap outlived the uninstall"
			}
			continue
		case err != nil:
			return name + ": " + err.Error()
		case a.Status.Phase != capstanv1.PhaseSynced || a.Status.ObservedGeneration != a.Generation:
			return fmt.Sprintf("%s: phase %s, observed %d of %d", name, a.Status.Phase, a.Status.ObservedGeneration, a.Generation)
		}
		cm := &corev1.ConfigMap{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: target, Name: name + "-config"}, cm); err != nil {
			return name + ": " + err.Error()
		}
		if cm.Data["version"] != fmt.Sprint(want) {
			return fmt.Sprintf("%s: version %s, want %d", name, cm.Data["version"], want)
		}
	}
	list := &capstanv1.AddonList{}
	if err := admin.List(ctx, list, client.InNamespace(install.Namespace), client.MatchingLabels{gitops.ManagedByGitLabel: "chaos-ops"}); err != nil {
		return err.Error()
	}
	for _, a := range list.Items {
		if _, ok := version[a.Name]; !ok {
			return a.Name + ": an Addon of a removed definition is left"
		}
	}
	return ""
}

// checkOwned counts applied ConfigMaps that no live Addon's inventory
// holds, and restricted ones without an owner reference to their live
// Addon.
func checkOwned(t *testing.T, admin client.Client, synced, tenants []string) int {
	t.Helper()
	bad := 0
	inventories := map[string]bool{}
	uids := map[string]string{}
	for _, ns := range []string{install.Namespace, tenantNS} {
		list := &capstanv1.AddonList{}
		if err := admin.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, a := range list.Items {
			uids[a.Namespace+"/"+a.Name] = string(a.UID)
			for _, r := range a.Status.Inventory {
				inventories[r.Kind+"/"+r.Namespace+"/"+r.Name] = true
			}
		}
	}
	namespaces := []string{tenantNS}
	for _, name := range synced {
		namespaces = append(namespaces, "chaos-"+name)
	}
	for _, ns := range namespaces {
		cms := &corev1.ConfigMapList{}
		if err := admin.List(t.Context(), cms, client.InNamespace(ns), client.HasLabels{capstanv1.AddonLabel}); err != nil {
			t.Fatal(err)
		}
		for _, cm := range cms.Items {
			if !inventories["ConfigMap/"+cm.Namespace+"/"+cm.Name] {
				bad++
				t.Errorf("orphan: ConfigMap %s/%s", cm.Namespace, cm.Name)
			}
			if ns != tenantNS {
				continue
			}
			owner := cm.Labels[capstanv1.AddonLabel]
			owned := false
			for _, o := range cm.OwnerReferences {
				owned = owned || (o.Kind == "Addon" && o.Name == owner && string(o.UID) == uids[tenantNS+"/"+owner])
			}
			if !owned {
				bad++
				t.Errorf("restricted ConfigMap %s/%s is not owned by its live Addon", cm.Namespace, cm.Name)
			}
		}
	}
	_ = tenants
	return bad
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
