package render

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"

	"capstan.dev/capstan/internal/source"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(strings.TrimLeft(s, "\n"))} }

func names(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

// repo is a git checkout in memory: a base, an overlay on it, and a folder of plain YAML.
func repo() fstest.MapFS {
	return fstest.MapFS{
		"apps/base/kustomization.yaml": file(`
resources:
  - deployment.yaml
  - service.yaml
labels:
  - pairs:
      app: demo
    includeSelectors: true
`),
		"apps/base/deployment.yaml": file(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: demo
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: demo
          image: registry.example/demo:1.0.0
`),
		"apps/base/service.yaml": file(`
apiVersion: v1
kind: Service
metadata:
  name: demo
spec:
  ports:
    - port: 80
`),
		"apps/prod/kustomization.yaml": file(`
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: prod
namePrefix: prod-
resources:
  - ../base
images:
  - name: registry.example/demo
    newTag: 1.1.0
patches:
  - path: replicas.yaml
configMapGenerator:
  - name: settings
    literals:
      - URL=https://demo.example/api
`),
		"apps/prod/replicas.yaml": file(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: demo
spec:
  replicas: 3
`),
		"plain/b.yaml": file(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: b1
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b2
`),
		"plain/a.yml": file(`
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: ServiceAccount
    metadata:
      name: a-sa
  - apiVersion: v1
    kind: Secret
    metadata:
      name: a-secret
`),
		"plain/sub/c.yaml": file(`
apiVersion: v1
kind: Namespace
metadata:
  name: c
`),
		"plain/README.md":               file("not yaml: [\n"),
		"plain/.github/ci.yaml":         file("on: push\n"),
		"plain/.hidden.yaml":            file("not: an object\n"),
		"broken/notk8s.yaml":            file("just: values\n"),
		"nested/sub/kustomization.yaml": file("resources: []\n"),
		"nested/values.yaml":            file("just: values\n"),
	}
}

func TestFolderKustomizeOverlay(t *testing.T) {
	res, err := Folder(repo(), "apps/prod", SourceIdentity{Commit: "0123abc"})
	if err != nil {
		t.Fatal(err)
	}
	// kustomize's legacy order; the generated ConfigMap's name ends in a
	// hash of its content, so only its prefix is checked.
	want := []string{"ConfigMap/prod/prod-settings-…", "Service/prod/prod-demo", "Deployment/prod/prod-demo"}
	got := names(res.Objects)
	if len(got) != 3 || !strings.HasPrefix(got[0], "ConfigMap/prod/prod-settings-") || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("objects = %v, want like %v", got, want)
	}
	deploy := res.Objects[2]
	replicas, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas")
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	image := containers[0].(map[string]any)["image"]
	selector, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "selector", "matchLabels")
	if replicas != 3 || image != "registry.example/demo:1.1.0" || selector["app"] != "demo" {
		t.Errorf("deployment = replicas %d, image %v, selector %v; want the overlay's patch, image and the base's labels", replicas, image, selector)
	}
	if res.Hash == "" || len(res.Hooks) != 0 {
		t.Errorf("hash %q, %d hooks; want a hash and no hooks", res.Hash, len(res.Hooks))
	}
}

func TestFolderKustomizeRefusesRemote(t *testing.T) {
	cases := []struct {
		name, field, ref, wantRef string
	}{
		{name: "https git base", field: "resources", ref: "https://github.com/org/repo//deploy?ref=v1", wantRef: "https://github.com/org/repo//deploy"},
		{name: "github shorthand", field: "resources", ref: "github.com/org/repo/deploy?ref=v1", wantRef: "github.com/org/repo/deploy"},
		{name: "scp style", field: "resources", ref: "git@gitlab.example:org/repo.git//deploy"},
		{name: "git:: prefix", field: "resources", ref: "git::https://gitlab.example/org/repo"},
		{name: "remote file", field: "resources", ref: "https://raw.example/deploy.yaml"},
		{name: "scp style with a password", field: "resources", ref: "me:pa55@git.example:org/repo", wantRef: "git.example:org/repo"},
		{name: "credentials are not shown", field: "resources", ref: "https://user:tok3n@git.example/org/repo", wantRef: "https://git.example/org/repo"},
		{name: "remote component", field: "components", ref: "https://github.com/org/components//probe"},
		{name: "remote patch file", field: "patches", ref: "https://raw.example/patch.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := repo()
			// The remote sits in the base, one level below the folder built.
			body := "resources:\n  - deployment.yaml\n" + tc.field + ":\n  - " + tc.ref + "\n"
			if tc.field == "patches" {
				body = "resources:\n  - deployment.yaml\npatches:\n  - path: " + tc.ref + "\n"
			}
			fsys["apps/base/kustomization.yaml"] = file(body)
			_, err := Folder(fsys, "apps/prod", SourceIdentity{})
			var re *RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("error = %v, want a *RemoteError", err)
			}
			wantRef := tc.ref
			if tc.wantRef != "" {
				wantRef = tc.wantRef
			}
			if re.Field != tc.field || re.Kustomization != "apps/base/kustomization.yaml" || re.Reference != wantRef {
				t.Errorf("refused %s in %s naming %q; want %s in apps/base/kustomization.yaml naming %q", re.Field, re.Kustomization, re.Reference, tc.field, wantRef)
			}
			if strings.Contains(err.Error(), "tok3n") || strings.Contains(err.Error(), "pa55") {
				t.Errorf("the error carries a password: %v", err)
			}
		})
	}

	t.Run("helm chart inflation", func(t *testing.T) {
		fsys := repo()
		fsys["apps/prod/kustomization.yaml"] = file("helmCharts:\n  - name: x\n    repo: https://charts.example\n")
		_, err := Folder(fsys, "apps/prod", SourceIdentity{})
		if err == nil || !strings.Contains(err.Error(), "helmCharts") {
			t.Errorf("error = %v, want a refusal of helmCharts", err)
		}
	})
}

func TestFolderPlainYAML(t *testing.T) {
	res, err := Folder(repo(), "plain", SourceIdentity{Commit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	// a.yml before b.yaml before sub/c.yaml; the List expanded; the comment
	// document, README.md and dot files skipped.
	want := []string{"ServiceAccount//a-sa", "Secret//a-secret", "ConfigMap//b1", "ConfigMap//b2", "Namespace//c"}
	if diff := cmp.Diff(want, names(res.Objects)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	other, err := Folder(repo(), "plain", SourceIdentity{Commit: "abd"})
	if err != nil {
		t.Fatal(err)
	}
	if other.Hash == res.Hash {
		t.Error("another commit gives the same hash")
	}
}

func TestFolderErrors(t *testing.T) {
	cases := []struct{ dir, want string }{
		{dir: "broken", want: "broken/notk8s.yaml document 1"},
		{dir: "nested", want: "nested/values.yaml is not Kubernetes objects"},
		{dir: "missing", want: "check the source's path"},
		{dir: "plain/b.yaml", want: "is a file"},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			_, err := Folder(repo(), tc.dir, SourceIdentity{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one that says %q", err, tc.want)
			}
		})
	}
}

// fleetRepo is a folder laid out for Flux's kustomize-controller: no
// kustomization of its own, loose manifests beside subfolders that hold
// one, one of them in a subfolder of a subfolder.
func fleetRepo() fstest.MapFS {
	return fstest.MapFS{
		"fleet/web.yaml": file(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    sidecar/enabled: on
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example/web:1}]
`),
		"fleet/app/kustomization.yaml": file("namePrefix: app-\nresources: [settings.yaml]\n"),
		"fleet/app/settings.yaml":      file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"),
		// Inside a kustomized subfolder, only what its kustomization lists is read.
		"fleet/app/unlisted/values.yaml": file("just: values\n"),
		"fleet/infra/shared.yml":         file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata:\n  cluster: ${cluster}\n"),
		"fleet/infra/db/kustomization.yaml": file(`
namePrefix: db-
resources: [service.yaml]
`),
		"fleet/infra/db/service.yaml":   file("apiVersion: v1\nkind: Service\nmetadata: {name: main}\nspec: {ports: [{port: 5432}]}\n"),
		"fleet/README.md":               file("not yaml: [\n"),
		"fleet/.github/ci.yaml":         file("on: push\n"),
		"fleet/.yamllint.yaml":          file("rules: {}\n"),
		"fleet/.old/kustomization.yaml": file("resources: [missing.yaml]\n"),
	}
}

// TestFolderBuildsAsFluxGeneratesAKustomization: a folder without a
// kustomization whose subfolders hold one is built as Flux's
// kustomize-controller builds it. Each kustomized subfolder (one a subfolder
// of a plain one) is built as a resource, with its namePrefix; every other
// YAML file is a resource, read by kustomize (YAML 1.2, so an unquoted on
// stays a string); hidden files and folders are left out, a kustomization
// in one too. Variables are substituted and the objects bounded as in any
// kustomize build. The folder is built the same at the root of a tree.
func TestFolderBuildsAsFluxGeneratesAKustomization(t *testing.T) {
	want := []string{"ConfigMap//app-settings", "ConfigMap//shared", "Deployment//web", "Service//db-main"}
	sub, err := fs.Sub(fleetRepo(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		fsys fs.FS
		dir  string
	}{"subfolder": {fleetRepo(), "fleet"}, "root": {sub, "."}} {
		t.Run(name, func(t *testing.T) {
			res, err := FolderWith(tc.fsys, tc.dir, SourceIdentity{Commit: "abc"}, FolderInputs{Variables: map[string]string{"cluster": "prod"}})
			if err != nil {
				t.Fatal(err)
			}
			got := names(res.Objects)
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			for _, o := range res.Objects {
				if o.GetKind() == "Deployment" && o.GetAnnotations()["sidecar/enabled"] != "on" {
					t.Errorf("annotations = %v, want sidecar/enabled: on read as kustomize reads it", o.GetAnnotations())
				}
				if v, _, _ := unstructured.NestedString(o.Object, "data", "cluster"); o.GetName() == "shared" && v != "prod" {
					t.Errorf("ConfigMap shared holds cluster %q, want the variable substituted", v)
				}
			}
		})
	}
	if _, err := FolderWith(fleetRepo(), "fleet", SourceIdentity{}, FolderInputs{MaxObjects: 3}); err == nil || !strings.Contains(err.Error(), "holds more than 3 objects") {
		t.Errorf("error = %v, want the bound on objects", err)
	}
}

// TestFolderGeneratedKustomizationRefusesWhatFluxRefuses: in a folder built
// with a generated kustomization, a YAML file that is not Kubernetes
// objects fails the render, naming the file, as kustomize-controller fails
// it; a hidden one does not. The same file inside a kustomized subfolder
// that does not list it is not read.
func TestFolderGeneratedKustomizationRefusesWhatFluxRefuses(t *testing.T) {
	fsys := fleetRepo()
	fsys["fleet/infra/values.yaml"] = file("replicas: 3\n")
	_, err := Folder(fsys, "fleet", SourceIdentity{})
	if err == nil || !strings.Contains(err.Error(), "fleet/infra/values.yaml is not Kubernetes objects") ||
		!strings.Contains(err.Error(), "built as Flux builds it") {
		t.Errorf("error = %v, want one naming fleet/infra/values.yaml", err)
	}
	fsys = fleetRepo()
	fsys["fleet/settings/other.yaml"] = file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-settings}\n")
	if _, err := Folder(fsys, "fleet", SourceIdentity{}); err == nil || !strings.Contains(err.Error(), "a folder without a kustomization, built with the one Flux generates") {
		t.Errorf("error = %v, want kustomize's, saying the kustomization was generated", err)
	}
}

// TestFolderGeneratedKustomizationReadsFilesAsTheBuildDoes: the files of a
// generated kustomization are judged as the build reads them, decrypted, so
// a file whose bytes on disk are not objects but whose decrypted text is
// builds; one that is not objects even decrypted still fails, naming it.
func TestFolderGeneratedKustomizationReadsFilesAsTheBuildDoes(t *testing.T) {
	fsys := fleetRepo()
	fsys["fleet/infra/sealed.yaml"] = file("sealed: true\n")
	decrypt := func(name string, data []byte) ([]byte, error) {
		if name == "fleet/infra/sealed.yaml" {
			return []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: sealed}\n"), nil
		}
		return data, nil
	}
	res, err := FolderWith(fsys, "fleet", SourceIdentity{}, FolderInputs{Decrypt: decrypt, Variables: map[string]string{"cluster": "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(res.Objects); !slices.Contains(got, "Secret//sealed") {
		t.Errorf("objects = %v, want the decrypted Secret sealed", got)
	}
	fsys["fleet/infra/values.yaml"] = file("replicas: 3\n")
	if _, err := FolderWith(fsys, "fleet", SourceIdentity{}, FolderInputs{Decrypt: decrypt}); err == nil || !strings.Contains(err.Error(), "fleet/infra/values.yaml is not Kubernetes objects") {
		t.Errorf("error = %v, want one naming fleet/infra/values.yaml", err)
	}
}

// TestFolderFailedBuildDecryptsEachFileOnce: when the build of a folder
// Flux's way fails, the files are judged again as the build read them, from
// what the build decrypted, not by decrypting each a second time.
func TestFolderFailedBuildDecryptsEachFileOnce(t *testing.T) {
	fsys := fleetRepo()
	fsys["fleet/infra/values.yaml"] = file("replicas: 3\n")
	calls := map[string]int{}
	decrypt := func(name string, data []byte) ([]byte, error) {
		calls[name]++
		return data, nil
	}
	if _, err := FolderWith(fsys, "fleet", SourceIdentity{}, FolderInputs{Decrypt: decrypt}); err == nil || !strings.Contains(err.Error(), "fleet/infra/values.yaml is not Kubernetes objects") {
		t.Fatalf("error = %v, want one naming fleet/infra/values.yaml", err)
	}
	if calls["fleet/infra/shared.yml"] == 0 {
		t.Errorf("decrypt calls %v: the loose files were never read", calls)
	}
	for name, n := range calls {
		if n != 1 {
			t.Errorf("%s decrypted %d times, want once", name, n)
		}
	}
}

// hooksRepo is a folder written for Argo CD, with a chart's hooks rendered
// into it.
func hooksRepo() fstest.MapFS {
	job := func(name, annotations string) string {
		return "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  " + name + "\n  annotations:\n" + annotations +
			"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: x, image: registry.example/x:1}]\n"
	}
	argo := func(phases string) string { return "    argocd.argoproj.io/hook: \"" + phases + "\"\n" }
	return fstest.MapFS{
		"app/objects.yaml": file(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    argocd.argoproj.io/sync-wave: "1"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-only
  annotations:
    argocd.argoproj.io/hook: Skip
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: empty
  annotations:
    argocd.argoproj.io/hook: ""
`),
		"app/hooks.yaml": file(job("name: migrate", argo("PreSync")+"    argocd.argoproj.io/hook-delete-policy: HookSucceeded, BeforeHookCreation\n    argocd.argoproj.io/sync-wave: \"-2\"\n") +
			job("name: smoke", argo("postsync")) +
			job("name: warm", argo("Sync")+"    capstan.dev/sync-wave: \"3\"\n    argocd.argoproj.io/sync-wave: \"9\"\n") +
			job("name: alert", argo("SyncFail")) +
			job("name: notify", argo("PostSync, SyncFail")) +
			job("name: twice", argo("PreSync,PostSync")) +
			job("name: kept", argo("PreSync,Skip")) +
			job("name: trailing", argo("PreSync,")) +
			job("name: typo", argo("PreSynk")+"    helm.sh/hook: pre-upgrade\n") +
			job("name: badwave", argo("PreSync")+"    argocd.argoproj.io/sync-wave: first\n") +
			job("generateName: cleanup-", argo("PostDelete")) +
			job("generateName: cleanup-", argo("PostDelete")) +
			job("name: both", argo("PreDelete")+"    helm.sh/hook: post-install\n") +
			job("name: seed", "    helm.sh/hook: post-install\n    helm.sh/hook-weight: \"5\"\n    helm.sh/hook-delete-policy: hook-succeeded\n") +
			job("name: rollback", "    helm.sh/hook: pre-rollback\n") +
			job("name: alert-helm", argo("SyncFail")+"    helm.sh/hook: post-install\n") +
			job("name: tested", "    helm.sh/hook: pre-install,test\n") +
			job("name: crd", "    helm.sh/hook: crd-install\n") +
			job("name: test", "    helm.sh/hook: test\n")),
	}
}

func TestFolderHooks(t *testing.T) {
	res, err := Folder(hooksRepo(), "app", SourceIdentity{Commit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Job//crd", "ConfigMap//settings"}, names(res.Objects)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Job//test", "ConfigMap//local-only"}, names(res.Left)); diff != "" {
		t.Errorf("left out (-want +got):\n%s", diff)
	}
	type hook struct {
		Name, Annotation string
		Events           []string
		Weight           int
		Policies         []string
		AfterHealthy     bool
	}
	var got []hook
	for _, h := range res.Hooks {
		got = append(got, hook{h.Object.GetName(), h.Annotation, h.Events, h.Weight, h.DeletePolicies, h.AfterHealthy})
	}
	pre, post := []string{"pre-install", "pre-upgrade"}, []string{"post-install", "post-upgrade"}
	argo, helm := ArgoHookAnnotation, "helm.sh/hook"
	want := []hook{
		{Name: "migrate", Annotation: argo, Events: pre, Weight: -2, Policies: []string{"hook-succeeded", "before-hook-creation"}},
		{Name: "smoke", Annotation: argo, Events: post, AfterHealthy: true},
		{Name: "warm", Annotation: argo, Events: post, Weight: 3},
		{Name: "alert", Annotation: argo, Events: []string{SyncFailEvent}},
		{Name: "notify", Annotation: argo, Events: append(slices.Clone(post), SyncFailEvent), AfterHealthy: true},
		{Name: "twice", Annotation: argo, Events: append(slices.Clone(pre), post...), AfterHealthy: true},
		{Name: "kept", Annotation: argo, Events: pre},
		{Name: "trailing", Annotation: argo, Events: pre},
		{Name: "typo", Annotation: helm, Events: pre},
		{Name: "badwave", Annotation: argo, Events: pre},
		{Name: res.Hooks[10].Object.GetName(), Annotation: argo, Events: []string{"post-delete"}},
		{Name: res.Hooks[11].Object.GetName(), Annotation: argo, Events: []string{"post-delete"}},
		{Name: "both", Annotation: argo, Events: []string{"pre-delete"}},
		{Name: "seed", Annotation: helm, Events: post, Weight: 5, Policies: []string{"hook-succeeded"}, AfterHealthy: true},
		{Name: "rollback", Annotation: helm, Events: []string{}},
		{Name: "alert-helm", Annotation: argo, Events: []string{SyncFailEvent}},
		{Name: "tested", Annotation: helm, Events: pre},
		{Name: "empty", Annotation: argo, Events: []string{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hooks (-want +got):\n%s", diff)
	}
	first, second := res.Hooks[10].Object.GetName(), res.Hooks[11].Object.GetName()
	if !strings.HasPrefix(first, "cleanup-") || len(first) != len("cleanup-")+10 || first == second {
		t.Errorf("the generateName hooks are named %q and %q; want cleanup- and ten hex digits, each its own", first, second)
	}
	if h := res.Hooks[5]; h.AwaitsHealthy("pre-install") || !h.AwaitsHealthy("post-upgrade") {
		t.Error("a PreSync,PostSync hook waits for health before the apply, or not after it")
	}
	notices := map[string]string{}
	for _, n := range res.Notices {
		notices[n.Path] = n.Message
	}
	for path, want := range map[string]string{
		"hooks/ConfigMap/local-only": "ConfigMap local-only is marked argocd.argoproj.io/hook: Skip, so it is left out",
		"hooks/Job/badwave":          `has argocd.argoproj.io/sync-wave "first", not a whole number, so it runs at 0 in its phase`,
		"hooks/Job/rollback":         "names pre-rollback, which Capstan does not run (it runs PreSync, Sync, PostSync, SyncFail, PreDelete and PostDelete hooks), so it never runs",
		"hooks/ConfigMap/empty":      "hook ConfigMap empty names no phase, so it never runs, as in Argo CD",
	} {
		if !strings.Contains(notices[path], want) {
			t.Errorf("notice %s = %q; want it to say %q", path, notices[path], want)
		}
	}
	if len(notices) != 4 {
		t.Errorf("notices %v; want the four above", notices)
	}
	if h := res.Hooks[4]; h.AwaitsHealthy(SyncFailEvent) {
		t.Error("a PostSync,SyncFail hook waits for health when the sync failed")
	}
	other, err := Folder(hooksRepo(), "app", SourceIdentity{Commit: "abd"})
	if err != nil {
		t.Fatal(err)
	}
	if other.Hooks[10].Object.GetName() == first {
		t.Error("a new render names a generateName hook as the one before")
	}
}

func TestPostRenderKeepsFolderHooks(t *testing.T) {
	cases := []struct{ name, patch, target, want string }{
		{"an object made a hook", `[{"op":"add","path":"/metadata/annotations/argocd.argoproj.io~1hook","value":"PreSync"}]`, "settings", "gave ConfigMap settings a argocd.argoproj.io/hook annotation"},
		{"a hook skipped", `[{"op":"replace","path":"/metadata/annotations/argocd.argoproj.io~1hook","value":"Skip"}]`, "migrate", "spec.patches left hook Job migrate out"},
		{"a hook made no hook", `[{"op":"remove","path":"/metadata/annotations/argocd.argoproj.io~1hook"}]`, "migrate", "removed the hook annotations of hook Job migrate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Folder(hooksRepo(), "app", SourceIdentity{Commit: "abc"})
			if err != nil {
				t.Fatal(err)
			}
			err = (&PostRender{Patches: []types.Patch{{Patch: tc.patch, Target: selectorOf("", tc.target)}}}).apply(res, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one that says %q", err, tc.want)
			}
		})
	}
	res, err := Folder(hooksRepo(), "app", SourceIdentity{Commit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	patch := `[{"op":"replace","path":"/metadata/annotations/argocd.argoproj.io~1hook","value":"PostSync"}]`
	if err := (&PostRender{Patches: []types.Patch{{Patch: patch, Target: selectorOf("Job", "migrate")}}}).apply(res, nil); err != nil {
		t.Fatal(err)
	}
	if h := res.Hooks[0]; h.Object.GetName() != "migrate" || !h.AfterHealthy || !slices.Equal(h.Events, []string{"post-install", "post-upgrade"}) {
		t.Errorf("the patched hook is %s %v (after healthy %v); want migrate, PostSync", h.Object.GetName(), h.Events, h.AfterHealthy)
	}
}

// TestFolderFollowsSymlinks renders folders that reach files and folders
// through symlinks, as a checkout on disk does for kustomize: a plain
// folder takes a linked file and a linked folder's files, a kustomization
// lists a linked file, and a link that cannot be followed is named.
func TestFolderFollowsSymlinks(t *testing.T) {
	link := func(target string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink}
	}
	cm := func(name string) *fstest.MapFile {
		return file("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n")
	}
	tree := fstest.MapFS{
		"common/cm.yaml":              cm("shared"),
		"common/more/extra.yaml":      cm("extra"),
		"plain/own.yaml":              cm("own"),
		"plain/shared.yaml":           link("../common/cm.yaml"),
		"plain/linked":                link("../common/more"),
		"kust/kustomization.yaml":     file("resources: [shared.yaml, own.yaml]\n"),
		"kust/own.yaml":               cm("kust-own"),
		"kust/shared.yaml":            link("../common/cm.yaml"),
		"loop/self":                   link("."),
		"loop/a.yaml":                 cm("a"),
		"dangling/a.yaml":             cm("a"),
		"dangling/gone.yaml":          link("../nowhere.yaml"),
		"unrelated/gone.yaml":         link("../nowhere.yaml"),
		"kustloop/kustomization.yaml": file("resources: [a.yaml]\n"),
		"kustloop/a.yaml":             cm("a"),
		"kustloop/self":               link("."),
	}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"plain", []string{"ConfigMap//extra", "ConfigMap//own", "ConfigMap//shared"}},
		{"kust", []string{"ConfigMap//kust-own", "ConfigMap//shared"}},
		// A link to a folder above it in a folder kustomize builds is
		// left out of the copy, and the build goes on.
		{"kustloop", []string{"ConfigMap//a"}},
	} {
		res, err := Folder(tree, tc.dir, SourceIdentity{Commit: "abc"})
		if err != nil {
			t.Fatalf("%s: %v", tc.dir, err)
		}
		if diff := cmp.Diff(tc.want, names(res.Objects)); diff != "" {
			t.Errorf("%s: objects (-want +got):\n%s", tc.dir, diff)
		}
	}
	for dir, want := range map[string]string{
		"loop":     "symlink loop/self points to loop, a folder that holds the link",
		"dangling": "symlink dangling/gone.yaml cannot be followed",
	} {
		if _, err := Folder(tree, dir, SourceIdentity{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v; want one that says %q", dir, err, want)
		}
	}
}

// TestFolderSymlinkAmplification checks that symlinked folders cannot make
// a render read a tree many times over: a link to a folder that holds it
// is not followed, and the bytes read through links are bounded.
func TestFolderSymlinkAmplification(t *testing.T) {
	link := func(target string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink}
	}
	cm := file("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n")
	big := &fstest.MapFile{Data: []byte("# " + strings.Repeat("x", 1<<20) + "\n")}

	// Two links to the root: followed, each level doubles what is read,
	// and eight levels read the 1 MiB file 512 times. The tree is a
	// checkout on disk, as fstest.MapFS cannot resolve a link to its root.
	root := t.TempDir()
	for name, f := range map[string]*fstest.MapFile{
		"big.yaml":                  big,
		"s1":                        link("."),
		"s2":                        link("."),
		"app/kustomization.yaml":    file("resources: [cm.yaml]\n"),
		"app/cm.yaml":               cm,
		"app/up":                    link(".."),
		"plain/cm.yaml":             cm,
		"plain/sub/back":            link("../../plain"),
		"cross/a/cm.yaml":           cm,
		"cross/a/to-b":              link("../b"),
		"cross/b/to-a":              link("../a"),
		"shared/kustomization.yaml": file("resources: [cm.yaml]\n"),
		"shared/cm.yaml":            link("../app/cm.yaml"),
		"shared/lib":                link("../plain"),
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		write := func() error { return os.WriteFile(p, f.Data, 0o644) }
		if f.Mode&fs.ModeSymlink != 0 {
			write = func() error { return os.Symlink(string(f.Data), p) }
		}
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	loops := os.DirFS(root)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := Folder(loops, "app", SourceIdentity{Commit: "abc"})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	if diff := cmp.Diff([]string{"ConfigMap//app"}, names(res.Objects)); diff != "" {
		t.Errorf("app: objects (-want +got):\n%s", diff)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("app: the render allocated %d MiB for a tree of 1 MiB; want the links to the root left out", got>>20)
	}
	// Ordinary links still work next to the loops.
	if res, err := Folder(loops, "shared", SourceIdentity{}); err != nil {
		t.Errorf("shared: %v", err)
	} else if diff := cmp.Diff([]string{"ConfigMap//app"}, names(res.Objects)); diff != "" {
		t.Errorf("shared: objects (-want +got):\n%s", diff)
	}
	// Without a kustomization, a loop is an error that names the link.
	for dir, want := range map[string]string{
		"plain": "symlink plain/sub/back points to plain, a folder that holds the link",
		"cross": "symlink cross/a/to-b/to-a points to cross/a, a folder that holds the link",
	} {
		if _, err := Folder(loops, dir, SourceIdentity{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v; want one that says %q", dir, err, want)
		}
	}

	// Links that do not loop still multiply: each folder here holds two
	// links to the one before, so l6 reaches the 1 MiB file 64 times.
	fan := fstest.MapFS{
		"l0/big.yaml":            big,
		"app/kustomization.yaml": file("resources: [cm.yaml]\n"),
		"app/cm.yaml":            cm,
	}
	for i := 1; i <= 6; i++ {
		prev := "../l" + strconv.Itoa(i-1)
		fan["l"+strconv.Itoa(i)+"/a"] = link(prev)
		fan["l"+strconv.Itoa(i)+"/b"] = link(prev)
	}
	in := FolderInputs{MaxBytes: 16 << 20}
	for _, dir := range []string{"app", "l6"} {
		_, err := FolderWith(fan, dir, SourceIdentity{}, in)
		if err == nil || !strings.Contains(err.Error(), "past 16777216 bytes, the limit of a git tree") {
			t.Errorf("%s: error %v; want the byte limit", dir, err)
		}
	}
	// Within the limit, the same links render.
	if _, err := FolderWith(fan, "l3", SourceIdentity{}, in); err != nil {
		t.Errorf("l3: %v", err)
	}
}

// TestFolderHashCoversTheNamespace: a folder's namespaced objects that
// name none are put in the add-on's namespace after the render, so the
// render hash covers it, as a chart's does: another namespace is another
// render. The same inputs hash the same, and FormerHash is the hash a
// folder had before the namespace was part of it, patches and variables
// folded in alike.
func TestFolderHashCoversTheNamespace(t *testing.T) {
	src := SourceIdentity{URL: "https://git.example/apps.git", Commit: "abc", Path: "plain"}
	art := &source.Artifact{Tree: &source.Tree{FS: repo()}, Path: "plain", Identity: src}
	post := &PostRender{Images: []types.Image{{Name: "nginx", NewTag: "1.27"}}}
	for _, tc := range []struct {
		name string
		post *PostRender
		vars map[string]string
	}{
		{name: "plain"},
		{name: "with patches and variables", post: post, vars: map[string]string{"cluster": "prod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered := func(ns string) *Result {
				t.Helper()
				res, err := Render(context.Background(), art, nil, Options{ReleaseName: "x", Namespace: ns, PostRender: tc.post, Variables: tc.vars})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			a, again, b, none := rendered("a"), rendered("a"), rendered("b"), rendered("")
			if a.Hash == b.Hash {
				t.Errorf("namespaces a and b hash the same, %s: a new target namespace must be a new render", a.Hash)
			}
			if a.Hash != again.Hash {
				t.Errorf("the same inputs hash %s, then %s", a.Hash, again.Hash)
			}
			if a.FormerHash != none.Hash || b.FormerHash != none.Hash || none.FormerHash != "" {
				t.Errorf("former hashes %q, %q, %q; want the hash without a namespace, %s, and none for that one", a.FormerHash, b.FormerHash, none.FormerHash, none.Hash)
			}
			// What a folder hashed before the namespace was part of it.
			want, err := Hash(src, nil, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if want, err = substituteHash(want, tc.vars); err != nil {
				t.Fatal(err)
			}
			if want, err = tc.post.hash(want); err != nil {
				t.Fatal(err)
			}
			if none.Hash != want {
				t.Errorf("without a namespace the hash is %s, want %s as before", none.Hash, want)
			}
		})
	}
}

// TestFolderHookWaveOutOfRange reads a wave too large for 32 bits as the
// notice says it runs: at 0, not first or last of its phase.
func TestFolderHookWaveOutOfRange(t *testing.T) {
	for _, wave := range []string{"99999999999", "-99999999999", "first"} {
		obj := newObject("batch/v1", "Job", "migrate")
		obj.SetAnnotations(map[string]string{ArgoHookAnnotation: "PreSync", "argocd.argoproj.io/sync-wave": wave})
		f := parseFolderHook(obj, "app")
		if !f.isHook || f.hook.Weight != 0 || !strings.Contains(f.notice, "so it runs at 0 in its phase") {
			t.Errorf("wave %q: hook %v, weight %d, notice %q; want weight 0, as the notice says", wave, f.isHook, f.hook.Weight, f.notice)
		}
	}
}

// replacingSchema is an OpenAPI schema that makes a pod's containers and
// their env lists that a strategic merge patch replaces whole.
const replacingSchema = `{"definitions": {
 "io.k8s.api.core.v1.PodSpec": {"type": "object", "properties": {"containers": {"type": "array", "items": {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}, "x-kubernetes-patch-strategy": "replace"}}},
 "io.k8s.api.core.v1.Container": {"type": "object", "properties": {"env": {"type": "array", "x-kubernetes-patch-strategy": "replace", "items": {"type": "object"}}}}
}}`

// twoContainers is a Deployment of two containers, and a strategic merge
// patch that adds an env variable to the first.
const twoContainers = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: app:1
        env: [{name: A, value: "1"}]
      - name: sidecar
        image: side:1
`

const addEnv = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: app
        env: [{name: C, value: "3"}]
`

// containersOf lists a Deployment's containers as name, image and env
// names.
func containersOf(t *testing.T, obj *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		c := c.(map[string]any)
		s := c["name"].(string) + " " + stringOf(c["image"])
		env, _ := c["env"].([]any)
		for _, e := range env {
			s += " " + e.(map[string]any)["name"].(string)
		}
		out = append(out, s)
	}
	return out
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// A kustomization's openapi field would set the schema kustomize merges
// every later build's patches with, in every add-on of the process: it is
// refused wherever the build reaches it, and a later build still merges.
func TestFolderRefusesOpenAPI(t *testing.T) {
	for _, tc := range []struct{ name, where, field string }{
		{name: "path in the folder", where: "apps/prod", field: "openapi:\n  path: schema.json\n"},
		{name: "path in a base", where: "apps/base", field: "openapi:\n  path: schema.json\n"},
		{name: "version", where: "apps/base", field: "openapi:\n  version: v1.20.4\n"},
		{name: "path in a component", where: "apps/comp", field: "openapi:\n  path: schema.json\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := repo()
			fsys["apps/comp/kustomization.yaml"] = file("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonAnnotations:\n  part: comp\n")
			fsys["apps/prod/kustomization.yaml"] = file(string(fsys["apps/prod/kustomization.yaml"].Data) + "components:\n  - ../comp\n")
			k := tc.where + "/kustomization.yaml"
			fsys[k] = file(string(fsys[k].Data) + tc.field)
			fsys[tc.where+"/schema.json"] = file(replacingSchema)
			_, err := Folder(fsys, "apps/prod", SourceIdentity{})
			if err == nil || !strings.Contains(err.Error(), k+" sets openapi") || !strings.Contains(err.Error(), "remove the openapi field") {
				t.Fatalf("error = %v, want %s's openapi field refused", err, k)
			}

			fsys = fstest.MapFS{
				"web/kustomization.yaml": file("resources: [deploy.yaml]\npatches: [{path: patch.yaml}]\n"),
				"web/deploy.yaml":        file(twoContainers),
				"web/patch.yaml":         file(addEnv),
			}
			res, err := Folder(fsys, "web", SourceIdentity{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := containersOf(t, res.Objects[0]), []string{"app app:1 C A", "sidecar side:1"}; !slices.Equal(got, want) {
				t.Errorf("a later build's containers = %q, want %q: its patch merged", got, want)
			}
		})
	}
}

// Should a build still change kyaml's schema (a way past the openapi
// refusal), the builds of other add-ons running at the same time must not
// see it, nor read kyaml's schema while it is put back: one build runs at
// a time, and each merges with the built-in schema. The build that names
// its own schema runs through runKustomize, as every build does.
func TestKustomizeBuildsRunOneAtATime(t *testing.T) {
	mem := filesys.MakeFsInMemory()
	for name, data := range map[string]string{
		"/own/kustomization.yaml": "openapi:\n  path: schema.json\nresources: [deploy.yaml]\npatches: [{path: patch.yaml}]\n",
		"/own/schema.json":        replacingSchema,
		"/own/deploy.yaml":        twoContainers,
		"/own/patch.yaml":         addEnv,
	} {
		if err := mem.WriteFile(name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	fsys := fstest.MapFS{
		"web/kustomization.yaml": file("resources: [deploy.yaml]\npatches: [{path: patch.yaml}]\n"),
		"web/deploy.yaml":        file(twoContainers),
		"web/patch.yaml":         file(addEnv),
	}
	const rounds = 40
	var wg sync.WaitGroup
	wg.Go(func() {
		for range rounds {
			if _, err := runKustomize(krusty.MakeDefaultOptions(), mem, "/own"); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for range rounds {
				res, err := Folder(fsys, "web", SourceIdentity{})
				if err != nil {
					t.Error(err)
					return
				}
				if got, want := containersOf(t, res.Objects[0]), []string{"app app:1 C A", "sidecar side:1"}; !slices.Equal(got, want) {
					t.Errorf("containers = %q, want %q: another build's schema was in place", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if v := openapi.GetSchemaVersion(); v != openapi.DefaultOpenAPI {
		t.Errorf("the schema left is %q", v)
	}
}

// A folder's label or annotation that is not a string is refused with
// the file, the object and the key, in plain YAML and after kustomize.
func TestFolderRefusesMetadataThatIsNotStrings(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dashboards\n"
	for _, tc := range []struct{ name, meta, kustomization, want string }{
		{name: "label", meta: "  labels: {app: x, enabled: true}\n", want: "cm.yaml document 1: ConfigMap dashboards: the label enabled is true or false, not a string: quote the value"},
		{name: "YAML 1.1 word", meta: "  annotations:\n    sidecar/enabled: on\n", want: "the annotation sidecar/enabled is true or false, not a string: quote the value " +
			"(in a folder without a kustomization, YAML 1.1 reads an unquoted yes, no, on, off, y or n as true or false too)"},
		{name: "annotation", meta: "  annotations: {prometheus.io/port: 8080}\n", want: "ConfigMap dashboards: the annotation prometheus.io/port is a number"},
		{name: "kustomized", meta: "  labels: {version: 1.16}\n", kustomization: "resources: [cm.yaml]\n", want: "kustomize build app: ConfigMap dashboards: the label version is a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"app/cm.yaml": file(cm + tc.meta)}
			if tc.kustomization != "" {
				fsys["app/kustomization.yaml"] = file(tc.kustomization)
			}
			if _, err := Folder(fsys, "app", SourceIdentity{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

// A plain folder that holds one object in two files is refused, naming
// both; two hooks of one name, for two phases, are not.
func TestFolderRefusesAnObjectWrittenTwice(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
	const hook = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations: {argocd.argoproj.io/hook: %s}\nspec: {template: {spec: {containers: [{name: m, image: m}]}}}\n"
	fsys := fstest.MapFS{
		"app/a.yaml":     file(cm),
		"app/sub/b.yaml": file("apiVersion: v1\nkind: Secret\nmetadata:\n  name: settings\n---\n" + cm + "  namespace: apps\n"),
	}
	_, err := FolderWith(fsys, "app", SourceIdentity{}, FolderInputs{Namespace: "apps"})
	want := "ConfigMap apps/settings is written twice, in app/a.yaml (document 1) and in app/sub/b.yaml (document 2)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want %q", err, want)
	}

	fsys = fstest.MapFS{
		"app/a.yaml":    file(cm),
		"app/pre.yaml":  file(strings.Replace(hook, "%s", "PreSync", 1)),
		"app/post.yaml": file(strings.Replace(hook, "%s", "PostSync", 1)),
	}
	res, err := FolderWith(fsys, "app", SourceIdentity{}, FolderInputs{Namespace: "apps"})
	if err != nil || len(res.Hooks) != 2 {
		t.Fatalf("two hooks of one name: %v, %v", res, err)
	}
}

// An overlay that reads files outside its own folder, a patch and a
// generator's file in sibling folders, renders, as Flux builds it. The
// in-memory copy holds the repository alone, so a path that climbs above
// its root finds nothing.
func TestFolderKustomizeReadsFilesOutsideItsFolder(t *testing.T) {
	fsys := repo()
	fsys["apps/common/replicas.yaml"] = file("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: demo\nspec:\n  replicas: 5\n")
	fsys["apps/shared/app.conf"] = file("level=debug\n")
	fsys["apps/prod/kustomization.yaml"] = file(`
resources:
  - ../base
patches:
  - path: ../common/replicas.yaml
configMapGenerator:
  - name: conf
    files:
      - ../shared/app.conf
`)
	res, err := Folder(fsys, "apps/prod", SourceIdentity{})
	if err != nil {
		t.Fatal(err)
	}
	var replicas int64
	conf := ""
	for _, o := range res.Objects {
		switch o.GetKind() {
		case "Deployment":
			replicas, _, _ = unstructured.NestedInt64(o.Object, "spec", "replicas")
		case "ConfigMap":
			conf, _, _ = unstructured.NestedString(o.Object, "data", "app.conf")
		}
	}
	if replicas != 5 || conf != "level=debug\n" {
		t.Errorf("replicas %d, app.conf %q: want the patch and the file of the sibling folders", replicas, conf)
	}

	fsys["apps/prod/kustomization.yaml"] = file("resources:\n  - ../base\npatches:\n  - path: ../../../../etc/passwd\n")
	if _, err := Folder(fsys, "apps/prod", SourceIdentity{}); err == nil {
		t.Error("a patch above the repository's root was read")
	}
}
