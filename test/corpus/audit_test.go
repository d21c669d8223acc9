package corpus_test

import (
	"strings"
	"testing"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"capstan.dev/capstan/internal/install"
)

// auditMark returns how many events the API server's audit log holds now;
// the events after it are the next step's.
func (s *suite) auditMark(t *testing.T) int {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	return len(events)
}

func (s *suite) auditSince(t *testing.T, mark int) []auditv1.Event {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	if mark > len(events) {
		t.Fatalf("the audit log shrank from %d to %d events", mark, len(events))
	}
	return events[mark:]
}

// createOrder lists, in the order the API server received them, the
// creations of hook objects (hooks: "group/Kind/name") by the users that
// byUser accepts. A hook recreated (before-hook-creation) appears again.
func (s *suite) createOrder(t *testing.T, mark int, hooks map[string]bool, byUser func(string) bool) []string {
	t.Helper()
	want := map[string]string{} // "resource/name" -> hook key
	for k := range hooks {
		group, rest, _ := strings.Cut(k, "/")
		kind, name, _ := strings.Cut(rest, "/")
		want[s.snap.resourceOf(group, kind)+"/"+name] = kind + "/" + name
	}
	var order []string
	for _, e := range s.auditSince(t, mark) {
		if e.Verb != "create" && !(e.Verb == "patch" && e.ResponseStatus != nil && e.ResponseStatus.Code == 201) ||
			e.ObjectRef == nil || dryRun(e) || !byUser(e.User.Username) {
			continue
		}
		if k, ok := want[e.ObjectRef.Resource+"/"+e.ObjectRef.Name]; ok {
			order = append(order, k)
		}
	}
	return order
}

// writesSince lists the writes to the cluster since mark by the
// controller, leaving out its Addons and events: what a sync changed.
func (s *suite) writesSince(t *testing.T, mark int) []string {
	t.Helper()
	var out []string
	for _, e := range s.auditSince(t, mark) {
		if e.User.Username != install.ControllerUser || e.ObjectRef == nil || dryRun(e) ||
			e.ObjectRef.APIGroup == "capstan.dev" || e.ObjectRef.Resource == "events" ||
			e.ObjectRef.Resource == "leases" {
			continue
		}
		out = append(out, e.Verb+" "+e.ObjectRef.Resource+" "+e.ObjectRef.Namespace+"/"+e.ObjectRef.Name)
	}
	return out
}

func dryRun(e auditv1.Event) bool {
	return strings.Contains(e.RequestURI, "dryRun=")
}
