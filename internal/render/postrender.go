package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// MaxPatchBytes bounds all of an add-on's patches together.
const MaxPatchBytes = 64 << 10

// PostRender is what an add-on changes in its render after the chart or
// the folder wrote it: kustomize patches, in order, then image
// replacements. Objects and hooks go through it as two streams, as Helm's
// post-renderers take them, so an object and a hook may share a name.
type PostRender struct {
	Patches []types.Patch
	Images  []types.Image
}

// PostRenderFor is what an Addon's spec.patches and spec.images ask for,
// or nil when it asks for nothing.
func PostRenderFor(spec *capstanv1.AddonSpec) *PostRender {
	if len(spec.Patches) == 0 && len(spec.Images) == 0 {
		return nil
	}
	p := &PostRender{}
	for _, pt := range spec.Patches {
		patch := types.Patch{Patch: pt.Patch}
		if t := pt.Target; t != nil {
			patch.Target = &types.Selector{AnnotationSelector: t.AnnotationSelector, LabelSelector: t.LabelSelector}
			patch.Target.Group, patch.Target.Version, patch.Target.Kind = t.Group, t.Version, t.Kind
			patch.Target.Name, patch.Target.Namespace = t.Name, t.Namespace
		}
		p.Patches = append(p.Patches, patch)
	}
	for _, img := range spec.Images {
		p.Images = append(p.Images, types.Image{Name: img.Name, NewName: img.NewName, NewTag: img.NewTag, Digest: img.Digest})
	}
	return p
}

// Empty reports whether it changes nothing.
func (p *PostRender) Empty() bool {
	return p == nil || len(p.Patches) == 0 && len(p.Images) == 0
}

// The marks Capstan puts on objects while they go through kustomize, and
// takes off after: which object of which stream each one was (so that a
// hook's template, and the render's order, come back with it), and which
// objects a patch without a target names.
const (
	markObject = "capstan.dev/post-render-object"
	markTarget = "capstan.dev/post-render-target"
)

// postRenderBudget bounds the bytes kustomize reads in one post-render.
// kustomize reads a few MiB a second, so it keeps a large render from
// holding the controller for minutes at each sync.
const postRenderBudget = 64 << 20

// Check refuses what kustomize would take but Capstan does not: patches
// over the size bound, a patch read from a path, and each patch CheckPatch
// refuses.
func (p *PostRender) Check() error {
	if p.Empty() {
		return nil
	}
	size := 0
	for i, pt := range p.Patches {
		size += len(pt.Patch)
		if pt.Path != "" {
			return fmt.Errorf("spec.patches[%d]: a patch is written inline, not read from a path", i)
		}
		if err := CheckPatch(pt.Patch, pt.Target != nil); err != nil {
			return fmt.Errorf("spec.patches[%d]: %w", i, err)
		}
	}
	if size > MaxPatchBytes {
		return fmt.Errorf("spec.patches are %d bytes together, more than %d: move large changes into the chart's values or the source", size, MaxPatchBytes)
	}
	return nil
}

// CheckPatch refuses a patch that is neither YAML nor JSON, that is
// neither a partial object nor a list of operations, and the JSON 6902
// copy operation, which can double an object with each use and so grow a
// render without bound. A patch may hold several strategic merge patches
// separated by "---", as kustomize takes them, each checked; targeted
// says the patch has a target, which kustomize refuses for several.
func CheckPatch(patch string, targeted bool) error {
	// NOTE: before anything unmarshals it: a few KiB of anchors and
	// aliases expand to gigabytes. Every document is read, not only the
	// first, which is all a plain unmarshal reads.
	docs, err := patchDocuments(patch)
	if err != nil {
		return fmt.Errorf("the patch is neither YAML nor JSON: %v", err)
	}
	for j, d := range docs {
		if hasAlias(d.node) {
			where := "the patch uses"
			if len(docs) > 1 {
				where = fmt.Sprintf("document %d of the patch uses", j+1)
			}
			return errors.New(where + " YAML anchors or aliases, which Capstan refuses because a few of them can expand to gigabytes: write it out in full")
		}
	}
	if len(docs) <= 1 {
		return checkPatchDocument(patch)
	}
	for j, d := range docs {
		if d.node.Content[0].Kind != yamlv3.MappingNode {
			return fmt.Errorf("the patch holds %d documents, and document %d is not a partial object: several documents in one patch are strategic merge patches, each naming its object; write a JSON 6902 patch in an entry of its own", len(docs), j+1)
		}
		if err := checkPatchDocument(d.text); err != nil {
			return fmt.Errorf("document %d: %w", j+1, err)
		}
	}
	if targeted {
		return fmt.Errorf("the patch holds %d strategic merge patches and a target, which kustomize refuses: several in one entry each apply to the object they name; drop the target, or write one entry per document", len(docs))
	}
	return nil
}

// checkPatchDocument checks one document of a patch, with no alias in it.
func checkPatchDocument(patch string) error {
	var doc any
	if err := yaml.Unmarshal([]byte(patch), &doc); err != nil {
		return fmt.Errorf("the patch is neither YAML nor JSON: %v", err)
	}
	switch d := doc.(type) {
	case []any:
		for j, op := range d {
			m, ok := op.(map[string]any)
			if !ok {
				return fmt.Errorf("operation %d of the JSON 6902 patch is not an object with op and path", j)
			}
			if m["op"] == "copy" {
				return fmt.Errorf("operation %d is a JSON 6902 copy, which Capstan refuses because each can double an object: write the value with add", j)
			}
		}
	case map[string]any:
	default:
		return errors.New("the patch is neither a partial object (a strategic merge patch) nor a list of operations (a JSON 6902 patch)")
	}
	return nil
}

// patchDocument is one YAML document of a patch: its node, and its text.
type patchDocument struct {
	node *yamlv3.Node
	text string
}

// patchDocuments reads every document of a patch, as kustomize does: one
// entry may hold several strategic merge patches, separated by "---".
// Empty documents are left out. The text of a patch of one document is
// the patch as it is written; each of several is written out again on
// its own, its folded blocks as literal ones (literalBlocks), which hold
// the same text.
func patchDocuments(patch string) ([]patchDocument, error) {
	dec := yamlv3.NewDecoder(strings.NewReader(patch))
	var docs []patchDocument
	for {
		node := &yamlv3.Node{}
		err := dec.Decode(node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(node.Content) == 0 || node.Content[0].Kind == yamlv3.ScalarNode && node.Content[0].Tag == "!!null" {
			continue
		}
		docs = append(docs, patchDocument{node: node})
	}
	if len(docs) == 1 {
		docs[0].text = patch
		return docs, nil
	}
	for i := range docs {
		literalBlocks(docs[i].node)
		data, err := yamlv3.Marshal(docs[i].node)
		if err != nil {
			return nil, err
		}
		docs[i].text = string(data)
	}
	return docs, nil
}

// hasAlias reports whether a YAML document has an anchor or an alias.
func hasAlias(n *yamlv3.Node) bool {
	if n.Kind == yamlv3.AliasNode || n.Anchor != "" {
		return true
	}
	return slices.ContainsFunc(n.Content, hasAlias)
}

// hash folds the post-render into a render hash, so that a change of a
// patch or an image is a new render, applied as an upgrade. A render with
// none keeps its hash as it was.
func (p *PostRender) hash(render string) (string, error) {
	if p.Empty() {
		return render, nil
	}
	doc, err := json.Marshal(struct {
		Render  string        `json:"render"`
		Patches []types.Patch `json:"patches,omitempty"`
		Images  []types.Image `json:"images,omitempty"`
	}{render, p.Patches, p.Images})
	if err != nil {
		return "", fmt.Errorf("render: hash the patches: %w", err)
	}
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// applyAll runs the patches, then the images, over res's objects and
// hooks, a chart's tests among the hooks. A patch written for what the
// sync applies may not fit a test: when the post-render fails and the
// render has tests, it runs again without them, and when that passes the
// tests are left out (Result.TestsLeftOut, and a notice) rather than the
// render failed.
func (p *PostRender) applyAll(res *Result, mask func(string) string) error {
	notices := slices.Clone(res.Notices)
	err := p.apply(res, mask)
	if err == nil || !slices.ContainsFunc(res.Hooks, Hook.TestOnly) {
		return err
	}
	// NOTE: a failed apply changed nothing of res but its notices.
	without := *res
	without.Notices = notices
	without.Hooks = slices.DeleteFunc(slices.Clone(res.Hooks), Hook.TestOnly)
	if p.apply(&without, mask) != nil {
		return err
	}
	*res = without
	res.TestsLeftOut = "the patches or images do not fit the chart's tests, which are left out: " + err.Error()
	res.Notices = append(res.Notices, Notice{Path: "spec.patches", Message: res.TestsLeftOut})
	return nil
}

// apply runs the patches, then the images, over res's objects and hooks.
// mask, when set, hides values in kustomize's messages, which may quote
// an object. An object without a name (a hook with generateName) passes
// through untouched: kustomize cannot take it.
func (p *PostRender) apply(res *Result, mask func(string) string) error {
	if p.Empty() {
		return nil
	}
	if err := p.Check(); err != nil {
		return err
	}
	hookObjects := make([]*unstructured.Unstructured, len(res.Hooks))
	for i, h := range res.Hooks {
		hookObjects[i] = h.Object
	}
	// NOTE: the marks are annotations: read as unstructured reads them,
	// an object with one annotation that is not a string has none, and
	// would come back with only the marks.
	for _, obj := range slices.Concat(res.Objects, hookObjects) {
		if err := CheckMetadata(obj); err != nil {
			// NOTE: the render made it so, before any patch ran.
			return fmt.Errorf("render, before spec.patches: %w", err)
		}
	}
	objects, nameless := markStream(res.Objects, "o")
	hooks, namelessHooks := markStream(hookObjects, "h")
	// NOTE: kustomize reads each stream twice: once as it is, to find
	// what each target selects, then once with every patch and image.
	if size := streamSize(objects) + streamSize(hooks); 2*size > postRenderBudget {
		return fmt.Errorf("spec.patches: the render is %d MiB, and patching it would have kustomize read %d MiB, more than %d MiB: change the chart's values instead, or split the add-on",
			size>>20, 2*size>>20, postRenderBudget>>20)
	}
	// patches are what kustomize runs; origin[k] is the entry of
	// spec.patches that patches[k] comes from, and marks the annotations
	// that stand for the targets Capstan gave.
	var patches []types.Patch
	var origin []int
	var marks []string
	for i, pt := range p.Patches {
		if pt.Target != nil {
			patches, origin = append(patches, pt), append(origin, i)
			continue
		}
		// NOTE: kustomize takes a strategic merge patch's target from
		// the object it names, and fails in a stream without that
		// object, and reads a core apiVersion as any group. The objects
		// it names exactly are marked, and the mark is the target. An
		// entry of several documents is several patches, as kustomize
		// reads it, each with the target of its own object: kustomize
		// refuses a target on an entry of several.
		docs, err := patchDocuments(pt.Patch)
		if err != nil {
			return fmt.Errorf("spec.patches[%d]: the patch is neither YAML nor JSON: %v", i, err)
		}
		for j, doc := range docs {
			where, mark := fmt.Sprintf("spec.patches[%d]", i), markTarget+"-"+strconv.Itoa(i)
			if len(docs) > 1 {
				where, mark = fmt.Sprintf("spec.patches[%d] (document %d)", i, j+1), mark+"-"+strconv.Itoa(j+1)
			}
			target, err := namedTarget(doc.text)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			targeted := false
			for _, obj := range slices.Concat(objects, hooks) {
				if target.selects(obj) {
					setAnnotation(obj, mark, "yes")
					targeted = true
				}
			}
			if !targeted {
				return fmt.Errorf("%s names %s, which the render does not have: check its apiVersion, kind, name and namespace, or give it a target", where, target)
			}
			patches = append(patches, types.Patch{Patch: doc.text, Target: &types.Selector{AnnotationSelector: mark + "=yes"}, Options: pt.Options})
			origin, marks = append(origin, i), append(marks, mark)
		}
	}
	notices, applications, err := selectsNothing(p.Patches, objects, hooks)
	if err != nil {
		return fmt.Errorf("spec.patches: %s", oneLine(err.Error(), mask))
	}
	if applications > maxPatchApplications {
		// NOTE: kustomize applies each patch to each object it selects,
		// one at a time; selecting them is cheap, applying them is not.
		return fmt.Errorf("spec.patches: the patches with a target select %d objects in all, more than the %d patch applications a render may ask for, "+
			"as kustomize applies each patch to each object it selects: narrow the targets, merge patches into fewer, or change the chart's values instead",
			applications, maxPatchApplications)
	}
	res.Notices = append(res.Notices, notices...)
	if unused := unusedImages(p.Images, slices.Concat(objects, hooks)); len(unused) > 0 {
		res.Notices = append(res.Notices, Notice{Path: "spec.images",
			Message: "no container of the render runs " + strings.Join(unused, ", ") + ": each name is the image as the render writes it, without its tag"})
	}
	grow, growImage := 0, 0
	for _, pt := range patches {
		grow += len(pt.Patch)
	}
	for _, img := range p.Images {
		// NOTE: each entry may rewrite an image an entry before it wrote.
		growImage += len(img.NewName) + len(img.NewTag) + len(img.Digest) + 2
	}
	all := types.Kustomization{Patches: patches, Images: p.Images}
	for _, stream := range []*[]*unstructured.Unstructured{&objects, &hooks} {
		var out []*unstructured.Unstructured
		for _, layer := range layers(*stream) {
			patched, err := kustomizeObjects(layer, all, grow, growImage)
			if err != nil {
				return attribute(err, layer, patches, origin, p.Images, mask)
			}
			out = append(out, patched...)
		}
		*stream = out
	}
	for _, obj := range slices.Concat(objects, hooks) {
		if _, ok := obj.GetAnnotations()[markObject]; !ok {
			return fmt.Errorf("spec.patches removed the annotations of %s %s: patch the annotations they mean to, not all of them", obj.GetKind(), obj.GetName())
		}
		for _, mark := range marks {
			setAnnotation(obj, mark, "")
		}
	}
	outObjects, err := unmarkStream(objects, nameless, "o", len(res.Objects))
	if err != nil {
		return err
	}
	outHooks, err := unmarkStream(hooks, namelessHooks, "h", len(res.Hooks))
	if err != nil {
		return err
	}
	patchedObjects := make([]*unstructured.Unstructured, 0, len(outObjects))
	for _, o := range outObjects {
		if key := madeHook(o.obj, res.Objects[o.index], res.Folder); key != "" {
			return fmt.Errorf("spec.patches gave %s %s a %s annotation: the hooks are the render's to say; an object stays an object", o.obj.GetKind(), o.obj.GetName(), key)
		}
		patchedObjects = append(patchedObjects, o.obj)
	}
	patchedHooks := make([]Hook, 0, len(outHooks))
	for _, o := range outHooks {
		h, err := reparseHook(o.obj, res.Hooks[o.index])
		if err != nil {
			return err
		}
		patchedHooks = append(patchedHooks, h)
	}
	res.Objects, res.Hooks = patchedObjects, patchedHooks
	return nil
}

// selectsNothing finds the patches whose target selects no object of
// either stream, with kustomize's own selection.
func selectsNothing(patches []types.Patch, streams ...[]*unstructured.Unstructured) ([]Notice, int, error) {
	var maps []resmap.ResMap
	for _, objs := range streams {
		for _, layer := range layers(objs) {
			m, err := kustomizeResMap(layer, types.Kustomization{})
			if err != nil {
				return nil, 0, err
			}
			maps = append(maps, m)
		}
	}
	var notices []Notice
	applications := 0
	for i, pt := range patches {
		if pt.Target == nil {
			continue // it names its object, which was found
		}
		found := false
		for _, m := range maps {
			sel, err := m.Select(*pt.Target)
			if err != nil {
				return nil, 0, fmt.Errorf("spec.patches[%d].target: %w", i, err)
			}
			found = found || len(sel) > 0
			applications += len(sel)
		}
		if !found {
			notices = append(notices, Notice{Path: fmt.Sprintf("spec.patches[%d]", i),
				Message: "selects no object the render has: check its target's group, version, kind, name, namespace and selectors"})
		}
	}
	return notices, applications, nil
}

// unusedImages names the images of spec.images that no container runs.
func unusedImages(images []types.Image, objs []*unstructured.Unstructured) []string {
	var text []byte
	for _, obj := range objs {
		data, _ := obj.MarshalJSON()
		text = append(text, data...)
	}
	var unused []string
	for _, img := range images {
		quoted, _ := json.Marshal(img.Name)
		prefix := append([]byte(`"image":`), quoted[:len(quoted)-1]...)
		used := false
		for _, end := range []string{`"`, `:`, `@`} {
			used = used || bytes.Contains(text, append(slices.Clip(prefix), end...))
		}
		if !used {
			unused = append(unused, img.Name)
		}
	}
	return unused
}

// attribute finds which patch, or the images, a failed post-render
// failed on, by applying them one by one; origin[k] is the entry of
// spec.patches that patches[k] comes from.
func attribute(err error, objs []*unstructured.Unstructured, patches []types.Patch, origin []int, images []types.Image, mask func(string) string) error {
	for k, pt := range patches {
		out, perr := kustomizeObjects(objs, types.Kustomization{Patches: []types.Patch{pt}}, len(pt.Patch), 0)
		if perr != nil {
			return fmt.Errorf("spec.patches[%d]: %s", origin[k], oneLine(perr.Error(), mask))
		}
		objs = out
	}
	if len(images) > 0 {
		if _, ierr := kustomizeObjects(objs, types.Kustomization{Images: images}, 0, 0); ierr != nil {
			return fmt.Errorf("spec.images: %s", oneLine(ierr.Error(), mask))
		}
	}
	return fmt.Errorf("spec.patches: %s", oneLine(err.Error(), mask))
}

// layers splits a stream so that no part holds two objects kustomize
// would take for one (the same group, kind, name and namespace, with no
// namespace read as default): it refuses such a pair, and Helm renders
// them, as two hooks of one name for different events. Each object goes
// to the first part that does not hold its twin; a stream without twins
// is one part.
func layers(objs []*unstructured.Unstructured) [][]*unstructured.Unstructured {
	var parts [][]*unstructured.Unstructured
	var seen []map[string]bool
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		id := gvk.Group + "/" + gvk.Kind + "/" + ns + "/" + obj.GetName()
		i := 0
		for i < len(parts) && seen[i][id] {
			i++
		}
		if i == len(parts) {
			parts, seen = append(parts, nil), append(seen, map[string]bool{})
		}
		parts[i], seen[i][id] = append(parts[i], obj), true
	}
	return parts
}

// markStream copies the named objects of a stream, each marked with its
// place in it, for kustomize; the objects without a name stay apart, by
// their place.
func markStream(objs []*unstructured.Unstructured, prefix string) ([]*unstructured.Unstructured, map[int]*unstructured.Unstructured) {
	var named []*unstructured.Unstructured
	nameless := map[int]*unstructured.Unstructured{}
	for i, obj := range objs {
		if obj.GetName() == "" {
			nameless[i] = obj
			continue
		}
		obj = obj.DeepCopy()
		setAnnotation(obj, markObject, prefix+strconv.Itoa(i))
		named = append(named, obj)
	}
	return named, nameless
}

// placed is an object of a stream after the post-render, and its place
// in the render.
type placed struct {
	index int
	obj   *unstructured.Unstructured
}

// unmarkStream takes the marks off, refuses marks a patch changed, and
// puts the objects without a name back: all in the render's order, less
// what a patch deleted.
func unmarkStream(objs []*unstructured.Unstructured, nameless map[int]*unstructured.Unstructured, prefix string, n int) ([]placed, error) {
	byIndex := make([]*unstructured.Unstructured, n)
	for _, obj := range objs {
		mark := obj.GetAnnotations()[markObject]
		i, err := strconv.Atoi(strings.TrimPrefix(mark, prefix))
		if err != nil || !strings.HasPrefix(mark, prefix) || i < 0 || i >= n || byIndex[i] != nil || nameless[i] != nil {
			return nil, fmt.Errorf("spec.patches changed the annotation %s of %s %s, which Capstan sets while it patches: leave it alone", markObject, obj.GetKind(), obj.GetName())
		}
		setAnnotation(obj, markObject, "")
		byIndex[i] = obj
	}
	for i, obj := range nameless {
		byIndex[i] = obj
	}
	out := make([]placed, 0, n)
	for i, obj := range byIndex {
		if obj != nil {
			out = append(out, placed{i, obj})
		}
	}
	return out, nil
}

// setAnnotation sets an annotation, or removes it when value is empty.
func setAnnotation(obj *unstructured.Unstructured, key, value string) {
	ann := obj.GetAnnotations()
	if value == "" {
		if _, ok := ann[key]; !ok {
			return
		}
		delete(ann, key)
	} else {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[key] = value
	}
	obj.SetAnnotations(ann)
}

// streamSize is the size of a stream as kustomize reads it.
func streamSize(objs []*unstructured.Unstructured) int {
	n := 0
	for _, obj := range objs {
		data, _ := obj.MarshalJSON()
		n += len(data) + 5
	}
	return n
}

// kustomizeObjects runs one kustomization over objs, in memory. grow is
// how much the kustomization may add to each object at most, and
// growImage to each image: with the objects' own size it must stay under
// the bound a chart's render has.
func kustomizeObjects(objs []*unstructured.Unstructured, k types.Kustomization, grow, growImage int) ([]*unstructured.Unstructured, error) {
	if len(objs) == 0 {
		return objs, nil
	}
	m, err := kustomizeResMap(objs, k, grow, growImage)
	if err != nil {
		return nil, err
	}
	return resMapObjects(m)
}

// kustomizeResMap runs one kustomization over objs, in memory, and keeps
// kustomize's own result; grow and growImage bound it as
// kustomizeObjects says.
func kustomizeResMap(objs []*unstructured.Unstructured, k types.Kustomization, grow ...int) (resmap.ResMap, error) {
	var buf bytes.Buffer
	for _, obj := range objs {
		data, err := obj.MarshalJSON()
		if err != nil {
			return nil, err
		}
		// NOTE: JSON is YAML, and kyaml reads it faster than YAML.
		buf.WriteString("---\n")
		buf.Write(data)
		buf.WriteByte('\n')
	}
	size := buf.Len()
	if len(grow) == 2 {
		size += grow[0]*len(objs) + grow[1]*bytes.Count(buf.Bytes(), []byte(`"image":`))
	}
	if size > maxTemplateOutput {
		return nil, fmt.Errorf("it could make the render %d MiB, more than the limit of %d MiB: patch fewer objects, or with less", size>>20, maxTemplateOutput>>20)
	}
	k.APIVersion, k.Kind = types.KustomizationVersion, types.KustomizationKind
	k.Resources = []string{"objects.yaml"}
	k.SortOptions = &types.SortOptions{Order: types.FIFOSortOrder}
	kdata, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	mem := filesys.MakeFsInMemory()
	if err := mem.WriteFile("/post-render/objects.yaml", buf.Bytes()); err != nil {
		return nil, err
	}
	if err := mem.WriteFile("/post-render/kustomization.yaml", kdata); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified
	m, err := runKustomize(opts, mem, "/post-render")
	if err != nil {
		// NOTE: kustomize goes on to say it then tried the file as a
		// folder, which is no news.
		msg, _, _ := strings.Cut(err.Error(), ": must build at directory")
		return nil, errors.New(msg)
	}
	return m, nil
}

// patchTarget is the object a strategic merge patch without a target
// names by its apiVersion, kind, name and namespace.
type patchTarget struct {
	group, version, kind, name, namespace string
	hasAPIVersion                         bool
}

// namedTarget reads the object a strategic merge patch names.
func namedTarget(patch string) (patchTarget, error) {
	var doc struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(patch), &doc); err != nil {
		return patchTarget{}, errors.New("a JSON 6902 patch needs a target that selects the objects it changes")
	}
	if doc.Kind == "" || doc.Metadata.Name == "" {
		return patchTarget{}, errors.New("a strategic merge patch without a target names its object with kind and metadata.name")
	}
	gv, err := schema.ParseGroupVersion(doc.APIVersion)
	if err != nil {
		return patchTarget{}, fmt.Errorf("apiVersion %q: %w", doc.APIVersion, err)
	}
	return patchTarget{group: gv.Group, version: gv.Version, kind: doc.Kind, name: doc.Metadata.Name,
		namespace: doc.Metadata.Namespace, hasAPIVersion: doc.APIVersion != ""}, nil
}

func (t patchTarget) String() string {
	s := t.kind + " " + t.name
	if t.namespace != "" {
		s = t.kind + " " + t.namespace + "/" + t.name
	}
	if t.hasAPIVersion {
		s = schema.GroupVersion{Group: t.group, Version: t.version}.String() + " " + s
	}
	return s
}

func (t patchTarget) selects(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Kind == t.kind && obj.GetName() == t.name &&
		(t.namespace == "" || obj.GetNamespace() == t.namespace) &&
		(!t.hasAPIVersion || gvk.Group == t.group && gvk.Version == t.version)
}

// oneLine makes kustomize's message fit a condition: one line, at most
// 400 characters, with values hidden. kustomize may quote the object a
// patch failed on.
func oneLine(msg string, mask func(string) string) string {
	if mask != nil {
		msg = mask(msg)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 400 {
		msg = strings.ToValidUTF8(msg[:400], "") + "…"
	}
	return msg
}
