package render

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// TestKeysAndValuesRenderTheSameEachTime renders a chart that ranges over
// Sprig's keys and values with no sortAlpha, as many charts do. Go's map
// order would change the rendered lists from one render to the next, and
// each order would be drift on a sync.
func TestKeysAndValuesRenderTheSameEachTime(t *testing.T) {
	ch := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "env", Version: "1.0.0"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: env
data:
  keys: {{ keys .Values.env .Values.more | join "," | quote }}
  values: {{ values .Values.env | join "," | quote }}
`)}},
	}
	values := map[string]any{
		"env":  map[string]any{"h": "8", "c": "3", "j": "10", "a": "1", "e": "5", "b": "2", "g": "7", "i": "9", "d": "4", "f": "6"},
		"more": map[string]any{"z": "26", "y": "25", "x": "24"},
	}
	want := map[string]any{"keys": "a,b,c,d,e,f,g,h,i,j,x,y,z", "values": "1,2,3,4,5,6,7,8,9,10"}
	for i := range 20 {
		opts := Options{ReleaseName: "env", Namespace: "env", Capabilities: testCaps}
		if i == 0 {
			// The worker renders with the same functions.
			opts.Sandbox = sharedSandbox(t)
		}
		res, err := Helm(context.Background(), ch, values, opts)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, res.Objects[0].Object["data"]); diff != "" {
			t.Fatalf("render %d (-want +got):\n%s", i, diff)
		}
	}
}
