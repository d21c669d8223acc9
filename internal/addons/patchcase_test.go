package addons

import (
	"errors"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/strictjson"
)

// TestPatchedSpecMatchesFieldsInTheirOwnCase: a spec patch key that spells
// a field in another letter case is refused as an unknown field, with the
// field's spelling suggested, rather than set that field or, next to it,
// lose to whichever of the two the merged spec holds last.
func TestPatchedSpecMatchesFieldsInTheirOwnCase(t *testing.T) {
	a := &capstanv1.Addon{Spec: capstanv1.AddonSpec{DeletionPolicy: "Orphan", Chart: &capstanv1.ChartSource{URL: "https://charts.example/a-1.0.0.tgz"}}}
	for patch, want := range map[string]strictjson.UnknownField{
		`{"DeletionPolicy":"Delete"}`:                            {Path: "spec.DeletionPolicy", Suggest: "deletionPolicy"},
		`{"deletionPolicy":"Delete","DeletionPolicy":"Orphan"}`:  {Path: "spec.DeletionPolicy", Suggest: "deletionPolicy"},
		`{"chart":{"Url":"https://charts.example/b-1.0.0.tgz"}}`: {Path: "spec.chart.Url", Suggest: "url"},
	} {
		out, err := PatchedSpec(a, []byte(patch))
		var unknown *strictjson.UnknownField
		if !errors.Is(err, ErrBadPatch) || !errors.As(err, &unknown) || *unknown != want || out != nil {
			t.Errorf("PatchedSpec(%s) = %v; want ErrBadPatch naming %+v", patch, err, want)
		}
	}
	out, err := PatchedSpec(a, []byte(`{"deletionPolicy":"Delete","values":{"Replicas":1,"replicas":2}}`))
	if err != nil || out.Spec.DeletionPolicy != "Delete" || string(out.Spec.Values.Raw) != `{"Replicas":1,"replicas":2}` {
		t.Errorf("a patch in the fields' own case: %v, %+v; want it applied, keys of values kept as sent", err, out)
	}
}
