package render

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
)

// FuzzDecodeDocument feeds rendered documents of any shape to the decoder:
// it must not panic, and what it returns must be objects with a kind.
func FuzzDecodeDocument(f *testing.F) {
	f.Add("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
	f.Add("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n")
	f.Add("# only a comment\n")
	f.Add("- a\n- b\n")
	f.Add("kind: x\napiVersion: 1\nitems: 3\n")
	f.Fuzz(func(t *testing.T, doc string) {
		objs, err := decodeDocument([]byte(doc))
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetKind() == "" || o.GetAPIVersion() == "" {
				t.Errorf("decoded an object without kind or apiVersion from %q", doc)
			}
		}
	})
}

// FuzzRedactTemplateError checks that a redacted error is made of the fixed
// wording, a known template name and numbers, whatever Helm's message
// holds; and that with a mask it adds only the chart's message, masked.
func FuzzRedactTemplateError(f *testing.F) {
	f.Add("execution error at (c/templates/a.yaml:3:4): s3cret")
	f.Add("parse error at (c/templates/a.yaml:3): s3cret")
	f.Add("template: c/templates/_h.tpl:1:2: executing \"x\" at <s3cret>: s3cret")
	f.Add("s3cret (c/templates/a.yaml) s3cret")
	templates := map[string]bool{"c/templates/a.yaml": true, "c/templates/_h.tpl": true}
	f.Fuzz(func(t *testing.T, msg string) {
		te := redactTemplateError(errors.New(msg), templates)
		if te.Template != "" && !templates[te.Template] {
			t.Fatalf("template %q is not one of the chart's", te.Template)
		}
		// Without a mask, rebuild the error with the location alone: it
		// must be the same text.
		clean := &TemplateError{Stage: te.Stage, Template: te.Template, Line: te.Line, Column: te.Column}
		if dropped := maskChartMessage(te, nil); dropped.Error() != clean.Error() || strings.Contains(dropped.Error(), "s3cret") {
			t.Fatalf("the error carries more than its location: %q", dropped.Error())
		}
		hide := func(s string) string { return strings.ReplaceAll(s, "s3cret", "(hidden)") }
		masked := maskChartMessage(te, hide)
		if strings.Contains(masked.Error(), "s3cret") {
			t.Fatalf("the masked error shows the value: %q", masked.Error())
		}
		var mte *TemplateError
		if !errors.As(masked, &mte) || mte.Message == "" && masked.Error() != clean.Error() {
			t.Fatalf("with no chart message, the masked error carries more than its location: %q", masked.Error())
		}
	})
}

// FuzzRenderWire feeds any bytes to the worker's request and response
// decoders: they must not panic or allocate past the message, and a
// request that decodes must encode to a request that decodes the same.
func FuzzRenderWire(f *testing.F) {
	req, err := encodeRequest(inlineChart(configMap), map[string]any{"a": int64(1), "b": []any{1.5, "x"}},
		Options{ReleaseName: "r", Namespace: "n", Capabilities: testCaps})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(req)
	f.Add(encodeResponse(&templateOutput{Files: map[string]string{"a": "b"}}, nil))
	f.Add(encodeResponse(nil, &TemplateError{Stage: "execute", Template: "t", Line: 3}))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeResponse(data)
		ch, values, opts, err := decodeRequest(data)
		if err != nil {
			return
		}
		again, err := encodeRequest(ch, values, opts)
		if err != nil {
			t.Fatalf("a decoded request does not encode: %v", err)
		}
		// NOTE: compared as bytes, since a NaN is not equal to itself.
		ch2, values2, opts2, err := decodeRequest(again)
		if err != nil {
			t.Fatalf("a re-encoded request does not decode: %v", err)
		}
		third, err := encodeRequest(ch2, values2, opts2)
		if err != nil || !bytes.Equal(again, third) {
			t.Errorf("a request changed on its way through the wire (%v)", err)
		}
	})
}

// FuzzPostRender: any patch, with or without a target, is refused with
// the field it came from, or changes the render within the growth bound:
// no object or hook added, each grown by at most the patch's size, and
// no marker of Capstan's own left on a hook.
func FuzzPostRender(f *testing.F) {
	f.Add("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n", "")
	f.Add(`[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`, "ConfigMap")
	f.Add(`[{"op":"move","from":"/spec","path":"/metadata/annotations/x"}]`, "Job")
	f.Add("$patch: delete\nkind: Pod\nmetadata:\n  name: smoke\n", "")
	f.Add(`[{"op":"copy","from":"/spec","path":"/spec/x"}]`, "Deployment")
	f.Add("kind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: post-install\n", "")
	f.Fuzz(func(t *testing.T, patch, kind string) {
		if len(patch) > 4096 {
			return
		}
		res := postRenderFixture(t)
		size := func(objs []*unstructured.Unstructured) int {
			n := 0
			for _, o := range objs {
				data, _ := o.MarshalJSON()
				n += len(data)
			}
			return n
		}
		objects, hooks := res.Objects, res.Hooks
		before := size(objects)
		pt := types.Patch{Patch: patch}
		if kind != "" {
			pt.Target = selectorOf(kind, "")
		}
		err := (&PostRender{Patches: []types.Patch{pt}}).apply(res, nil)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "spec.patches") {
				t.Fatalf("error %q does not name spec.patches", err)
			}
			return
		}
		if len(res.Objects) > len(objects) || len(res.Hooks) > len(hooks) {
			t.Fatalf("a patch added objects: %d → %d, hooks %d → %d", len(objects), len(res.Objects), len(hooks), len(res.Hooks))
		}
		// NOTE: JSON escapes can make a value up to six times its text.
		if after := size(res.Objects); after > before+6*len(patch)*len(objects)+64*len(objects) {
			t.Fatalf("the objects grew from %d to %d bytes with a patch of %d", before, after, len(patch))
		}
		for _, h := range res.Hooks {
			if _, ok := h.Object.GetAnnotations()[markObject]; ok {
				t.Fatal("a hook kept Capstan's post-render marker")
			}
		}
	})
}
