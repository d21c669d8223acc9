package conditions

import (
	"strings"
	"testing"
	"unicode/utf8"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSet(t *testing.T) {
	conds := []metav1.Condition{{Type: "Foreign", Status: metav1.ConditionTrue, Reason: "Theirs"}}
	Set(&conds, 3, Summary{Stalled: true, Reason: "AuthFailed", Message: strings.Repeat("x", 40<<10)})
	ready := apimeta.FindStatusCondition(conds, Ready)
	stalled := apimeta.FindStatusCondition(conds, Stalled)
	rec := apimeta.FindStatusCondition(conds, Reconciling)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "AuthFailed" || ready.ObservedGeneration != 3 {
		t.Errorf("Ready = %+v", ready)
	}
	if stalled == nil || stalled.Status != metav1.ConditionTrue || len(stalled.Message) != 32<<10 || !strings.HasSuffix(stalled.Message, "...") {
		t.Errorf("Stalled = %s/%s with a %d-byte message; want True, cut to 32 KiB", stalled.Status, stalled.Reason, len(stalled.Message))
	}
	if rec == nil || rec.Status != metav1.ConditionFalse || rec.Reason != "Idle" {
		t.Errorf("Reconciling = %+v", rec)
	}
	if apimeta.FindStatusCondition(conds, "Foreign") == nil {
		t.Error("a condition Capstan does not own was dropped")
	}
	since := stalled.LastTransitionTime
	Set(&conds, 4, Summary{Stalled: true, Reason: "AuthFailed", Message: "again"})
	if got := apimeta.FindStatusCondition(conds, Stalled); !got.LastTransitionTime.Equal(&since) || got.ObservedGeneration != 4 {
		t.Errorf("an unchanged status moved its transition time, or kept the old generation: %+v", got)
	}
}

func TestTruncateCutsBetweenCharacters(t *testing.T) {
	if got := Truncate("abcdef", 10); got != "abcdef" {
		t.Fatal(got)
	}
	if got := Truncate("abcdef", 5); got != "ab..." {
		t.Fatal(got)
	}
	// "é" is two bytes: a cut at byte 3 would split the second one.
	if got := Truncate("éééé", 6); got != "é..." || !utf8.ValidString(got) {
		t.Fatalf("%q", got)
	}
}

// TestPutCutsTheMessage: a condition of a type Set does not own, such as
// the Addon's Healthy, is cut to the API server's limit too, or the whole
// status write would be refused.
func TestPutCutsTheMessage(t *testing.T) {
	var conds []metav1.Condition
	Put(&conds, metav1.Condition{Type: "Healthy", Status: metav1.ConditionFalse, Reason: "NotCurrent", Message: strings.Repeat("y", 100<<10)})
	got := apimeta.FindStatusCondition(conds, "Healthy")
	if got == nil || len(got.Message) != 32<<10 || !strings.HasSuffix(got.Message, "...") {
		t.Fatalf("Healthy = %+v; want its message cut to 32 KiB", got)
	}
}
