package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/catalog"
)

// TestCatalogAddonTarget checks where a catalog form's Addon sends its
// objects: to the entry's namespace, created when missing, when the
// Addon's namespace is trusted; to the Addon's own (no target) elsewhere,
// and when the entry suggests no namespace.
func TestCatalogAddonTarget(t *testing.T) {
	longhorn, gitFolder := entry(t, "longhorn"), entry(t, "git-folder")
	gitFolder.Namespace = "apps"
	for _, tc := range []struct {
		name    string
		entry   catalog.Entry
		trusted bool
		target  string
	}{
		{"trusted chart", longhorn, true, "longhorn-system"},
		{"restricted chart", longhorn, false, ""},
		{"trusted git folder", gitFolder, true, "apps"},
		{"restricted git folder", gitFolder, false, ""},
		{"trusted, no suggested namespace", catalog.Entry{ID: "plain", Chart: longhorn.Chart}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"git": {"https://git.example/apps.git"}}
			r := httptest.NewRequest(http.MethodPost, "/catalog/"+tc.entry.ID, strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			v := &catalogView{Entry: &tc.entry, Fields: catalogFields(tc.entry), Namespace: "capstan-system", Name: tc.entry.ID}
			a, msg := catalogAddon(r, v, tc.trusted)
			if msg != "" {
				t.Fatal(msg)
			}
			if a.Namespace != "capstan-system" || a.Spec.TargetNamespace != tc.target || a.Spec.CreateNamespace != (tc.target != "") {
				t.Errorf("the Addon in %s sends its objects to %q (createNamespace %v); want %q",
					a.Namespace, a.Spec.TargetNamespace, a.Spec.CreateNamespace, tc.target)
			}
		})
	}
}

// TestCatalogFormSaysWhereObjectsGo renders an entry's form: it names the
// namespace field as the Addon's and says where the objects go.
func TestCatalogFormSaysWhereObjectsGo(t *testing.T) {
	e := entry(t, "longhorn")
	var buf bytes.Buffer
	v := &catalogView{Entry: &e, Fields: catalogFields(e), Namespace: e.Namespace, Name: e.ID, Trusted: []string{"capstan-system", "platform"}}
	if err := pages()["catalog"].ExecuteTemplate(&buf, "content", pageData{Catalog: v, CSRF: "csrf"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">Namespace of the Addon<", "Its objects go to <code>longhorn-system</code>",
		"(<code>capstan-system</code>, <code>platform</code>)", "in any other namespace they stay in the Addon's own"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the form lacks %q:\n%s", want, buf.String())
		}
	}
}

func entry(t *testing.T, id string) catalog.Entry {
	t.Helper()
	for _, e := range catalog.BuiltIn {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no built-in entry %s", id)
	return catalog.Entry{}
}
