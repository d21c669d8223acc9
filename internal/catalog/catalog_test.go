package catalog

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestBuiltInEntriesAreValid(t *testing.T) {
	for _, e := range BuiltIn {
		if err := e.Validate(); err != nil {
			t.Errorf("built-in entry %s: %v", e.ID, err)
		}
	}
}

func TestOperatorEntries(t *testing.T) {
	cm := func(name, entry string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: name, Labels: map[string]string{Label: "true"}},
			Data: map[string]string{EntryKey: entry}}
	}
	c := fake.NewClientBuilder().WithObjects(
		cm("grafana", "id: grafana\ntitle: Grafana\nchart: {repo: 'https://grafana.github.io/helm-charts', name: grafana, version: 10.1.0}\nfields: [{path: replicas, label: Replicas, type: integer}]\n"),
		cm("broken", "id: Broken!\ntitle: x\n"),
		cm("typo", "id: typo\ntitel: Typo\n"),
		cm("longhorn", "id: longhorn\ntitle: Longhorn (our mirror)\nchart: {url: 'https://mirror.example/longhorn-1.10.2.tgz'}\n"),
	).Build()
	entries, problems, err := Entries(context.Background(), c, "capstan-system")
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]string{}
	for _, e := range entries {
		titles[e.ID] = e.Title + " / " + e.Source
	}
	if titles["grafana"] != "Grafana / ConfigMap grafana" || titles["longhorn"] != "Longhorn (our mirror) / ConfigMap longhorn" || titles["hajimari"] == "" {
		t.Errorf("entries = %v; want the operator's added, the built-in Longhorn replaced, the others kept", titles)
	}
	if len(problems) != 2 || !strings.Contains(problems[0].Message+problems[1].Message, "lower-case") || !strings.Contains(problems[0].Message+problems[1].Message, "titel") {
		t.Errorf("problems = %+v; want the bad id and the unknown field reported", problems)
	}
}
