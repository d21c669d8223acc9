package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestInstallIntoNewNamespaceChecksFirst installs charts whose objects go
// into a namespace the sync creates, so the plan could not dry-run them,
// and one of which the API server refuses. Once the namespace exists, the
// install stops with nothing but the namespace left, whichever object is
// refused:
//   - an inert object (a Service) refused when it is applied: the inert
//     objects this install created (a ConfigMap) are deleted again;
//   - a workload (a Deployment), the one object that is not inert, refused
//     when it is applied last, with no dry run: it is never created, and
//     the inert objects applied before it are deleted again;
//   - two workloads: the first in the apply's order is applied with no dry
//     run, once the other passed its dry run. Whether the first is refused
//     when it is applied or the second in its dry run, neither is ever
//     created, and the inert objects are deleted again;
//   - with a pre-install hook, which must run before anything but the
//     namespace exists, every object is dry-run, and nothing is created at
//     all, the hook included.
//
// What was created and deleted is read from the API server's audit log.
func TestInstallIntoNewNamespaceChecksFirst(t *testing.T) {
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  k: v\n"
	badService := "apiVersion: v1\nkind: Service\nmetadata:\n  name: refused\nspec:\n  selector: {app: x}\n  ports:\n    - port: 99999\n"
	badDeployment := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: refused
spec:
  replicas: -1
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers: [{name: x, image: registry.example/x:1}]
`
	goodDeployment := strings.NewReplacer("name: refused", "name: good", "replicas: -1", "replicas: 1").Replace(badDeployment)
	// NOTE: a chart's templates of one kind apply in the order of their
	// file names.
	hook := `apiVersion: v1
kind: ConfigMap
metadata:
  name: hook
  annotations:
    helm.sh/hook: pre-install
data:
  k: v
`
	for i, tc := range []struct {
		name     string
		files    map[string]string
		refused  string // the kind and name the failure names
		reason   string // a word of the API server's reason
		creates  []string
		noCreate []string // objects never created, not even for a moment
		dryRun   []string // objects dry-run before any workload was applied
		noDryRun []string // objects applied with no dry run
	}{
		{name: "an inert object refused", files: map[string]string{"templates/cm.yaml": configMap, "templates/svc.yaml": badService},
			refused: "Service", reason: "99999", creates: []string{"configmaps/first"}},
		{name: "a workload refused when it is applied last", files: map[string]string{"templates/cm.yaml": configMap, "templates/deploy.yaml": badDeployment},
			refused: "Deployment", reason: "replicas", creates: []string{"configmaps/first"}, noCreate: []string{"deployments/refused"}},
		{name: "two workloads, the first refused when it is applied", files: map[string]string{"templates/cm.yaml": configMap, "templates/deploy.yaml": badDeployment, "templates/good.yaml": goodDeployment},
			refused: "Deployment", reason: "replicas", creates: []string{"configmaps/first"}, noCreate: []string{"deployments/refused", "deployments/good"},
			dryRun: []string{"deployments/good"}, noDryRun: []string{"deployments/refused"}},
		{name: "two workloads, the second refused in its dry run", files: map[string]string{"templates/cm.yaml": configMap, "templates/a-good.yaml": goodDeployment, "templates/deploy.yaml": badDeployment},
			refused: "Deployment", reason: "replicas", creates: []string{"configmaps/first"}, noCreate: []string{"deployments/refused", "deployments/good"},
			dryRun: []string{"deployments/refused"}, noDryRun: []string{"deployments/good"}},
		{name: "with a pre-install hook, everything dry-run", files: map[string]string{"templates/cm.yaml": configMap, "templates/svc.yaml": badService, "templates/hook.yaml": hook},
			refused: "Service", reason: "99999", noCreate: []string{"configmaps/first", "configmaps/hook"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("verify-%d-%d", i, time.Now().UnixNano()%100000)
			url, _ := charts.publish(t, chart{name: fmt.Sprintf("refused%d", i), version: "1.0.0", files: tc.files})
			a := create(t, newAddon(controllerNS, ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.CreateNamespace = true })))
			// NOTE: the first sync stops while it installs; the next finds
			// the namespace and refuses in its plan. Both name the object.
			failedWith(t, a, "refused "+tc.refused+" "+ns+"/refused", tc.reason)
			if live(t, "v1", "Namespace", "", ns) == nil {
				t.Error("the namespace of spec.createNamespace was not created")
			}
			if live(t, "v1", "ConfigMap", ns, "first") != nil {
				t.Error("the ConfigMap is left applied though another object of the install was refused")
			}
			writes := auditedWrites(t, ns)
			for _, o := range tc.creates {
				if !strings.Contains(writes[o], "create") || !strings.Contains(writes[o], "delete") {
					t.Errorf("%s: %q; want it created by the install and deleted again", o, writes[o])
				}
			}
			for _, o := range tc.noCreate {
				if strings.Contains(writes[o], "create") {
					t.Errorf("%s: %q; want it never created", o, writes[o])
				}
			}
			// NOTE: the first sync's requests only: the next one plans
			// with the namespace there, and dry-runs everything.
			dry := firstDryRuns(t, ns)
			for _, o := range tc.dryRun {
				if dry[o] == 0 {
					t.Errorf("%s was not dry-run in the install; want it dry-run before any workload was applied", o)
				}
			}
			for _, o := range tc.noDryRun {
				if dry[o] != 0 {
					t.Errorf("%s was dry-run %d times in the install; want it applied with no dry run", o, dry[o])
				}
			}
		})
	}
}

// auditedWrites lists, from the API server's audit log, the writes that
// were not dry runs in namespace ns, by resource/name: "create" for a
// write that created the object, "delete" for a deletion, in order.
func auditedWrites(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range auditedIn(t, ns) {
		if strings.Contains(e.RequestURI, "dryRun") || e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			continue
		}
		key := e.ObjectRef.Resource + "/" + e.ObjectRef.Name
		switch {
		case e.ResponseStatus.Code == 201:
			out[key] += "create "
		case e.Verb == "delete":
			out[key] += "delete "
		}
	}
	return out
}

// firstDryRuns counts, by resource/name, the dry-run applies in namespace ns
// from the API server's audit log until the install deleted its inert
// objects again: the dry runs of the install's first sync.
func firstDryRuns(t *testing.T, ns string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range auditedIn(t, ns) {
		if e.Verb == "delete" {
			break
		}
		if e.Verb == "patch" && strings.Contains(e.RequestURI, "dryRun") {
			out[e.ObjectRef.Resource+"/"+e.ObjectRef.Name]++
		}
	}
	return out
}

// auditedIn is the API server's audit log of the objects in namespace ns,
// their subresources left out, in order.
func auditedIn(t *testing.T, ns string) []auditv1.Event {
	t.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []auditv1.Event
	for _, e := range events {
		if o := e.ObjectRef; o != nil && o.Namespace == ns && o.Subresource == "" {
			out = append(out, e)
		}
	}
	return out
}
