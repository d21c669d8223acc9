package render

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// aliasBomb is a ConfigMap whose aliases nest levels deep, each level
// naming the one below four times: 4^levels lists of "lol" once expanded.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n  x0: &a0 [\"lol\"]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  x%d: &a%d [*a%d,*a%d,*a%d,*a%d]\n", i, i, i-1, i-1, i-1, i-1)
	}
	return b.String()
}

// anchoredDeployment reuses its labels and environment with anchors and a
// merge key, as folders written by hand do.
const anchoredDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: &labels
    app: web
    tier: front
spec:
  selector:
    matchLabels: *labels
  template:
    metadata:
      labels: *labels
    spec:
      containers:
        - name: web
          image: registry.example/web:1
          env: &env
            - name: MODE
              value: prod
        - name: sidecar
          image: registry.example/sidecar:1
          env: *env
          resources: &res
            limits: {cpu: 100m}
        - <<: {name: worker, image: "registry.example/worker:1"}
          env: *env
          resources: *res
`

func TestFolderBoundsAliases(t *testing.T) {
	kustomized := func(name, data string) fstest.MapFS {
		return fstest.MapFS{
			"app/kustomization.yaml": file("resources:\n  - " + name + "\n"),
			"app/" + name:            file(data),
		}
	}
	plain := func(name, data string) fstest.MapFS {
		return fstest.MapFS{"app/" + name: file(data)}
	}
	cases := []struct {
		name    string
		fsys    fstest.MapFS
		wantErr string
	}{
		{name: "kustomize: nested aliases", fsys: kustomized("cm.yaml", aliasBomb(7)), wantErr: "app/cm.yaml: its YAML aliases"},
		{name: "kustomize: nested aliases in a file of another name", fsys: kustomized("cm.txt", aliasBomb(7)), wantErr: "app/cm.txt: its YAML aliases"},
		{name: "kustomize: nested aliases in the kustomization", fsys: fstest.MapFS{
			"app/kustomization.yaml": file("resources: []\nx:\n" + strings.SplitN(aliasBomb(7), "data:\n", 2)[1]),
		}, wantErr: "app/kustomization.yaml: its YAML aliases"},
		{name: "kustomize: an alias inside its anchor", fsys: kustomized("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loop\nx: &a [*a]\n"),
			wantErr: "lies inside that anchor"},
		{name: "plain: nested aliases", fsys: plain("cm.yaml", aliasBomb(7)), wantErr: "app/cm.yaml: its YAML aliases"},
		// Each file adds some 3,200 nodes: the fourth takes the render past the bound.
		{name: "kustomize: aliases over several files", fsys: fstest.MapFS{
			"app/kustomization.yaml": file("resources: [a.yaml, b.yaml, c.yaml, d.yaml]\n"),
			"app/a.yaml":             file(strings.Replace(aliasBomb(5), "name: bomb", "name: a", 1)),
			"app/b.yaml":             file(strings.Replace(aliasBomb(5), "name: bomb", "name: b", 1)),
			"app/c.yaml":             file(strings.Replace(aliasBomb(5), "name: bomb", "name: c", 1)),
			"app/d.yaml":             file(strings.Replace(aliasBomb(5), "name: bomb", "name: d", 1)),
		}, wantErr: "app/d.yaml: its YAML aliases"},
		{name: "kustomize: anchors written by hand", fsys: kustomized("deploy.yaml", anchoredDeployment)},
		{name: "plain: anchors written by hand", fsys: plain("deploy.yaml", anchoredDeployment)},
		{name: "kustomize: a few nested aliases", fsys: kustomized("cm.yaml", aliasBomb(5))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Folder(tc.fsys, "app", SourceIdentity{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("error = %v, want none", err)
				}
				if len(res.Objects) != 1 {
					t.Fatalf("%d objects, want 1", len(res.Objects))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}
