package health

import (
	"errors"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// FuzzHealthCheck feeds any expression to the compiler, as a tenant's
// spec.healthChecks or a git definition may: it is refused with a
// CheckError that names its field, or it judges an object with any of
// the three answers, within the cost bound and without a panic.
func FuzzHealthCheck(f *testing.F) {
	for _, seed := range []string{
		"status.phase == 'Ready'",
		"has(status.phase) && status.phase.startsWith('Error')",
		"status.conditions.filter(c, c.type == 'Ready').all(c, c.status == 'True')",
		"spec.replicas > 2 ? true : metadata.name.contains('d')",
		"[1,2,3].all(a, [1,2,3].all(b, a + b > 0))",
		"status.phase ==",
		"'x'",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if len(expr) > 1024 {
			return
		}
		checks, err := Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database", Current: expr, Failed: expr}})
		if err != nil {
			var ce *CheckError
			if !errors.As(err, &ce) || ce.Index != 0 || (ce.Expr != "current" && ce.Expr != "failed") {
				t.Fatalf("refused without its field: %v", err)
			}
			return
		}
		obj := database(map[string]any{"phase": "Ready", "items": []any{int64(1), "two", 3.5}, "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}})
		switch st, _ := checks.Evaluate(obj); st {
		case Current, InProgress, Failed:
		default:
			t.Fatalf("status %q", st)
		}
	})
}
