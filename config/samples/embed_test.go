package samples

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestSampleNginxPorts reads every Deployment of the gitops samples: a
// stock nginx image serves on port 80, so a container of one that declares
// another port would leave its Service's targetPort with nothing behind it.
func TestSampleNginxPorts(t *testing.T) {
	seen := 0
	err := fs.WalkDir(FS, "gitops", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := FS.ReadFile(path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var dep appsv1.Deployment
			if err := dec.Decode(&dep); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if dep.Kind != "Deployment" {
				continue
			}
			for _, c := range dep.Spec.Template.Spec.Containers {
				if !strings.HasPrefix(c.Image, "nginx:") {
					continue
				}
				seen++
				for _, p := range c.Ports {
					if p.ContainerPort != 80 {
						t.Errorf("%s: Deployment %s's container %s (%s) declares port %d; stock nginx serves on 80", path, dep.Name, c.Name, c.Image, p.ContainerPort)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no sample runs nginx: this test checks nothing")
	}
}
