// Package health judges custom resources that kstatus cannot, with the
// CEL expressions of an add-on's spec.healthChecks: each says, from the
// live object's fields, when an object of one kind is in progress, has
// failed, or is current, as Flux's healthCheckExprs do.
package health

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Status is what a check says of one object.
type Status string

const (
	Current    Status = "Current"
	InProgress Status = "InProgress"
	Failed     Status = "Failed"
)

// costLimit bounds one evaluation: an expression a tenant wrote runs in
// the controller, over objects whose size the tenant's chart decides.
const costLimit = 100_000

// fields are the variables an expression may name: the object's
// top-level fields. Not data: a Secret's would be read, and its values
// told one guess at a time.
var fields = []string{"apiVersion", "kind", "metadata", "spec", "status"}

// lookBudget bounds the cost of every evaluation in one look at an
// add-on, twenty times the most an evaluation may cost: a check over
// thousands of objects must not hold the controller for minutes at each
// health poll.
const lookBudget = 20 * costLimit

var env = sync.OnceValues(func() (*cel.Env, error) {
	opts := []cel.EnvOption{ext.Strings()}
	for _, f := range fields {
		opts = append(opts, cel.Variable(f, cel.DynType))
	}
	e, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, err
	}
	return guardedStrings(e)
})

// Checks are an add-on's health checks, compiled, by apiVersion and kind,
// for one look: they count what their evaluations cost.
type Checks struct {
	byKind map[string]*check
	spent  uint64
}

type check struct {
	field                       string
	current, inProgress, failed cel.Program
}

// CheckError is a check that does not compile: Expr names its
// expression (current, inProgress, failed), or is empty for the check.
type CheckError struct {
	Index   int
	Expr    string
	Message string
}

func (e *CheckError) Error() string {
	if e.Expr == "" {
		return fmt.Sprintf("spec.healthChecks[%d]: %s", e.Index, e.Message)
	}
	return fmt.Sprintf("spec.healthChecks[%d].%s: %s", e.Index, e.Expr, e.Message)
}

// Compile compiles the checks. An expression that does not compile is an
// error that names its field, such as spec.healthChecks[0].current, and a
// second check of one kind names both.
func Compile(specs []capstanv1.HealthCheck) (*Checks, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	e, err := env()
	if err != nil {
		return nil, err
	}
	cs := &Checks{byKind: map[string]*check{}}
	for i, spec := range specs {
		field := fmt.Sprintf("spec.healthChecks[%d]", i)
		key := spec.APIVersion + " " + spec.Kind
		if spec.APIVersion == "v1" && spec.Kind == "Secret" {
			return nil, &CheckError{i, "", "a Secret is judged as it exists: its values are not for an expression to read"}
		}
		if prev, ok := cs.byKind[key]; ok {
			return nil, &CheckError{i, "", fmt.Sprintf("%s %s has a check already, %s: give each kind one", spec.APIVersion, spec.Kind, prev.field)}
		}
		c := &check{field: field}
		for _, x := range []struct {
			name string
			src  string
			prg  *cel.Program
		}{{"current", spec.Current, &c.current}, {"inProgress", spec.InProgress, &c.inProgress}, {"failed", spec.Failed, &c.failed}} {
			if x.src == "" {
				if x.name == "current" {
					return nil, &CheckError{i, "current", "is required: an expression that is true when the object is ready"}
				}
				continue
			}
			ast, iss := e.Compile(x.src)
			if iss.Err() != nil {
				// NOTE: CEL's message goes on to quote the expression with
				// a caret under the place; its first line says it all.
				msg, _, _ := strings.Cut(iss.Err().Error(), "\n")
				return nil, &CheckError{i, x.name, msg}
			}
			if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
				return nil, &CheckError{i, x.name, fmt.Sprintf("gives a %s, not a bool", t)}
			}
			prg, err := e.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100), cel.EvalOptions(cel.OptTrackCost), resultCosts)
			if err != nil {
				return nil, &CheckError{i, x.name, err.Error()}
			}
			*x.prg = prg
		}
		cs.byKind[key] = c
	}
	return cs, nil
}

// NewLook starts a look at an add-on's objects: the checks' cost budget is
// whole again. The health step and each poll of a wave wait are looks of
// their own; without it the budget would be one reconcile's, and a wave
// that waits long would find every object a check judges in progress once
// its polls had spent it.
func (cs *Checks) NewLook() {
	if cs != nil {
		cs.spent = 0
	}
}

// Judges reports whether a check covers obj's apiVersion and kind.
func (cs *Checks) Judges(obj *unstructured.Unstructured) bool {
	if cs == nil {
		return false
	}
	_, ok := cs.byKind[obj.GetAPIVersion()+" "+obj.GetKind()]
	return ok
}

// Evaluate judges the live object with its kind's check: inProgress
// first, then failed, then current, as Flux does; an object that none
// of them says anything of is in progress. An expression that cannot be
// evaluated on it, such as one that names a field the object does not
// have yet, counts as false, and the message says why.
//
// An object whose status.observedGeneration is not its
// metadata.generation is in progress, and no expression is evaluated:
// its status describes a spec older than the one just applied, so a
// Ready it reports is the previous version's, and an error may be what
// the change fixes. Right after an upgrade, an operator's resource would
// otherwise pass its check before the operator has even seen the change.
// An object without a metadata.generation is judged by the expressions
// alone, as kstatus judges one.
func (cs *Checks) Evaluate(live *unstructured.Unstructured) (Status, string) {
	c := cs.byKind[live.GetAPIVersion()+" "+live.GetKind()]
	metadata, _ := live.Object["metadata"].(map[string]any)
	status, _ := live.Object["status"].(map[string]any)
	generation, hasGeneration := wholeNumber(metadata["generation"])
	if observed, ok := wholeNumber(status["observedGeneration"]); ok && hasGeneration && generation > 0 && observed != generation {
		return InProgress, fmt.Sprintf("status.observedGeneration is %d and metadata.generation %d: its controller has not acted on the latest change yet", observed, generation)
	}
	vars := map[string]any{}
	for _, f := range fields {
		if v, ok := live.Object[f]; ok {
			vars[f] = v
		}
	}
	if cs.spent > lookBudget {
		return InProgress, c.field + ": the checks of this look cost more than its budget; the object is judged at the next look"
	}
	var notes []string
	eval := func(name string, prg cel.Program) bool {
		if prg == nil {
			return false
		}
		out, details, err := prg.Eval(vars)
		if details != nil && details.ActualCost() != nil {
			cs.spent += *details.ActualCost()
		}
		if err != nil {
			absent := strings.HasPrefix(err.Error(), "no such key") || strings.HasPrefix(err.Error(), "no such attribute")
			// NOTE: inProgress and failed name fields an object has only
			// then; that they are absent the rest of the time is no news.
			if name == "current" || !absent {
				notes = append(notes, fmt.Sprintf("%s.%s %s", c.field, name, evalError(err, absent)))
			}
			return false
		}
		b, ok := out.(types.Bool)
		if !ok {
			notes = append(notes, fmt.Sprintf("%s.%s gives a %s, not a bool", c.field, name, out.Type()))
			return false
		}
		return bool(b)
	}
	switch {
	case eval("inProgress", c.inProgress):
		return InProgress, c.field + ".inProgress is true"
	case eval("failed", c.failed):
		return Failed, c.field + ".failed is true"
	case eval("current", c.current):
		return Current, ""
	}
	msg := c.field + ".current is not true yet"
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, "; ") + ")"
	}
	return InProgress, msg
}

// wholeNumber is v as a whole number, when it is one: a generation is an
// int64 as the API server's JSON is decoded, and a float64 as other
// decoders give it.
func wholeNumber(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true
		}
	}
	return 0, false
}

// evalError says why an expression could not be evaluated, in words of
// its own: CEL's message may quote the values it was given.
func evalError(err error, absent bool) string {
	switch msg := err.Error(); {
	case absent:
		return "names a field the object does not have (yet)"
	case strings.HasPrefix(msg, "no such overload"):
		return "applies a function or an operator to values of a type it does not take"
	case strings.Contains(msg, "cost limit"):
		return "costs more than the limit of one evaluation"
	}
	return "cannot be evaluated on the object"
}
