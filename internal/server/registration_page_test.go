package server

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRegistrationTextIsIsolated renders the list and the add-on page of
// an add-on whose manifest gave tiles and setup steps in a right-to-left
// script: each title, icon and step is isolated in a <bdi>, so that its
// direction cannot turn around the attribution shown beside it.
func TestRegistrationTextIsIsolated(t *testing.T) {
	a := capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "wiki"}}
	a.Status.Profile = capstanv1.ProfileRestricted
	a.Status.Registration = &capstanv1.Registration{Name: "wiki",
		Tiles: []capstanv1.Tile{{Title: "ויקי", Icon: "W", Link: "https://wiki.example/"}},
		// A step may hold line breaks and tabs: the page shows them, as
		// any white space of HTML text, as one space within its <bdi>.
		Setup: []string{"צור את הדף הראשון", "Open the page,\nthen\tsave it."}}
	for _, tc := range []struct {
		page string
		data pageData
		want []string
	}{
		{"list", pageData{Addons: []capstanv1.Addon{a}}, []string{"<bdi>ויקי</bdi></a> <small class=\"tile-from\">", "<bdi>W</bdi>"}},
		{"addon", pageData{Addon: &a}, []string{"<bdi>ויקי</bdi></a>", "<li><bdi>צור את הדף הראשון</bdi></li>", "<li><bdi>Open the page,\nthen\tsave it.</bdi></li>", "<bdi>W</bdi>"}},
	} {
		var out bytes.Buffer
		if err := pages()[tc.page].ExecuteTemplate(&out, "content", tc.data); err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the %s page does not isolate the manifest's text: no %q in\n%s", tc.page, want, out.String())
			}
		}
	}
}
