package addons

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// FuzzPatchSpec applies any spec patch of the API's plan and edit bodies to
// an Addon. A patch is refused with ErrBadPatch, or it gives a spec that the
// same patch leaves as it is (a JSON merge patch is idempotent), and the
// Addon it was applied to is never changed.
func FuzzPatchSpec(f *testing.F) {
	for _, s := range []string{
		`{"chart":{"version":"1.2.4"}}`,
		`{"values":{"replicas":3,"image":null}}`,
		`{"chart":null,"git":{"url":"https://git.example/r.git","path":"apps/wiki"}}`,
		`{"valuesFrom":[{"kind":"Secret","name":"s","targetPath":"auth.password"}]}`,
		`{"suspend":true,"unknown":1}`,
		`{"chart":{"version":7}}`,
		`[]`, `null`, `"x"`, ``, `{}`,
	} {
		f.Add([]byte(s))
	}
	base := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "wiki"},
		Spec: capstanv1.AddonSpec{
			Chart:  &capstanv1.ChartSource{Repo: "https://charts.example/", Name: "wiki", Version: "1.2.3"},
			Values: &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1,"image":{"tag":"1"}}`)},
		},
	}
	f.Fuzz(func(t *testing.T, patch []byte) {
		a := base.DeepCopy()
		out, err := PatchedSpec(a, patch)
		if !reflect.DeepEqual(a, base) {
			t.Fatal("PatchedSpec changed the Addon it was given")
		}
		if err != nil {
			if !errors.Is(err, ErrBadPatch) || out != nil {
				t.Fatalf("a refusal that is not ErrBadPatch, or with an Addon: %v", err)
			}
			return
		}
		twice, err := PatchedSpec(out, patch)
		if err != nil {
			t.Fatalf("the patch applies once but not twice: %v", err)
		}
		x, _ := json.Marshal(out.Spec)
		y, _ := json.Marshal(twice.Spec)
		if string(x) != string(y) {
			t.Fatalf("the patch applied twice changed the spec:\n%s\n%s", x, y)
		}
	})
}
