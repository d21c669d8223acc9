package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
)

// healthObj builds a live object of apiVersion and kind, changed by opts.
func healthObj(apiVersion, kind string, opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("apps")
	u.SetName("x")
	for _, o := range opts {
		o(u)
	}
	return u
}

// withField sets one field, by its path, to v.
func withField(v any, path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, v, path...); err != nil {
			panic(err)
		}
	}
}

// withConditions sets status.conditions.
func withConditions(conds ...map[string]any) func(*unstructured.Unstructured) {
	list := make([]any, len(conds))
	for i, c := range conds {
		list[i] = c
	}
	return withField(list, "status", "conditions")
}

func withGeneration(g int64) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { u.SetGeneration(g) }
}

// cond is a condition; with observedGeneration when og is not 0.
func cond(typ, st string, og int64) map[string]any {
	c := map[string]any{"type": typ, "status": st}
	if og != 0 {
		c["observedGeneration"] = og
	}
	return c
}

// TestComputeHealth checks Capstan's rules on top of kstatus: each case
// says what kstatus alone makes of the object, so that the rules are seen
// to change only what the health page promises otherwise.
func TestComputeHealth(t *testing.T) {
	job := func(opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return healthObj("batch/v1", "Job", append([]func(*unstructured.Unstructured){withGeneration(1)}, opts...)...)
	}
	started := withField("2026-12-05T10:00:00Z", "status", "startTime")
	pod := func(phase string, opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return healthObj("v1", "Pod", append([]func(*unstructured.Unstructured){withField(phase, "status", "phase")}, opts...)...)
	}
	sts := func(strategy string, opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return healthObj("apps/v1", "StatefulSet", append([]func(*unstructured.Unstructured){withGeneration(1),
			withField(int64(1), "status", "observedGeneration"), withField(strategy, "spec", "updateStrategy", "type")}, opts...)...)
	}
	ds := func(strategy string, generation, observed, desired, ready, updated int64) *unstructured.Unstructured {
		return healthObj("apps/v1", "DaemonSet", withGeneration(generation), withField(strategy, "spec", "updateStrategy", "type"),
			withField(observed, "status", "observedGeneration"), withField(desired, "status", "desiredNumberScheduled"),
			withField(desired, "status", "currentNumberScheduled"), withField(ready, "status", "numberReady"),
			withField(ready, "status", "numberAvailable"), withField(updated, "status", "updatedNumberScheduled"))
	}
	apiService := func(opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return healthObj("apiregistration.k8s.io/v1", "APIService", opts...)
	}
	cert := func(opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return healthObj("cert-manager.io/v1", "Certificate", opts...)
	}
	deleting := func(u *unstructured.Unstructured) { now := metav1.Now(); u.SetDeletionTimestamp(&now) }

	cases := []struct {
		name    string
		obj     *unstructured.Unstructured
		kstatus status.Status // what kstatus alone says
		want    status.Status
		says    string
	}{
		{"a Job running, after three failed pods", job(started, withField(int64(1), "status", "active"), withField(int64(3), "status", "failed")),
			status.CurrentStatus, status.InProgressStatus, "Job has not completed: active 1, succeeded 0, failed 3"},
		{"a Job started, its pod not created yet", job(started),
			status.CurrentStatus, status.InProgressStatus, "Job has not completed"},
		{"a Job whose Complete is False", job(started, withConditions(cond("Complete", "False", 0))),
			status.CurrentStatus, status.InProgressStatus, "Job has not completed"},
		{"a Job not started", job(), status.InProgressStatus, status.InProgressStatus, "Job not started"},
		{"a Job complete", job(started, withField(int64(1), "status", "succeeded"), withConditions(cond("SuccessCriteriaMet", "True", 0), cond("Complete", "True", 0))),
			status.CurrentStatus, status.CurrentStatus, ""},
		{"a Job failed", job(started, withConditions(cond("Failed", "True", 0))), status.FailedStatus, status.FailedStatus, "Job Failed"},
		{"a Job being deleted", job(started, deleting), status.TerminatingStatus, status.TerminatingStatus, ""},

		{"a Pod failed", pod("Failed", withField([]any{map[string]any{"name": "m", "state": map[string]any{"terminated": map[string]any{"exitCode": int64(2), "reason": "Error"}}}}, "status", "containerStatuses")),
			status.CurrentStatus, status.FailedStatus, "Pod is in phase Failed: container m exited with code 2 (Error)"},
		{"a Pod evicted", pod("Failed", withField("Evicted", "status", "reason")),
			status.CurrentStatus, status.FailedStatus, "Pod is in phase Failed (Evicted)"},
		{"a Pod failed, saying nothing", pod("Failed"), status.CurrentStatus, status.FailedStatus, "Pod is in phase Failed"},
		{"a Pod succeeded", pod("Succeeded"), status.CurrentStatus, status.CurrentStatus, ""},
		{"a Pod running and ready", pod("Running", withConditions(cond("Ready", "True", 0))), status.CurrentStatus, status.CurrentStatus, ""},
		{"a Pod running, not ready", pod("Running"), status.InProgressStatus, status.InProgressStatus, ""},

		{"an OnDelete StatefulSet with no pod ready", sts("OnDelete", withField(int64(3), "spec", "replicas")),
			status.CurrentStatus, status.InProgressStatus, "Ready: 0/3"},
		{"an OnDelete StatefulSet, replicas unset, none ready", sts("OnDelete"),
			status.CurrentStatus, status.InProgressStatus, "Ready: 0/1"},
		{"an OnDelete StatefulSet ready, its pods of the old template", sts("OnDelete", withField(int64(3), "spec", "replicas"),
			withField(int64(3), "status", "readyReplicas"), withField(int64(1), "status", "updatedReplicas")),
			status.CurrentStatus, status.CurrentStatus, ""},
		{"an OnDelete StatefulSet scaled to zero", sts("OnDelete", withField(int64(0), "spec", "replicas")), status.CurrentStatus, status.CurrentStatus, ""},
		{"a RollingUpdate StatefulSet with no pod ready", sts("RollingUpdate", withField(int64(3), "spec", "replicas"), withField(int64(3), "status", "replicas")),
			status.InProgressStatus, status.InProgressStatus, "Ready: 0/3"},

		{"an OnDelete DaemonSet upgraded, its pods ready of the old template", ds("OnDelete", 2, 2, 3, 3, 0),
			status.InProgressStatus, status.CurrentStatus, ""},
		{"an OnDelete DaemonSet with one pod of three ready", ds("OnDelete", 2, 2, 3, 1, 3),
			status.InProgressStatus, status.InProgressStatus, "Ready: 1/3"},
		{"an OnDelete DaemonSet its controller has not seen", ds("OnDelete", 2, 1, 3, 3, 3),
			status.InProgressStatus, status.InProgressStatus, "latest observed generation is 1"},
		{"an OnDelete DaemonSet on no node", ds("OnDelete", 1, 1, 0, 0, 0), status.CurrentStatus, status.CurrentStatus, ""},
		{"a RollingUpdate DaemonSet upgraded, no pod updated", ds("RollingUpdate", 2, 2, 3, 3, 0),
			status.InProgressStatus, status.InProgressStatus, "Updated: 0/3"},

		{"an APIService not Available", apiService(withConditions(map[string]any{"type": "Available", "status": "False",
			"reason": "FailedDiscoveryCheck", "message": "failing or missing response from https://10.96.0.9:443"})),
			status.CurrentStatus, status.InProgressStatus, "APIService is not Available (FailedDiscoveryCheck): failing or missing response"},
		{"an APIService with no condition yet", apiService(), status.CurrentStatus, status.InProgressStatus, "APIService is not Available yet"},
		{"an APIService Available", apiService(withConditions(cond("Available", "True", 0))), status.CurrentStatus, status.CurrentStatus, ""},

		{"a Certificate whose Ready is the generation before", cert(withGeneration(2), withConditions(cond("Ready", "True", 1))),
			status.CurrentStatus, status.InProgressStatus, "its condition Ready describes generation 1 and metadata.generation is 2"},
		{"a Certificate whose Ready is the latest generation's", cert(withGeneration(2), withConditions(cond("Ready", "True", 2))),
			status.CurrentStatus, status.CurrentStatus, ""},
		{"a Certificate whose Ready names no generation", cert(withGeneration(2), withConditions(cond("Ready", "True", 0))),
			status.CurrentStatus, status.CurrentStatus, ""},
		{"a condition the judgement does not read, of the generation before", cert(withGeneration(3), withConditions(cond("Ready", "True", 3), cond("Issuing", "False", 2))),
			status.CurrentStatus, status.CurrentStatus, ""},
		{"a one-time Initialized of the first generation", cert(withGeneration(4), withConditions(cond("Initialized", "True", 1), cond("Ready", "True", 4))),
			status.CurrentStatus, status.CurrentStatus, ""},
		{"a Reconciling of the generation before", cert(withGeneration(3), withConditions(cond("Ready", "True", 3), cond("Reconciling", "False", 2))),
			status.CurrentStatus, status.InProgressStatus, "its condition Reconciling describes generation 2"},
		{"an APIService whose Available is the generation before", apiService(withGeneration(2), withConditions(cond("Available", "True", 1))),
			status.CurrentStatus, status.InProgressStatus, "its condition Available describes generation 1"},
		{"a Stalled condition of the generation before", cert(withGeneration(2), withConditions(cond("Stalled", "True", 1))),
			status.FailedStatus, status.InProgressStatus, "describes generation 1"},
		{"a status.observedGeneration of the generation before", cert(withGeneration(2), withField(int64(1), "status", "observedGeneration"), withConditions(cond("Ready", "True", 0))),
			status.InProgressStatus, status.InProgressStatus, "latest observed generation is 1"},
		{"a paused Deployment whose template changed", healthObj("apps/v1", "Deployment", withGeneration(2), withField(true, "spec", "paused"),
			withField(int64(2), "status", "observedGeneration"), withField(int64(3), "spec", "replicas"), withField(int64(3), "status", "replicas"),
			withField(int64(3), "status", "readyReplicas"), withField(int64(3), "status", "availableReplicas"), withField(int64(0), "status", "updatedReplicas"),
			withConditions(map[string]any{"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused"}, cond("Available", "True", 0))),
			status.InProgressStatus, status.CurrentStatus, "Deployment is paused"},
		{"a paused Deployment whose pods are not available", healthObj("apps/v1", "Deployment", withGeneration(2), withField(true, "spec", "paused"),
			withField(int64(2), "status", "observedGeneration"), withField(int64(3), "spec", "replicas"), withField(int64(3), "status", "replicas"),
			withField(int64(0), "status", "readyReplicas"), withField(int64(0), "status", "availableReplicas"), withField(int64(0), "status", "updatedReplicas"),
			withConditions(map[string]any{"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused"}, cond("Available", "False", 0))),
			status.InProgressStatus, status.InProgressStatus, ""},
		{"a Deployment created paused", healthObj("apps/v1", "Deployment", withGeneration(1), withField(true, "spec", "paused"),
			withField(int64(1), "status", "observedGeneration"), withField(int64(3), "spec", "replicas"),
			withConditions(map[string]any{"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused"},
				map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"})),
			status.InProgressStatus, status.CurrentStatus, "Deployment is paused"},
		{"a paused Deployment its controller has not seen", healthObj("apps/v1", "Deployment", withGeneration(3), withField(true, "spec", "paused"),
			withField(int64(2), "status", "observedGeneration"), withField(int64(3), "spec", "replicas"), withField(int64(3), "status", "replicas"),
			withField(int64(3), "status", "readyReplicas"), withField(int64(3), "status", "availableReplicas"),
			withConditions(cond("Available", "True", 0))),
			status.InProgressStatus, status.InProgressStatus, "latest observed generation is 2"},
		{"a Deployment rolling out", healthObj("apps/v1", "Deployment", withGeneration(2),
			withField(int64(2), "status", "observedGeneration"), withField(int64(3), "spec", "replicas"), withField(int64(3), "status", "replicas"),
			withField(int64(3), "status", "readyReplicas"), withField(int64(3), "status", "availableReplicas"), withField(int64(0), "status", "updatedReplicas"),
			withConditions(cond("Available", "True", 0))),
			status.InProgressStatus, status.InProgressStatus, "Updated: 0/3"},
		{"a ConfigMap", healthObj("v1", "ConfigMap"), status.CurrentStatus, status.CurrentStatus, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			alone, err := status.Compute(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			if alone.Status != c.kstatus {
				t.Errorf("kstatus alone says %s (%s); the case expects %s", alone.Status, alone.Message, c.kstatus)
			}
			got, err := computeHealth(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != c.want || !strings.Contains(got.Message, c.says) {
				t.Errorf("computeHealth: %s (%q); want %s saying %q", got.Status, got.Message, c.want, c.says)
			}
		})
	}
}

// TestObjectHealthUsesTheRules checks that the health step and the wave
// wait, which share objectHealth, judge by the rules: a Job that runs is
// not Current, a failed Pod failed.
func TestObjectHealthUsesTheRules(t *testing.T) {
	running := healthObj("batch/v1", "Job", withField("2026-12-05T10:00:00Z", "status", "startTime"), withField(int64(1), "status", "active"))
	current, failed, why := objectHealth(running, running, nil, nil)
	if current || failed || !strings.Contains(why, "Job apps/x: Job has not completed") {
		t.Errorf("a running Job: current %v, failed %v, %q", current, failed, why)
	}
	pod := healthObj("v1", "Pod", withField("Failed", "status", "phase"))
	current, failed, why = objectHealth(pod, pod, nil, nil)
	if current || !failed || !strings.Contains(why, "Pod apps/x: failed: Pod is in phase Failed") {
		t.Errorf("a failed Pod: current %v, failed %v, %q", current, failed, why)
	}
}

// TestAStatusKstatusCannotReadIsNotCurrent: a custom resource whose status
// kstatus cannot decode is that one object not Current, saying why and
// what to do, not an error that would end the look at every other object
// of the add-on at each reconcile. A health check of its kind judges it
// as before.
func TestAStatusKstatusCannotReadIsNotCurrent(t *testing.T) {
	odd := func(opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return healthObj("example.com/v1", "Widget", append([]func(*unstructured.Unstructured){withGeneration(1)}, opts...)...)
	}
	for _, c := range []struct {
		name string
		obj  *unstructured.Unstructured
	}{
		{"conditions as a map", odd(withField(map[string]any{"ready": true}, "status", "conditions"))},
		{"a condition's status a bool", odd(withConditions(map[string]any{"type": "Ready", "status": true}))},
		{"observedGeneration a string", odd(withField("1", "status", "observedGeneration"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := status.Compute(c.obj); err == nil {
				t.Fatal("kstatus reads this status; the case tests nothing")
			}
			current, failed, why := objectHealth(c.obj, c.obj, nil, nil)
			if current || failed || !strings.Contains(why, "Widget apps/x: its status cannot be read: ") ||
				!strings.HasSuffix(why, "; set spec.healthChecks for this kind") {
				t.Errorf("current %v, failed %v, %q; want not Current, saying its status cannot be read", current, failed, why)
			}
			checks, err := health.Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "true"}})
			if err != nil {
				t.Fatal(err)
			}
			if current, _, why := objectHealth(c.obj, c.obj, checks, nil); !current {
				t.Errorf("with a health check of its kind: not Current (%q)", why)
			}
		})
	}
}

// TestHealthyConditionMessageIsBounded: the objects' reasons quote their
// own condition messages, which may each be as long as the API server
// takes; the Healthy condition names five of them and must still fit the
// CRD's limit of a condition message (32768 bytes), or every status write
// is refused.
func TestHealthyConditionMessageIsBounded(t *testing.T) {
	long := strings.Repeat("the pod cannot be scheduled ", 1200) // about 33 KiB
	for _, failed := range []bool{false, true} {
		j := &judgement{failed: failed}
		for range 7 {
			j.notCurrent = append(j.notCurrent, "Deployment apps/x: "+long)
		}
		c := j.condition(1)
		if len(c.Message) > 32768 {
			t.Fatalf("failed %v: a Healthy message of %d bytes", failed, len(c.Message))
		}
		for _, part := range strings.Split(strings.TrimSuffix(c.Message, "; and 2 more"), "; ") {
			if len(part) > maxReason {
				t.Fatalf("failed %v: one object's reason is %d bytes: %.80q", failed, len(part), part)
			}
		}
		if !strings.HasSuffix(c.Message, "; and 2 more") {
			t.Fatalf("failed %v: the count of the others is lost: %q", failed, c.Message[len(c.Message)-40:])
		}
	}
}

// TestAClaimThatWaitsForItsConsumerIsCurrent: a Pending claim whose
// StorageClass binds for its first consumer is Current until the
// scheduler has placed that consumer; any other Pending claim is not.
func TestAClaimThatWaitsForItsConsumerIsCurrent(t *testing.T) {
	claim := func(class string, opts ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		opts = append([]func(*unstructured.Unstructured){withField("Pending", "status", "phase")}, opts...)
		if class != "" {
			opts = append(opts, withField(class, "spec", "storageClassName"))
		}
		return healthObj("v1", "PersistentVolumeClaim", opts...)
	}
	modes := func(class string) (string, error) {
		mode, ok := map[string]string{"late": "WaitForFirstConsumer", "now": "Immediate"}[class]
		if !ok {
			return "", &storageClassUnread{class: class, who: "the add-ons account"}
		}
		return mode, nil
	}
	selected := func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"volume.kubernetes.io/selected-node": "node-1"})
	}
	cases := []struct {
		name  string
		obj   *unstructured.Unstructured
		modes func(string) (string, error)
		want  bool
	}{
		{"waiting for its first consumer", claim("late"), modes, true},
		{"its consumer placed, the volume on the way", claim("late", selected), modes, false},
		{"a class that binds at once", claim("now"), modes, false},
		{"a class that cannot be read", claim("gone"), modes, false},
		{"no class", claim(""), modes, false},
		{"no reader of classes", claim("late"), nil, false},
		{"lost", claim("late", withField("Lost", "status", "phase")), modes, false},
	}
	for _, c := range cases {
		current, failed, why := objectHealth(c.obj, c.obj, nil, c.modes)
		if current != c.want || failed {
			t.Errorf("%s: current %v, failed %v (%q); want current %v", c.name, current, failed, why, c.want)
		}
	}
}

// TestAnUnreadStorageClassIsNamed: a Pending claim whose StorageClass
// health could not read is waited for until Bound, and its reason names
// the class, what failed and what to do, rather than only that the claim
// is not Bound.
func TestAnUnreadStorageClassIsNamed(t *testing.T) {
	claim := healthObj("v1", "PersistentVolumeClaim", withField("Pending", "status", "phase"), withField("fast", "spec", "storageClassName"))
	gr := schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}
	for _, c := range []struct {
		name string
		err  error
		want []string
	}{
		{"forbidden", apierrors.NewForbidden(gr, "fast", errors.New("RBAC: access denied")),
			[]string{`StorageClass "fast" could not be read`, "the controller's account may not get storageclasses (storage.k8s.io)", "ask the cluster's administrator to grant it get on storageclasses in a ClusterRole", "waited for until Bound"}},
		{"not found", nil,
			[]string{`StorageClass "fast" does not exist`, "create that StorageClass, or have the claim name one that exists"}},
		{"not found, as an error", apierrors.NewNotFound(gr, "fast"),
			[]string{`StorageClass "fast" does not exist`}},
		{"the API server failing", apierrors.NewServiceUnavailable("etcd is down"),
			[]string{`reading its StorageClass "fast" failed`, "the next look reads it again", "etcd is down"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := func(class string) (string, error) {
				return "", &storageClassUnread{class: class, who: "the controller's account", err: c.err}
			}
			current, failed, why := objectHealth(claim, claim, nil, read)
			if current || failed {
				t.Fatalf("current %v, failed %v (%q); want a claim waited for", current, failed, why)
			}
			if !strings.HasPrefix(why, "PersistentVolumeClaim ") {
				t.Errorf("reason %q; want it to name the claim first", why)
			}
			for _, w := range c.want {
				if !strings.Contains(why, w) {
					t.Errorf("reason %q; want it to say %q", why, w)
				}
			}
		})
	}
	// A class that was read names nothing of the read.
	read := func(string) (string, error) { return "Immediate", nil }
	if _, _, why := objectHealth(claim, claim, nil, read); strings.Contains(why, "StorageClass") {
		t.Errorf("reason %q; want no word of a read that worked", why)
	}
}

// TestJobCreatedSuspended: a Job the chart creates suspended, which its
// controller holds so, is Current: it runs when someone resumes it, and
// waiting for it would hold the add-on for ever. One suspended by another
// controller (Kueue, until it admits it) is in progress, and says why.
func TestJobCreatedSuspended(t *testing.T) {
	suspended := withConditions(map[string]any{"type": "Suspended", "status": "True", "reason": "JobSuspended"})
	live := healthObj("batch/v1", "Job", withGeneration(1), withField(true, "spec", "suspend"), suspended)
	createdSuspended := healthObj("batch/v1", "Job", withField(true, "spec", "suspend"))
	createdRunning := healthObj("batch/v1", "Job")

	if current, failed, why := objectHealth(createdSuspended, live, nil, nil); !current || failed {
		t.Errorf("a Job the chart creates suspended: current %v, failed %v, %q; want Current", current, failed, why)
	}
	current, failed, why := objectHealth(createdRunning, live, nil, nil)
	if current || failed || !strings.Contains(why, "Job is suspended") {
		t.Errorf("a Job another controller suspends: current %v, failed %v, %q; want in progress, saying it is suspended", current, failed, why)
	}
	// Created suspended, but its controller has not held it yet: no
	// Suspended condition, and it is judged as any Job.
	fresh := healthObj("batch/v1", "Job", withGeneration(1), withField(true, "spec", "suspend"))
	if current, _, _ := objectHealth(createdSuspended, fresh, nil, nil); current {
		t.Error("a Job with no Suspended condition yet is Current; want it judged as any Job")
	}
	// Created suspended for a queue (Kueue's own example), or for another
	// controller (spec.managedBy): in progress until it runs.
	for name, manifest := range map[string]*unstructured.Unstructured{
		"a queue label":      healthObj("batch/v1", "Job", withField(true, "spec", "suspend"), withField("batch", "metadata", "labels", "kueue.x-k8s.io/queue-name")),
		"a queue annotation": healthObj("batch/v1", "Job", withField(true, "spec", "suspend"), withField("batch", "metadata", "annotations", "kueue.x-k8s.io/queue-name")),
		"spec.managedBy":     healthObj("batch/v1", "Job", withField(true, "spec", "suspend"), withField("kueue.x-k8s.io/multikueue", "spec", "managedBy")),
	} {
		if current, failed, _ := objectHealth(manifest, live, nil, nil); current || failed {
			t.Errorf("a Job created suspended with %s: current %v, failed %v; want in progress", name, current, failed)
		}
	}
	// Resumed and completed: Current by its Complete condition.
	done := healthObj("batch/v1", "Job", withGeneration(1), withField("2026-12-05T10:00:00Z", "status", "startTime"),
		withConditions(map[string]any{"type": "Suspended", "status": "False"}, map[string]any{"type": "Complete", "status": "True"}))
	if current, _, why := objectHealth(createdSuspended, done, nil, nil); !current {
		t.Errorf("a resumed Job that completed: %q; want Current", why)
	}
}

// TestLoadBalancerServiceCurrentWithoutAddress: a LoadBalancer Service
// is Current once it exists, with no address yet, as kstatus, Flux and
// Helm 4 judge it; the health page says so.
func TestLoadBalancerServiceCurrentWithoutAddress(t *testing.T) {
	svc := healthObj("v1", "Service", withField("LoadBalancer", "spec", "type"), withField("10.96.0.10", "spec", "clusterIP"),
		withField(map[string]any{}, "status", "loadBalancer"))
	if current, failed, why := objectHealth(svc, svc, nil, nil); !current || failed {
		t.Errorf("a LoadBalancer Service with no address: current %v, failed %v, %q; want Current", current, failed, why)
	}
}
