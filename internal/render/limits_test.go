package render

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// BenchmarkRender10000Objects renders a chart of 10,000 ConfigMaps, the
// size an add-on is refused at (the controller's limit is 5,000), and
// reports the time and the memory one render takes: what a chart gone
// wrong costs before the limit stops it.
func BenchmarkRender10000Objects(b *testing.B) {
	ch := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "many", Version: "1.0.0"},
		Templates: []*common.File{{Name: "templates/many.yaml", Data: []byte(`{{- range $i := until 10000 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: many-{{ $i }}
data:
  index: "{{ $i }}"
{{- end }}
`)}},
	}
	opts := Options{ReleaseName: "many", Namespace: "many", Capabilities: testCaps}
	// NOTE: B/op is what one render allocates in all, an upper bound of
	// its share of the peak heap.
	b.ReportAllocs()
	for range b.N {
		res, err := Helm(context.Background(), ch, nil, opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Objects) != 10000 || !strings.HasPrefix(res.Objects[0].GetName(), "many-") {
			b.Fatalf("rendered %d objects", len(res.Objects))
		}
	}
}

// manyChart is a chart of a few bytes that renders n tiny ConfigMaps.
func manyChart(n int) *chartv2.Chart {
	return &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "many", Version: "1.0.0"},
		Templates: []*common.File{{Name: "templates/many.yaml", Data: []byte(`{{- range $i := until ` + strconv.Itoa(n) + ` }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c{{ $i }}}
{{- end }}
`)}},
	}
}

// TestRenderCountsObjectsBeforeDecoding renders a chart of a few bytes
// that loops out 100,000 tiny ConfigMaps, with a bound of 5,000 objects:
// its documents are counted before any is decoded, so the render fails
// with the bound, and decoding them (which cost the controller far more
// than the worker's render) never happens. What the render allocates
// besides executing the templates stays small.
func TestRenderCountsObjectsBeforeDecoding(t *testing.T) {
	ch := manyChart(100000)
	opts := Options{ReleaseName: "many", Namespace: "many", Capabilities: testCaps}
	out, err := executeTemplates(context.Background(), ch, map[string]any{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxObjects = 5000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	began := time.Now()
	_, err = decodeOutput(out, ch.Name(), opts)
	took := time.Since(began)
	runtime.ReadMemStats(&after)
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != "objects" || le.Objects != 5000 {
		t.Fatalf("error = %v, want a *LimitError of the bound objects", err)
	}
	for _, want := range []string{"chart many renders more than 5000 objects", "--max-objects-per-addon"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to say %q", err, want)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("refusing the output allocated %d MiB in %s: it was decoded", alloc>>20, took)
	}
	t.Logf("refused in %s", took)

	// Through Helm, the same.
	if _, err := Helm(context.Background(), manyChart(5001), nil, opts); !errors.As(err, &le) || le.Bound != "objects" {
		t.Errorf("5,001 objects: error = %v, want the bound", err)
	}
	if res, err := Helm(context.Background(), manyChart(5000), nil, opts); err != nil || len(res.Objects) != 5000 {
		t.Errorf("5,000 objects: error = %v, want them rendered", err)
	}
}

// TestFolderCountsObjectsAsItReads: a plain folder's documents, a List's
// items each, and a kustomization's objects are counted against
// MaxObjects.
func TestFolderCountsObjectsAsItReads(t *testing.T) {
	var many strings.Builder
	for i := range 6 {
		fmt.Fprintf(&many, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\n", i)
	}
	list := "apiVersion: v1\nkind: List\nitems:\n"
	for i := range 6 {
		list += fmt.Sprintf("- {apiVersion: v1, kind: ConfigMap, metadata: {name: c%d}}\n", i)
	}
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
	}{
		{name: "documents", fsys: fstest.MapFS{"app/a.yaml": {Data: []byte(many.String())}}},
		{name: "a List", fsys: fstest.MapFS{"app/a.yaml": {Data: []byte(list)}}},
		{name: "kustomized", fsys: fstest.MapFS{"app/a.yaml": {Data: []byte(many.String())}, "app/kustomization.yaml": {Data: []byte("resources: [a.yaml]\n")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FolderWith(tc.fsys, "app", SourceIdentity{}, FolderInputs{MaxObjects: 6}); err != nil {
				t.Fatalf("six objects, a bound of six: %v", err)
			}
			_, err := FolderWith(tc.fsys, "app", SourceIdentity{}, FolderInputs{MaxObjects: 5})
			if err == nil || !strings.Contains(err.Error(), "folder app holds more than 5 objects") || !strings.Contains(err.Error(), "--max-objects-per-addon") {
				t.Errorf("error = %v, want the bound", err)
			}
		})
	}
}

// TestFolderBoundsPatchApplications builds a folder of 2,000 ConfigMaps
// and 100 patches that each select them all: kustomize would apply
// 200,000 patches, one at a time, for a minute or more of the
// controller's CPU.
// The build is refused before kustomize runs, naming the bound.
func TestFolderBoundsPatchApplications(t *testing.T) {
	var objs, k strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&objs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\n", i)
	}
	k.WriteString("resources: [base]\npatches:\n")
	for i := range 100 {
		fmt.Fprintf(&k, "- target: {kind: ConfigMap}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {\"k%d\": \"v\"}}]'\n", i)
	}
	fsys := fstest.MapFS{
		"app/base/kustomization.yaml": {Data: []byte("resources: [cms.yaml]\n")},
		"app/base/cms.yaml":           {Data: []byte(objs.String())},
		"app/kustomization.yaml":      {Data: []byte(k.String())},
	}
	began := time.Now()
	_, err := Folder(fsys, "app", SourceIdentity{})
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "could select more than the 100000 patch applications") || !strings.Contains(err.Error(), "at patch 51") {
		t.Fatalf("error = %v after %s, want the bound on patch applications", err, took)
	}
	if took > 2*time.Second {
		t.Errorf("refused after %s: kustomize ran", took)
	}

	// Two such patches are within the bound.
	fsys["app/kustomization.yaml"] = &fstest.MapFile{Data: []byte(strings.Join(strings.SplitAfter(k.String(), "\n")[:2+2*2], ""))}
	if _, err := Folder(fsys, "app", SourceIdentity{}); err != nil {
		t.Errorf("2,000 objects and 2 patches: %v", err)
	}
}

// TestFolderPatchBoundCountsWhatEachTargetSelects builds a Flux-style
// cluster folder over 30 apps of 40 ConfigMaps each, every app with 4
// patches aimed at one named ConfigMap: kustomize applies an app's patches
// to that app's objects alone, and a named target selects one, so the
// build asks for 120 patch applications, not 120 times 1,200. A target
// that names an object by the name it gets from a namePrefix, and one
// a component holds, still count every object they could select.
func TestFolderPatchBoundCountsWhatEachTargetSelects(t *testing.T) {
	fsys := fstest.MapFS{}
	var apps []string
	for a := range 30 {
		dir := fmt.Sprintf("apps/a%d", a)
		apps = append(apps, "../../"+dir)
		var docs []string
		for i := range 40 {
			docs = append(docs, fmt.Sprintf("# header\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {app: a}\n  name: a%d-c%d\n", a, i))
		}
		fsys[dir+"/cms.yaml"] = &fstest.MapFile{Data: []byte(strings.Join(docs, "---\n"))}
		var patches []string
		for p := range 4 {
			patches = append(patches, fmt.Sprintf("- target:\n    kind: ConfigMap\n    name: a%d-c%d\n  patch: |\n    - op: add\n      path: /data\n      value: {k: v}\n", a, p))
		}
		fsys[dir+"/kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources:\n- cms.yaml\npatches:\n" + strings.Join(patches, ""))}
	}
	fsys["clusters/prod/kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources:\n- " + strings.Join(apps, "\n- ") + "\n")}
	res, err := Folder(fsys, "clusters/prod", SourceIdentity{})
	if err != nil || len(res.Objects) != 1200 {
		t.Fatalf("30 apps of 40 objects and 4 named patches each: %v", err)
	}

	scan := func(dir string) int {
		s := newPatchScan(fsysOf(t, fsys))
		s.walk("/"+dir, false)
		return s.applications
	}
	if n := scan("clusters/prod"); n != 120 {
		t.Errorf("counted %d applications for the cluster folder, want 120", n)
	}
	// A name a prefix made: each of the 40 objects could be a0-c1 once
	// prefixed, as far as a name read from a file tells.
	fsys["prefixed/kustomization.yaml"] = &fstest.MapFile{Data: []byte("namePrefix: p-\nresources: [../apps/a0/cms.yaml]\n" +
		"patches:\n- target: {kind: ConfigMap, name: p-a0-c1}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {}}]'\n" +
		"- target: {kind: Secret}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {}}]'\n" +
		"- target: {labelSelector: app=a}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {}}]'\n")}
	if n := scan("prefixed"); n != 1+0+40 {
		t.Errorf("counted %d applications with a prefix, want 41", n)
	}
	// A component's patches apply to the objects of the kustomization
	// that lists it.
	fsys["comp/kustomization.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
		"patches:\n- target: {kind: ConfigMap, name: a1-.*}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {}}]'\n")}
	fsys["withcomp/kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources: [../apps/a1]\ncomponents: [../comp]\n")}
	if n := scan("withcomp"); n != 4+40 {
		t.Errorf("counted %d applications with a component, want 44", n)
	}
}

// TestFolderPatchBoundCountsABaseEachTimeItIsBuilt lists one base of 2,000
// ConfigMaps from two overlays, each with its own namePrefix and patches
// that select all of it: kustomize builds the base once for each overlay
// and applies each overlay's patches to its copy, so two overlays of 20
// patches ask as much as one of 40, and two of 50 are refused like one of
// 100. A component two overlays list counts for each of them too.
func TestFolderPatchBoundCountsABaseEachTimeItIsBuilt(t *testing.T) {
	var objs strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&objs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\n", i)
	}
	overlay := func(prefix string, patches int, more string) []byte {
		var k strings.Builder
		fmt.Fprintf(&k, "namePrefix: %s-\nresources: [../base]\n%spatches:\n", prefix, more)
		for i := range patches {
			fmt.Fprintf(&k, "- target: {kind: ConfigMap}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {\"k%d\": \"v\"}}]'\n", i)
		}
		return []byte(k.String())
	}
	tree := func(patches int, more string) fstest.MapFS {
		return fstest.MapFS{
			"base/kustomization.yaml": {Data: []byte("resources: [cms.yaml]\n")},
			"base/cms.yaml":           {Data: []byte(objs.String())},
			"comp/kustomization.yaml": {Data: []byte("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
				"patches:\n- target: {kind: ConfigMap}\n  patch: '[{\"op\": \"add\", \"path\": \"/data\", \"value\": {}}]'\n")},
			"a/kustomization.yaml":    {Data: overlay("a", patches, more)},
			"b/kustomization.yaml":    {Data: overlay("b", patches, more)},
			"one/kustomization.yaml":  {Data: overlay("one", 2*patches, "")},
			"root/kustomization.yaml": {Data: []byte("resources: [../a, ../b]\n")},
		}
	}
	scan := func(fsys fstest.MapFS, dir string) int {
		s := newPatchScan(fsysOf(t, fsys))
		s.walk("/"+dir, false)
		return s.applications
	}
	fsys := tree(20, "")
	if two, one := scan(fsys, "root"), scan(fsys, "one"); two != 80_000 || one != 80_000 {
		t.Errorf("counted %d applications for two overlays of 20 patches, %d for one of 40, want 80000 both", two, one)
	}
	fsys = tree(20, "components: [../comp]\n")
	if n := scan(fsys, "root"); n != 84_000 {
		t.Errorf("counted %d applications with a component in both overlays, want 84000", n)
	}
	for _, dir := range []string{"root", "one"} {
		_, err := Folder(tree(50, ""), dir, SourceIdentity{})
		if err == nil || !strings.Contains(err.Error(), "more than the 100000 patch applications") {
			t.Errorf("%s with 100 patches over 2,000 objects in all: error = %v, want the bound on patch applications", dir, err)
		}
	}
}

// TestFolderPatchBoundStopsOnceItIsPassed scans 20,000 patches that
// each select all of 20,000 ConfigMaps, a few MB of files: counting every
// pair is 400 million matches, so the scan stops at the patch that
// passes the bound.
func TestFolderPatchBoundStopsOnceItIsPassed(t *testing.T) {
	var objs, k strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&objs, "---\nkind: ConfigMap\nmetadata: {name: c%d}\n", i)
	}
	k.WriteString("resources: [cms.yaml]\npatches:\n")
	for range 20_000 {
		k.WriteString("- {target: {kind: ConfigMap}, patch: x}\n")
	}
	fsys := filesys.MakeFsInMemory()
	if err := fsys.WriteFile("/app/cms.yaml", []byte(objs.String())); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("/app/kustomization.yaml", []byte(k.String())); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err := refusePatchCost(fsys, "/app", "app")
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "at patch 6)") {
		t.Fatalf("error = %v, want the bound passed at patch 6", err)
	}
	if took > 3*time.Second {
		t.Errorf("the scan took %s, want it to stop once the bound is passed", took)
	}
}

// TestFolderPatchScanBoundsTheObjectsItGathers lists one ConfigMap as a
// base from two overlays at each of 22 levels: kustomize would build 4
// million objects at the top, and the scan, which counts a base once per
// kustomization that lists it, would hold them all. It is refused once
// the scan has gathered a million.
func TestFolderPatchScanBoundsTheObjectsItGathers(t *testing.T) {
	fsys := filesys.MakeFsInMemory()
	write := func(name, data string) {
		if err := fsys.WriteFile(name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	write("/l0/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
	write("/l0/kustomization.yaml", "resources: [cm.yaml]\n")
	for i := 1; i <= 22; i++ {
		for _, side := range []string{"a", "b"} {
			write(fmt.Sprintf("/l%d%s/kustomization.yaml", i, side), fmt.Sprintf("namePrefix: %s-\nresources: [../l%d]\n", side, i-1))
		}
		write(fmt.Sprintf("/l%d/kustomization.yaml", i), fmt.Sprintf("resources: [../l%da, ../l%db]\n", i, i))
	}
	err := refusePatchCost(fsys, "/l22", "l22")
	if err == nil || !strings.Contains(err.Error(), "gather more than 1000000 objects") {
		t.Fatalf("error = %v, want the bound on gathered objects", err)
	}
}

// fsysOf copies a test's folder into kustomize's in-memory filesystem.
func fsysOf(t *testing.T, fsys fstest.MapFS) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	for name, f := range fsys {
		if err := mem.WriteFile("/"+name, f.Data); err != nil {
			t.Fatal(err)
		}
	}
	return mem
}

// TestPostRenderBoundsPatchApplications patches 3,200 objects with 32
// patches that each select them all, the most spec.patches may hold:
// kustomize would apply 102,400 patches, one at a time (5,000 objects and
// 32 such patches took over a minute on a loaded machine). It is refused
// once the targets are selected, before any patch is applied.
func TestPostRenderBoundsPatchApplications(t *testing.T) {
	res := &Result{}
	for i := range 3200 {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetName("c" + strconv.Itoa(i))
		res.Objects = append(res.Objects, o)
	}
	p := &PostRender{}
	for i := range 32 {
		p.Patches = append(p.Patches, types.Patch{Patch: `[{"op": "add", "path": "/data", "value": {"k` + strconv.Itoa(i) + `": "v"}}]`, Target: &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Kind: "ConfigMap"}}}})
	}
	began := time.Now()
	err := p.apply(res, nil)
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "select 102400 objects in all, more than the 100000") {
		t.Fatalf("error = %v after %s, want the bound on patch applications", err, took)
	}
	t.Logf("refused in %s", took)
}

// TestCommentDocumentsAreNotCounted renders three objects, each in a file
// or template that opens with a license header and "---", with a bound of
// three objects: a document of comments alone is no object, and counted
// as one before decoding it would stop a folder or chart of half the
// bound.
func TestCommentDocumentsAreNotCounted(t *testing.T) {
	fsys := fstest.MapFS{}
	tpl := map[string]string{}
	for i := range 3 {
		obj := fmt.Sprintf("# Copyright 2024 Example\n  # SPDX-License-Identifier: Apache-2.0\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n", i)
		fsys[fmt.Sprintf("app/f%d.yaml", i)] = &fstest.MapFile{Data: []byte(obj)}
		tpl[fmt.Sprintf("c%d.yaml", i)] = obj
	}
	res, err := FolderWith(fsys, "app", SourceIdentity{}, FolderInputs{MaxObjects: 3})
	if err != nil || len(res.Objects) != 3 {
		t.Errorf("a folder of 3 objects with headers, bound 3: %v", err)
	}
	res, err = Helm(context.Background(), chartOf("c", tpl), nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps, MaxObjects: 3})
	if err != nil || len(res.Objects) != 3 {
		t.Errorf("a chart of 3 objects with headers, bound 3: %v", err)
	}
	fsys["app/f3.yaml"] = &fstest.MapFile{Data: []byte("# a header\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c3\n")}
	if _, err := FolderWith(fsys, "app", SourceIdentity{}, FolderInputs{MaxObjects: 3}); err == nil || !strings.Contains(err.Error(), "holds more than 3 objects") {
		t.Errorf("a folder of 4 objects, bound 3: %v, want it refused", err)
	}
}

// TestFileObjectsReadsKindAndName reads what the patch bound needs of a
// resource file with a line scan; what it cannot read is an object any
// target may select.
func TestFileObjectsReadsKindAndName(t *testing.T) {
	data := "# header\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels:\n    name: not-this\n  name: \"web\"\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'cm', namespace: x}\n---\n{\"apiVersion\": \"v1\", \"kind\": \"Secret\"}\n"
	got := fileObjects([]byte(data))
	want := []fileObject{{"apps/v1", "Deployment", "web"}, {"v1", "ConfigMap", "cm"}, {}}
	if !slices.Equal(got, want) {
		t.Fatalf("fileObjects = %+v, want %+v", got, want)
	}
	// A comment after a value is no part of it; a tag, an anchor, a
	// quote that does not close or a SOPS value leave it unknown, which
	// any target may select.
	data = "apiVersion: v1 # core\nkind: ConfigMap  # generated\nmetadata:\n  name: web\t# x\n---\n" +
		"apiVersion: v1\nkind: 'ConfigMap' # quoted\nmetadata:\n  name: \"a # b\"\n---\n" +
		"apiVersion: v1\nkind: !!str ConfigMap\nmetadata:\n  name: &n web\n---\n" +
		"apiVersion: v1\nkind: \"ConfigMap\nmetadata:\n  name: 'it''s'\n---\n" +
		"apiVersion: ENC[AES256_GCM,data:Tg==,type:str]\nkind: ENC[AES256_GCM,data:Tw==,type:str]\nmetadata:\n  name: ENC[AES256_GCM,data:dw==,type:str]\n"
	odd := fileObjects([]byte(data))
	want = []fileObject{{"v1", "ConfigMap", "web"}, {"v1", "ConfigMap", "a # b"}, {"v1", "", ""}, {"v1", "", ""}, {}}
	if !slices.Equal(odd, want) {
		t.Fatalf("fileObjects = %+v, want %+v", odd, want)
	}
	cm := &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Kind: "ConfigMap"}, Name: "web"}}
	if n := selectable(cm, odd, maxPatchApplications); n != 4 {
		t.Errorf("a ConfigMap named web may select %d, want 4 (all but a # b)", n)
	}
	web := &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Group: "apps", Kind: "Deployment"}, Name: "prod-web-1"}}
	if n := selectable(web, got, maxPatchApplications); n != 2 {
		t.Errorf("a Deployment named prod-web-1 may select %d, want 2 (web, prefixed and suffixed, and the unread one)", n)
	}
	if n := selectable(&types.Selector{ResId: resid.ResId{Name: "w.b"}}, got, maxPatchApplications); n != 2 {
		t.Errorf("any kind named w.b may select %d, want 2", n)
	}
}
