// Package docs_test checks the documentation against the code it describes.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEveryReasonIsDocumented reads the condition and event reasons the
// controllers set, from their source (go/ast, no control plane), and checks
// that docs/controller.md or docs/gitops.md names each, in backquotes (an
// AddonRepository's in gitops.md, the Registered condition's in
// registration.md): a user who writes `kubectl wait` or an alert on a
// reason finds them all there. A reason is a constant named Reason… or
// reason…, a string given to a field or variable named reason, a string
// given as the reason of an event (Eventf's fourth argument) or of the
// Registered condition (registered's third), and a pipeline step's or
// stage's name with "Failed" after it (how outcome.go names a failed step).
func TestEveryReasonIsDocumented(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	gitops, registration := read("gitops.md"), read("registration.md")
	docs := read("controller.md") + gitops
	files, err := filepath.Glob("../internal/controller/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../internal/plan/gates.go")
	reasons, registered := map[string]string{}, map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		rs, regs := reasonsIn(t, f)
		for r := range rs {
			reasons[r] = f
		}
		for r := range regs {
			registered[r] = f
		}
	}
	// Each way of setting a reason, once: a constant, a field, a step, an
	// event's literal, the Registered condition's literal.
	for _, must := range []string{"GuardrailViolations", "ObjectsExist", "ApplyFailed", "FetchFailed", "DependencyCycle", "HookFailed", "LeftNotOwned"} {
		if reasons[must] == "" {
			t.Errorf("the reason %s was not found in the code: the test no longer reads the reasons", must)
		}
	}
	if registered["ManifestMissing"] == "" {
		t.Error("the Registered reason ManifestMissing was not found in the code: the test no longer reads the Registered condition's reasons")
	}
	var missing []string
	for r, f := range reasons {
		if !strings.Contains(docs, "`"+r+"`") {
			missing = append(missing, r+" ("+filepath.Base(f)+")")
		}
	}
	for r, f := range registered {
		if !strings.Contains(registration, "`"+r+"`") {
			missing = append(missing, r+" ("+filepath.Base(f)+", the Registered condition's, in registration.md)")
		}
	}
	// An AddonRepository's reasons are on its own page, where its other
	// reasons are: an Addon's reason of the same name says nothing of it.
	rs, _ := reasonsIn(t, "../internal/controller/addonrepository_controller.go")
	for r := range rs {
		if !strings.Contains(gitops, "`"+r+"`") {
			missing = append(missing, r+" (addonrepository_controller.go, in gitops.md)")
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("reasons set by the controllers that the docs do not name: %s", strings.Join(missing, ", "))
	}
}

// reasonsIn returns the reasons the Go file at path sets, and apart from
// them the Registered condition's, which registration.md tells.
func reasonsIn(t *testing.T, path string) (reasons, registered map[string]bool) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, regs := map[string]bool{}, map[string]bool{}
	str := strLit
	isReason := func(e ast.Expr) bool {
		id, ok := e.(*ast.Ident)
		return ok && strings.HasPrefix(strings.ToLower(id.Name), "reason")
	}
	step := func(c *ast.CompositeLit) {
		if len(c.Elts) == 2 {
			if s := str(c.Elts[0]); s != "" {
				out[s+"Failed"] = true
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			// An event's reason, given as it is:
			// r.Recorder.Eventf(obj, nil, "Warning", "HookFailed", …)
			// (events.EventRecorder); the Registered condition's:
			// r.registered(s, false, "ManifestMissing", …).
			sel, ok := n.Fun.(*ast.SelectorExpr)
			switch {
			case !ok:
			case sel.Sel.Name == "Eventf" && len(n.Args) > 3:
				if s := str(n.Args[3]); s != "" {
					out[s] = true
				}
			case sel.Sel.Name == "registered" && len(n.Args) > 2:
				if s := str(n.Args[2]); s != "" {
					regs[s] = true
				}
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if i < len(n.Values) && isReason(name) {
					if s := str(n.Values[i]); s != "" {
						out[s] = true
					}
				}
			}
		case *ast.KeyValueExpr:
			if isReason(n.Key) {
				if s := str(n.Value); s != "" {
					out[s] = true
				}
			}
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if i >= len(n.Rhs) {
					continue
				}
				if isReason(lhs) {
					if s := str(n.Rhs[i]); s != "" {
						out[s] = true
					}
				}
				// A stage set outside the pipeline: s.stage = "Delete".
				if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "stage" {
					if s := str(n.Rhs[i]); s != "" {
						out[s+"Failed"] = true
					}
				}
			}
		case *ast.CompositeLit:
			// A pipeline step, step{"Name", r.run}, alone or in a
			// []step{{"Name", r.run}, …}.
			if id, ok := n.Type.(*ast.Ident); ok && id.Name == "step" {
				step(n)
			}
			if at, ok := n.Type.(*ast.ArrayType); ok {
				if id, ok := at.Elt.(*ast.Ident); ok && id.Name == "step" {
					for _, e := range n.Elts {
						if c, ok := e.(*ast.CompositeLit); ok {
							step(c)
						}
					}
				}
			}
		}
		return true
	})
	return out, regs
}

// TestEventsBesideTransitionsAreListed checks controller.md's list of the
// events emitted besides those of a transition (whose reason is the Ready
// reason the status took, and which the reasons table tells) against the
// code, both ways: every event the controllers emit with a reason of its
// own (Eventf given a literal or a constant) is in the list, and every
// reason in the list is emitted so, not only as a transition's reason.
func TestEventsBesideTransitionsAreListed(t *testing.T) {
	data, err := os.ReadFile("controller.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "Besides them, these events:")
	if !ok {
		t.Fatal("controller.md no longer lists the events besides a transition's after \"Besides them, these events:\"")
	}
	// The list runs to the next item of the list it is in.
	para, _, _ := strings.Cut(rest, "\n- ")
	listed := map[string]bool{}
	for i, part := range strings.Split(para, "`") {
		if i%2 == 1 && isCamel(part) {
			listed[part] = true
		}
	}
	files, err := filepath.Glob("../internal/controller/*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						if s := strLit(vs.Values[i]); s != "" {
							consts[id.Name] = s
						}
					}
				}
			}
			return true
		})
	}
	emitted := map[string]bool{}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 4 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Eventf" {
				return true
			}
			switch a := call.Args[3].(type) {
			case *ast.BasicLit:
				emitted[strLit(a)] = true
			case *ast.Ident:
				// A variable (a transition's reason) is not looked up.
				if s, ok := consts[a.Name]; ok {
					emitted[s] = true
				}
			}
			return true
		})
	}
	if !emitted["HookFailed"] || !emitted["DriftFought"] {
		t.Fatal("the events HookFailed and DriftFought were not found in the code: the test no longer reads the events")
	}
	for r := range emitted {
		if !listed[r] {
			t.Errorf("the controllers emit the event %s, but controller.md's list of the events besides a transition's does not name it", r)
		}
	}
	for r := range listed {
		if !emitted[r] {
			t.Errorf("controller.md lists %s as an event besides a transition's, but no controller emits it so; a reason that comes only with a transition is told in the reasons table", r)
		}
	}
}

// isCamel reports whether s reads as a reason: CamelCase, letters only.
func isCamel(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// strLit is the string a string literal holds, or "".
func strLit(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return s
}
