package v1alpha1

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestObjectIDRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		ref  ObjectRef
		text string
	}{
		{ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "frontend"}, "apps/v1 Deployment web/frontend"},
		{ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", Name: "settings"}, "v1 ConfigMap web/settings"},
		{ObjectRef{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "system:web-reader"}, "rbac.authorization.k8s.io/v1 ClusterRole system:web-reader"},
	} {
		data, err := json.Marshal(ObjectID{ObjectRef: tc.ref})
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(tc.text); string(data) != string(want) {
			t.Errorf("%v is written %s; want %s", tc.ref, data, want)
		}
		if !inventoryPattern.MatchString(tc.text) {
			t.Errorf("the CRD's pattern refuses %q", tc.text)
		}
		// Read into an ID that held an unreadable entry, as a decoder that
		// reuses a slice's elements does: nothing of it may stay.
		back := ObjectID{Unreadable: "{}"}
		if err := json.Unmarshal(data, &back); err != nil || back != (ObjectID{ObjectRef: tc.ref}) {
			t.Errorf("%s reads as %+v, %v; want %v", data, back, err, tc.ref)
		}
	}
}

// An entry of the four fields an inventory held before this form is kept
// as unreadable, not read as an empty reference: the API server, pruning by
// the string schema, hands such an entry back as {}, and an empty reference
// would leave the object it named out of every prune and uninstall. Nor is
// it an error: one such Addon would fail the decoding of a whole list.
func TestObjectIDKeepsTheFourFieldsUnreadable(t *testing.T) {
	for _, tc := range []struct{ stored, kept string }{
		{`{"inventory":["v1 ConfigMap web/a",{}]}`, `[1] {}`},
		{`{"inventory":["v1 ConfigMap web/a", {"apiVersion": "apps/v1","kind":"Deployment","namespace":"web","name":"frontend"}]}`,
			`[1] {"apiVersion":"apps/v1","kind":"Deployment","namespace":"web","name":"frontend"}`},
		{`{"inventory":["v1 ConfigMap web/a",""]}`, `[1] ""`},
		{`{"inventory":["v1 ConfigMap web/a",null]}`, `[1] null`},
	} {
		var st AddonStatus
		if err := json.Unmarshal([]byte(tc.stored), &st); err != nil {
			t.Errorf("%s: %v; want it read, with the entry kept as unreadable", tc.stored, err)
			continue
		}
		if bad := UnreadableEntries(st.Inventory); len(bad) != 1 || bad[0] != tc.kept {
			t.Errorf("%s: unreadable entries %q; want [%s]", tc.stored, bad, tc.kept)
		}
		if st.Inventory[1].ObjectRef != (ObjectRef{}) || st.Inventory[0].Name != "a" {
			t.Errorf("%s read as %v", tc.stored, RefsOf(st.Inventory))
		}
		// Written back unchanged, so that a patch computed from it leaves
		// the entry alone.
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var st2 AddonStatus
		if err := json.Unmarshal(again, &st2); err != nil || len(UnreadableEntries(st2.Inventory)) != 1 {
			t.Errorf("%s: written back as %s (%v)", tc.stored, again, err)
		}
	}
}

func TestObjectIDRefusesWhatNamesNoObject(t *testing.T) {
	for _, text := range []string{
		"", "v1", "v1 ConfigMap", "v1 ConfigMap web/", "v1 ConfigMap /settings",
		"v1 ConfigMap web/settings/x", "v1  ConfigMap web/settings", "v1 ConfigMap web/settings extra",
	} {
		var id ObjectID
		err := id.UnmarshalText([]byte(text))
		if err == nil {
			t.Errorf("%q read as %v; want an error", text, id.ObjectRef)
		} else if !strings.Contains(err.Error(), "apiVersion Kind") && !strings.Contains(err.Error(), "namespace/name") {
			t.Errorf("%q: the error %q does not say what an entry looks like", text, err)
		}
		if inventoryPattern.MatchString(text) {
			t.Errorf("the CRD's pattern accepts %q", text)
		}
		data, _ := json.Marshal(text)
		if err := json.Unmarshal(data, &id); err != nil || id.Unreadable != string(data) {
			t.Errorf("%q is kept as %q (%v); want it unreadable", text, id.Unreadable, err)
		}
	}
}

// inventoryPattern is the CRD's pattern for one inventory entry, as the
// marker on ObjectID writes it.
var inventoryPattern = regexp.MustCompile(`^[^ /]+(/[^ /]+)? [^ /]+ ([^ /]+/)?[^ /]+$`)

// The pattern above is the one the CRD carries.
func TestInventoryPatternIsTheCRDs(t *testing.T) {
	crd, err := os.ReadFile("../../config/crd/bases/capstan.dev_addons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(crd), "pattern: "+inventoryPattern.String()+"\n") {
		t.Errorf("the CRD has no inventory pattern %s: run make generate", inventoryPattern)
	}
}
