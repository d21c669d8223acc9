package health

import (
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func database(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Database",
		"metadata": map[string]any{"name": "db", "generation": int64(2)},
		"spec":     map[string]any{"replicas": int64(3)},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestEvaluate(t *testing.T) {
	checks, err := Compile([]capstanv1.HealthCheck{{
		APIVersion: "example.com/v1", Kind: "Database",
		Current:    "status.phase == 'Ready'",
		InProgress: "has(status.migrating) && status.migrating",
		Failed:     "status.phase.startsWith('Error')",
	}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		status map[string]any
		want   Status
		msg    string
	}{
		{"no status yet", nil, InProgress, "spec.healthChecks[0].current is not true yet (spec.healthChecks[0].current names a field the object does not have (yet))"},
		{"ready", map[string]any{"phase": "Ready", "observedGeneration": int64(2)}, Current, ""},
		{"ready for an older generation", map[string]any{"phase": "Ready", "observedGeneration": int64(1)}, InProgress,
			"status.observedGeneration is 1 and metadata.generation 2: its controller has not acted on the latest change yet"},
		{"failed for an older generation", map[string]any{"phase": "ErrorNoDisk", "observedGeneration": int64(1)}, InProgress, "metadata.generation 2"},
		{"failed for this generation", map[string]any{"phase": "ErrorNoDisk", "observedGeneration": int64(2)}, Failed, "failed is true"},
		{"ready, observedGeneration decoded as a float", map[string]any{"phase": "Ready", "observedGeneration": float64(2)}, Current, ""},
		{"an observedGeneration that is not a number is not one", map[string]any{"phase": "ErrorNoDisk", "observedGeneration": "1"}, Failed, "failed is true"},
		{"no generation to compare with", map[string]any{"phase": "Ready", "observedGeneration": int64(7), "noGeneration": true}, Current, ""},
		{"failed", map[string]any{"phase": "ErrorNoDisk"}, Failed, "spec.healthChecks[0].failed is true"},
		{"in progress wins", map[string]any{"phase": "ErrorNoDisk", "migrating": true}, InProgress, "spec.healthChecks[0].inProgress is true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := database(tc.status)
			if tc.status["noGeneration"] == true {
				delete(obj.Object["metadata"].(map[string]any), "generation")
			}
			if !checks.Judges(obj) {
				t.Fatal("the check does not judge its kind")
			}
			got, msg := checks.Evaluate(obj)
			if got != tc.want || !strings.Contains(msg, tc.msg) || (tc.msg == "" && msg != "") {
				t.Errorf("%s %q, want %s and a message with %q", got, msg, tc.want, tc.msg)
			}
		})
	}
	other := database(nil)
	other.SetAPIVersion("example.com/v2")
	if checks.Judges(other) {
		t.Error("a check of v1 judges v2")
	}
}

func TestCompileRefusals(t *testing.T) {
	ok := capstanv1.HealthCheck{APIVersion: "example.com/v1", Kind: "Database", Current: "true"}
	cases := []struct {
		checks []capstanv1.HealthCheck
		want   string
	}{
		{[]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database", Current: "status.phase =="}}, "spec.healthChecks[0].current: ERROR"},
		{[]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database", Current: "'ready'"}}, "spec.healthChecks[0].current: gives a string, not a bool"},
		{[]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database", Current: "true", Failed: "nosuch(1)"}}, "spec.healthChecks[0].failed: ERROR"},
		{[]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database"}}, "spec.healthChecks[0].current: is required"},
		{[]capstanv1.HealthCheck{ok, ok}, "spec.healthChecks[1]: example.com/v1 Database has a check already, spec.healthChecks[0]"},
		{[]capstanv1.HealthCheck{{APIVersion: "v1", Kind: "Secret", Current: "true"}}, "spec.healthChecks[0]: a Secret is judged as it exists"},
	}
	for _, tc := range cases {
		_, err := Compile(tc.checks)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.checks, err, tc.want)
		}
	}
}

func TestCostLimit(t *testing.T) {
	checks, err := Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database",
		Current: "status.items.all(a, status.items.all(b, status.items.all(c, a + b + c >= 0)))"}})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 2000)
	for i := range items {
		items[i] = int64(i)
	}
	got, msg := checks.Evaluate(database(map[string]any{"items": items}))
	if got != InProgress || !strings.Contains(msg, "costs more than the limit of one evaluation") {
		t.Fatalf("%s %q: an expression past its cost must stop, and say so", got, msg)
	}
}

// TestNoValueInMessages: a message never quotes what the object holds,
// whatever the expression does with it.
func TestNoValueInMessages(t *testing.T) {
	checks, err := Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database",
		Current: "status.token.matches(status.token + '(')", Failed: "int(status.token) > 1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, msg := checks.Evaluate(database(map[string]any{"token": "c3VwZXJzZWNyZXQ"}))
	if strings.Contains(msg, "c3VwZXJzZWNyZXQ") {
		t.Fatalf("the message quotes a value: %s", msg)
	}
	if _, err := Compile([]capstanv1.HealthCheck{{APIVersion: "v1", Kind: "ConfigMap", Current: "data.a == 'x'"}}); err == nil || !strings.Contains(err.Error(), "undeclared reference to 'data'") {
		t.Fatalf("an expression over data: %v", err)
	}
}

// TestLookBudget: once a look has spent its budget, the objects left are
// not evaluated, and say so.
func TestLookBudget(t *testing.T) {
	checks, err := Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database",
		Current: "status.items.all(a, status.items.all(b, a + b >= 0))"}})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 280)
	for i := range items {
		items[i] = int64(i)
	}
	obj := database(map[string]any{"items": items})
	for i := range 300 {
		if _, msg := checks.Evaluate(obj); strings.Contains(msg, "more than its budget") {
			if i < 10 {
				t.Fatalf("the budget ran out after %d objects", i)
			}
			return
		}
	}
	t.Fatal("300 evaluations of a costly check never ran out of the look's budget")
}

// TestNewLookRenewsTheBudget: the budget is one look's, not the Checks'
// for as long as they live: a new look judges the objects again.
func TestNewLookRenewsTheBudget(t *testing.T) {
	checks, err := Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database",
		Current: "status.items.all(a, status.items.all(b, a + b >= 0))"}})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 280)
	for i := range items {
		items[i] = int64(i)
	}
	obj := database(map[string]any{"items": items})
	spend := func() {
		for range 300 {
			if _, msg := checks.Evaluate(obj); strings.Contains(msg, "more than its budget") {
				return
			}
		}
		t.Fatal("300 evaluations never ran out of the look's budget")
	}
	spend()
	small := database(map[string]any{"items": items[:3]})
	if got, msg := checks.Evaluate(small); got != InProgress || !strings.Contains(msg, "more than its budget") {
		t.Fatalf("an object after the budget ran out: %s %q", got, msg)
	}
	checks.NewLook()
	if got, msg := checks.Evaluate(small); got != Current {
		t.Fatalf("the first object of a new look: %s %q; want Current", got, msg)
	}
	var none *Checks
	none.NewLook()
}

// TestStringFunctionsAllocateLittle: a string function whose result
// would cost more than the limit stops before it makes the result, not
// after: CEL charges a call once it has returned, and three nested
// replace() calls of a ten-letter literal made 95 MiB, of a fourteen-letter
// one 1.4 GiB, and one of a string by a string the object holds the
// square of its length.
func TestStringFunctionsAllocateLittle(t *testing.T) {
	a := "'" + strings.Repeat("a", 10) + "'"
	b := a + ".replace('a', " + a + ")"
	c := "(" + b + ").replace('a', " + b + ")"
	items := make([]any, 2000)
	for i := range items {
		items[i] = int64(i)
	}
	cases := []struct {
		name, expr string
		status     map[string]any
	}{
		{"replace of replaces of a literal", "(" + c + ").replace('a', " + c + ").size() > 0", nil},
		{"replace by a string of the object", "status.s.replace('', status.s).size() > 0", map[string]any{"s": strings.Repeat("x", 10_000)}},
		{"join of a string of the object, many times", "status.items.map(i, status.s).join().size() > 0", map[string]any{"s": strings.Repeat("x", 50_000), "items": items}},
		{"format of a string of the object, many times", "status.items.map(i, '%s'.format([status.s])).size() > 0", map[string]any{"s": strings.Repeat("x", 50_000), "items": items}},
		{"quote of a string of the object, many times", "status.items.map(i, strings.quote(status.s)).size() > 0", map[string]any{"s": strings.Repeat("x", 50_000), "items": items}},
		{"split of a long string into letters", "status.s.split('').size() > 0", map[string]any{"s": strings.Repeat("x", 2_000_000)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checks, err := Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database", Current: tc.expr}})
			if err != nil {
				t.Fatal(err)
			}
			obj := database(tc.status)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got, msg := checks.Evaluate(obj)
			runtime.ReadMemStats(&after)
			if got != InProgress || !strings.Contains(msg, "costs more than the limit of one evaluation") {
				t.Errorf("%s %q: an expression past its cost must stop, and say so", got, msg)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 20<<20 {
				t.Errorf("one evaluation allocated %d MiB", grew>>20)
			}
		})
	}
}

// TestStringFunctionsStillWork: the guarded functions give what CEL's
// string extensions give, within the bound.
func TestStringFunctionsStillWork(t *testing.T) {
	checks, err := Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database", Current: `
		status.phase.replace('-', ' ') == 'in sync now' &&
		status.phase.replace('-', '', 1) == 'insync-now' &&
		status.phase.split('-') == ['in', 'sync', 'now'] &&
		status.phase.split('-', 2) == ['in', 'sync-now'] &&
		status.phase.split('-').join() == 'insyncnow' &&
		status.phase.split('-').join('+') == 'in+sync+now' &&
		'%s/%d/%x/%s'.format([status.phase, spec.replicas, 'a', [1, 'b']]) == 'in-sync-now/3/61/[1, b]' &&
		strings.quote(status.phase + '"') == '"in-sync-now\\""' &&
		'abc'.replace('', status.phase).size() == 47`}})
	if err != nil {
		t.Fatal(err)
	}
	if got, msg := checks.Evaluate(database(map[string]any{"phase": "in-sync-now"})); got != Current {
		t.Fatalf("%s %q", got, msg)
	}
}
