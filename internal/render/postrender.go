package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/api/krusty"
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

// hookIndex marks each hook while it goes through kustomize, so that the
// hook's template and order come back with it.
const hookIndex = "capstan.dev/post-render-hook"

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
		if err := CheckPatch(pt.Patch); err != nil {
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
// render without bound.
func CheckPatch(patch string) error {
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

// apply runs the patches, then the images, over res's objects and hooks.
// mask, when set, hides values in kustomize's messages, which may quote
// an object.
func (p *PostRender) apply(res *Result, mask func(string) string) error {
	if p.Empty() {
		return nil
	}
	if err := p.Check(); err != nil {
		return err
	}
	hooks := make([]*unstructured.Unstructured, len(res.Hooks))
	for i, h := range res.Hooks {
		obj := h.Object.DeepCopy()
		ann := obj.GetAnnotations()
		ann[hookIndex] = strconv.Itoa(i)
		obj.SetAnnotations(ann)
		hooks[i] = obj
	}
	objects := res.Objects
	run := func(what string, k types.Kustomization, grow int) error {
		for _, stream := range []*[]*unstructured.Unstructured{&objects, &hooks} {
			out, err := kustomizeObjects(*stream, k, grow)
			if err != nil {
				return fmt.Errorf("%s: %s", what, oneLine(err.Error(), mask))
			}
			*stream = out
		}
		return nil
	}
	for i, pt := range p.Patches {
		what := fmt.Sprintf("spec.patches[%d]", i)
		if pt.Target == nil {
			// NOTE: kustomize takes a strategic merge patch's target from
			// the object it names, and fails in a stream without that
			// object; with the target written out, each stream patches
			// what it has.
			target, err := namedTarget(pt.Patch)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if !slices.ContainsFunc(slices.Concat(objects, hooks), target.selects) {
				return fmt.Errorf("%s names %s, which the render does not have: check its apiVersion, kind, name and namespace, or give it a target", what, target)
			}
			pt.Target = target.selector()
		}
		beforeObjects, beforeHooks := objects, hooks
		k := types.Kustomization{Patches: []types.Patch{pt}}
		if err := run(what, k, len(pt.Patch)); err != nil {
			return err
		}
		if sameObjects(beforeObjects, objects) && sameObjects(beforeHooks, hooks) {
			res.Notices = append(res.Notices, Notice{Path: what,
				Message: "changes nothing the render has: check its target's group, version, kind, name, namespace and selectors"})
		}
		for _, h := range hooks {
			if _, ok := h.GetAnnotations()[hookIndex]; !ok {
				return fmt.Errorf("spec.patches[%d] removed the annotations of hook %s %s: patch the annotations it needs, not all of them", i, h.GetKind(), h.GetName())
			}
		}
	}
	if len(p.Images) > 0 {
		beforeObjects, beforeHooks := objects, hooks
		if err := run("spec.images", types.Kustomization{Images: p.Images}, 0); err != nil {
			return err
		}
		if sameObjects(beforeObjects, objects) && sameObjects(beforeHooks, hooks) {
			res.Notices = append(res.Notices, Notice{Path: "spec.images",
				Message: "replace no image the render has: each name is the image as the render writes it, without its tag"})
		}
	}
	patchedHooks := make([]Hook, 0, len(hooks))
	for _, obj := range hooks {
		ann := obj.GetAnnotations()
		i, _ := strconv.Atoi(ann[hookIndex])
		delete(ann, hookIndex)
		obj.SetAnnotations(ann)
		h, ok := parseHook(obj, res.Hooks[i].Template)
		if !ok {
			return fmt.Errorf("spec.patches removed the helm.sh/hook annotation of hook %s %s: a hook stays a hook; change its events instead", obj.GetKind(), obj.GetName())
		}
		if h.isTest() {
			continue
		}
		patchedHooks = append(patchedHooks, h)
	}
	res.Objects, res.Hooks = objects, patchedHooks
	return nil
}

// kustomizeObjects runs one kustomization over objs, in memory, keeping
// their order. grow is how much the kustomization may add to each object
// at most: with the objects' own size it must stay under the bound a
// chart's render has.
func kustomizeObjects(objs []*unstructured.Unstructured, k types.Kustomization, grow int) ([]*unstructured.Unstructured, error) {
	if len(objs) == 0 {
		return objs, nil
	}
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
	if size := buf.Len() + grow*len(objs); size > maxTemplateOutput {
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
	m, err := krusty.MakeKustomizer(opts).Run(mem, "/post-render")
	if err != nil {
		return nil, err
	}
	return resMapObjects(m)
}

// sameObjects reports whether two lists hold equal objects in one order.
func sameObjects(a, b []*unstructured.Unstructured) bool {
	return slices.EqualFunc(a, b, func(x, y *unstructured.Unstructured) bool {
		return equality.Semantic.DeepEqual(x.Object, y.Object)
	})
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

// selector is the kustomize target that selects exactly that object; its
// name and namespace are regular expressions there, so they are quoted.
func (t patchTarget) selector() *types.Selector {
	sel := &types.Selector{}
	sel.Kind, sel.Name = t.kind, regexp.QuoteMeta(t.name)
	if t.namespace != "" {
		sel.Namespace = regexp.QuoteMeta(t.namespace)
	}
	if t.hasAPIVersion {
		sel.Group, sel.Version = t.group, t.version
	}
	return sel
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
