package benchmark_test

import (
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

func TestCensusCountsTheWindowsWritesByWriter(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	event := func(at time.Duration, user, impersonated, verb, resource, sub, uri string, code int32) auditv1.Event {
		e := auditv1.Event{
			Stage:                    auditv1.StageResponseComplete,
			RequestReceivedTimestamp: metav1.NewMicroTime(t0.Add(at)),
			User:                     authnv1.UserInfo{Username: user},
			Verb:                     verb,
			RequestURI:               uri,
			ObjectRef:                &auditv1.ObjectReference{Resource: resource, Subresource: sub},
			ResponseStatus:           &metav1.Status{Code: code},
		}
		if impersonated != "" {
			e.ImpersonatedUser = &authnv1.UserInfo{Username: impersonated}
		}
		return e
	}
	events := []auditv1.Event{
		event(-time.Second, "system:serviceaccount:kube-system:deployment-controller", "", "update", "deployments", "status", "/apis/apps/v1/...", 200),
		event(time.Second, "system:serviceaccount:kube-system:deployment-controller", "", "update", "deployments", "status", "/apis/apps/v1/...", 200),
		event(2*time.Second, "system:serviceaccount:kube-system:deployment-controller", "", "update", "deployments", "status", "/apis/apps/v1/...", 409),
		event(3*time.Second, "system:serviceaccount:capstan-system:capstan-controller", "system:serviceaccount:capstan-system:capstan-addons", "patch", "configmaps", "", "/api/v1/...?dryRun=All", 200),
		event(4*time.Second, "system:kube-scheduler", "", "create", "pods", "binding", "/api/v1/...", 201),
		event(11*time.Second, "system:kube-scheduler", "", "create", "pods", "binding", "/api/v1/...", 201),
	}
	// One event in the window still at its first stage does not count.
	events = append(events, event(5*time.Second, "kwok", "", "patch", "pods", "status", "", 200))
	events[len(events)-1].Stage = auditv1.StageResponseStarted

	got := censusOf(events, t0, t0.Add(10*time.Second))
	want := map[string]int{
		"deployment-controller: update deployments/status":          1,
		"deployment-controller: update → 409 deployments/status":    1,
		"capstan-system:capstan-addons: patch (dry run) configmaps": 1,
		"kube-scheduler: create pods/binding":                       1,
	}
	if len(got.counts) != len(want) {
		t.Fatalf("census %v, want %v", got, want)
	}
	for k, v := range want {
		if got.counts[k] != v {
			t.Errorf("%q: %d, want %d (census %v)", k, got.counts[k], v, got.counts)
		}
	}

	if len(got.applies) != 0 || len(got.deployments) != 1 || got.deployments[0] != time.Second {
		t.Errorf("applies at %v and the Deployments' status at %v; want none (a dry run is no apply) and [1s] (a conflict is no write)", got.applies, got.deployments)
	}

	var s strings.Builder
	logCensus(&s, 1, []string{"a", "b"}, []writeCensus{got, {counts: map[string]int{"kube-scheduler: create pods/binding": 1}}})
	if !strings.Contains(s.String(), "differs") || !strings.Contains(s.String(), "4.00    1.00") {
		t.Errorf("the side-by-side census:\n%s", s.String())
	}
}
