package controller_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestHealthIsEveryObjectCurrent installs an add-on whose claim no volume
// takes: every object is judged by kstatus, so the add-on waits and names
// the claim; past spec.healthTimeout it is Failed with the same list. A
// volume for the claim then makes it Ready.
func TestHealthIsEveryObjectCurrent(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "claims", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {k: v}\n",
		"templates/pvc.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
	}})
	a := create(t, newAddon(ns, "claims", url))
	got := waitFor(t, a, 90*time.Second, "the add-on to wait for its claim", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "WaitingForWorkloads"
	})
	if msg := readyMessage(got); got.Status.Phase != capstanv1.PhaseProgressing || !strings.Contains(msg, "PersistentVolumeClaim "+ns+"/data") {
		t.Errorf("phase %s, message %q; want Progressing, naming the claim", got.Status.Phase, msg)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = &metav1.Duration{Duration: time.Second} })
	got = waitFor(t, a, 90*time.Second, "the health timeout", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseFailed
	})
	if msg := readyMessage(got); !strings.Contains(msg, "spec.healthTimeout") || !strings.Contains(msg, ns+"/data") {
		t.Errorf("the failure says %q; want the timeout and the claim", msg)
	}

	bindVolume(t, ns, "data")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = nil })
	waitPhase(t, a, capstanv1.PhaseSynced)
}
