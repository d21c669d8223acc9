package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// TestCapabilitiesKeepTheServersMajorAndMinor reads the capabilities of a
// server that reports its version as EKS and GKE do (minor "30+"), and
// renders a chart that prints them: Major and Minor are the server's, as
// helm install copies them, not the numbers of its GitVersion.
func TestCapabilitiesKeepTheServersMajorAndMinor(t *testing.T) {
	bodies := map[string]string{
		"/version": `{"major":"1","minor":"30+","gitVersion":"v1.30.4-eks-a737599"}`,
		"/api":     `{"kind":"APIVersions","versions":["v1"]}`,
		"/apis":    `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`,
		"/api/v1":  `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"configmaps","namespaced":true,"kind":"ConfigMap","verbs":["get"]}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	caps, err := CapabilitiesFromDiscovery(dc)
	if err != nil {
		t.Fatal(err)
	}
	ch := chartOf("caps", map[string]string{"cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: caps
data:
  version: {{ .Capabilities.KubeVersion.Version | quote }}
  major: {{ .Capabilities.KubeVersion.Major | quote }}
  minor: {{ .Capabilities.KubeVersion.Minor | quote }}
`})
	res, err := Helm(context.Background(), ch, nil, Options{ReleaseName: "c", Namespace: "default", Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"version": "v1.30.4-eks-a737599", "major": "1", "minor": "30+"}
	if diff := cmp.Diff(want, res.Objects[0].Object["data"]); diff != "" {
		t.Errorf(".Capabilities.KubeVersion (-want +got):\n%s", diff)
	}
	// Capabilities given with no Major or Minor, as `capstan render
	// --kube-version` gives them, take the numbers of the version.
	res, err = Helm(context.Background(), ch, nil, Options{ReleaseName: "c", Namespace: "default", Capabilities: &Capabilities{KubeVersion: "v1.30.4-eks-a737599"}})
	if err != nil {
		t.Fatal(err)
	}
	want["minor"] = "30"
	if diff := cmp.Diff(want, res.Objects[0].Object["data"]); diff != "" {
		t.Errorf(".Capabilities.KubeVersion without the server's (-want +got):\n%s", diff)
	}
}
