package render

import (
	"context"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// BenchmarkRender10000Objects renders a chart of 10,000 ConfigMaps, the
// size an add-on is refused at (the controller's limit is 5,000), and
// reports the time and the memory one render takes: what a chart gone
// wrong costs before the limit stops it.
func BenchmarkRender10000Objects(b *testing.B) {
	ch := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "many", Version: "1.0.0"},
		Templates: []*common.File{{Name: "templates/many.yaml", Data: []byte(`{{- range $i := until 10000 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: many-{{ $i }}
data:
  index: "{{ $i }}"
{{- end }}
`)}},
	}
	opts := Options{ReleaseName: "many", Namespace: "many", Capabilities: testCaps}
	// NOTE: B/op is what one render allocates in all, an upper bound of
	// its share of the peak heap.
	b.ReportAllocs()
	for range b.N {
		res, err := Helm(context.Background(), ch, nil, opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Objects) != 10000 || !strings.HasPrefix(res.Objects[0].GetName(), "many-") {
			b.Fatalf("rendered %d objects", len(res.Objects))
		}
	}
}
