package guard

import (
	"context"
	"strings"
	"testing"
)

func TestJobManagedBy(t *testing.T) {
	const app = "containers: [{name: migrate, image: busybox}]"
	managedBy := func(manifest, value string) string {
		return strings.Replace(manifest, "spec:\n  template:\n", "spec:\n  managedBy: "+value+"\n  template:\n", 1)
	}
	runClause(t, []clauseCase{
		{"another controller", managedBy(job(app, false), "example.com/x"), []string{"job-managed-by@spec.managedBy"}},
		{"MultiKueue, on a hook Job", managedBy(job(app, true), "kueue.x-k8s.io/multikueue"), []string{"job-managed-by@spec.managedBy"}},
		{"empty", managedBy(job(app, false), `""`), []string{"job-managed-by@spec.managedBy"}},
		{"near-miss: the cluster's Job controller", managedBy(job(app, false), "kubernetes.io/job-controller"), nil},
		{"near-miss: no managedBy", job(app, true), nil},
	})
}

func TestJobManagedByMessage(t *testing.T) {
	vs := Check(context.Background(), parse(t, strings.Replace(job("containers: [{name: migrate, image: busybox}]", false),
		"spec:\n  template:\n", "spec:\n  managedBy: example.com/x\n  template:\n", 1)), testContext())
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "set it to kubernetes.io/job-controller") || vs[0].Object.Kind != "Job" {
		t.Fatalf("the message should name the Job and say what to set: %+v", vs)
	}
}
