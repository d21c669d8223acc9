package server

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRemovalSaysWhatItDoes checks what the Remove form says and offers
// for each profile, deletion policy and uninstall mark, as the
// controller's deletion decides: from the profile the controller places
// the add-on in now (placed) and the one status.profile records, and from
// status.profile alone when the server's controller does not select it.
// A restricted add-on whose namespace is trusted now is left running, and
// keeps its values, as the controller's deletion leaves it.
func TestRemovalSaysWhatItDoes(t *testing.T) {
	for _, c := range []struct {
		name                  string
		profile, placed       capstanv1.Profile
		policy                capstanv1.DeletionPolicy
		marked                bool
		says                  string
		uninstall, keepValues bool
		deletesValues         bool
	}{
		{"restricted", capstanv1.ProfileRestricted, "", "", false, "uninstalls the software (a restricted add-on's default", false, true, true},
		{"restricted, Orphan", capstanv1.ProfileRestricted, "", capstanv1.DeletionOrphan, false, "leaves the software running (its spec.deletionPolicy is Orphan)", true, true, true},
		{"cluster", capstanv1.ProfileCluster, "", "", false, "leaves the software running (a cluster add-on's default", true, false, false},
		{"cluster, Delete", capstanv1.ProfileCluster, "", capstanv1.DeletionDelete, false, "uninstalls the software (its spec.deletionPolicy is Delete)", false, false, false},
		{"cluster, marked", capstanv1.ProfileCluster, "", capstanv1.DeletionOrphan, true, "uninstalls the software (it is marked", false, false, false},
		{"no profile yet", "", "", "", false, "not placed this add-on in a profile yet", true, true, false},
		{"no profile yet, Delete", "", "", capstanv1.DeletionDelete, false, "uninstalls the software", false, true, false},
		{"restricted, placed restricted", capstanv1.ProfileRestricted, capstanv1.ProfileRestricted, "", false, "uninstalls the software (a restricted add-on's default", false, true, true},
		{"restricted, trusted now", capstanv1.ProfileRestricted, capstanv1.ProfileCluster, "", false, "leaves the software running (it was installed restricted, but its namespace is trusted now", true, false, false},
		{"restricted, trusted now, marked", capstanv1.ProfileRestricted, capstanv1.ProfileCluster, "", true, "uninstalls the software (it is marked", false, false, false},
		{"cluster, placed restricted", capstanv1.ProfileCluster, capstanv1.ProfileRestricted, "", false, "leaves the software running (a cluster add-on's default", true, false, false},
		{"cluster, placed restricted, marked", capstanv1.ProfileCluster, capstanv1.ProfileRestricted, "", true, "an uninstall waits, and deletes nothing, until the namespace is trusted again", false, false, false},
		{"cluster, placed restricted, the box", capstanv1.ProfileCluster, capstanv1.ProfileRestricted, "", false, "unless you tick uninstall. It was installed under the cluster profile and its namespace is no longer trusted: an uninstall waits", true, false, false},
		{"restricted, another shard's", capstanv1.ProfileRestricted, "", "", false, "Another shard's controller reconciles it: if it trusts the namespace now", false, true, true},
		{"no profile yet, placed restricted", "", capstanv1.ProfileRestricted, "", false, "uninstalls the software (a restricted add-on's default", false, true, true},
		{"no profile yet, placed cluster", "", capstanv1.ProfileCluster, "", false, "leaves the software running (a cluster add-on's default", true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
			a.Spec.DeletionPolicy, a.Status.Profile = c.policy, c.profile
			if c.marked {
				a.Annotations = map[string]string{capstanv1.UninstallAnnotation: "true"}
			}
			r := removalOf(a, c.placed)
			if !strings.Contains(r.Says, c.says) || r.Uninstall != c.uninstall || r.KeepValues != c.keepValues {
				t.Errorf("%+v; want it to say %q, uninstall box %v, keep-values box %v", r, c.says, c.uninstall, c.keepValues)
			}
			if values := strings.Contains(r.Says, "values Secrets and generated values are deleted"); values != c.deletesValues {
				t.Errorf("%q: says the values are deleted: %v; want %v", r.Says, values, c.deletesValues)
			}
			var page bytes.Buffer
			if err := pages()["addon"].ExecuteTemplate(&page, "content", pageData{Addon: a, Placed: c.placed, Actions: true, Can: map[string]bool{"delete": true}}); err != nil {
				t.Fatal(err)
			}
			if box := strings.Contains(page.String(), `name="uninstall"`); box != c.uninstall {
				t.Errorf("the page offers the uninstall box: %v; want %v", box, c.uninstall)
			}
		})
	}
}
