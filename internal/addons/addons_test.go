package addons

import (
	"reflect"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestReplaceTargets(t *testing.T) {
	ref := func(name, path string) capstanv1.ValuesReference {
		return capstanv1.ValuesReference{Kind: "Secret", Name: name, TargetPath: path}
	}
	from := []capstanv1.ValuesReference{ref("base", ""), ref("old", "auth.password"), ref("cm", "other")}
	got := replaceTargets(from, []capstanv1.ValuesReference{ref("new", "auth.password"), ref("new", "auth.token")})
	want := []capstanv1.ValuesReference{ref("base", ""), ref("new", "auth.password"), ref("cm", "other"), ref("new", "auth.token")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replaceTargets = %v; want %v", got, want)
	}
	if from[1].Name != "old" {
		t.Error("replaceTargets changed its input")
	}
}
