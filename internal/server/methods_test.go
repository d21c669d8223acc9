package server

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestAllowedMethodsNamesTheRoutesOfAPath checks the methods a 405 names:
// those of the routes of the path asked, from either mux, never the
// catch-all's, and none for a path the API does not have.
func TestAllowedMethodsNamesTheRoutesOfAPath(t *testing.T) {
	api, outer := http.NewServeMux(), http.NewServeMux()
	nop := func(http.ResponseWriter, *http.Request) {}
	api.HandleFunc("GET /api/v1/namespaces/{namespace}/addons/{name}", nop)
	api.HandleFunc("PATCH /api/v1/namespaces/{namespace}/addons/{name}", nop)
	api.HandleFunc("DELETE /api/v1/namespaces/{namespace}/addons/{name}", nop)
	api.HandleFunc("POST /api/v1/namespaces/{namespace}/addons/{name}/approve", nop)
	api.HandleFunc("/api/", nop)
	outer.HandleFunc("POST /api/v1/session", nop)
	outer.HandleFunc("DELETE /api/v1/session", nop)
	outer.HandleFunc("/api/", nop)
	for _, tc := range []struct {
		method, path string
		want         []string
	}{
		{http.MethodPut, "/api/v1/namespaces/team/addons/demo", []string{"GET", "PATCH", "DELETE"}},
		{http.MethodGet, "/api/v1/namespaces/team/addons/demo/approve", []string{"POST"}},
		{http.MethodGet, "/api/v1/session", []string{"POST", "DELETE"}},
		{http.MethodGet, "/api/v1/nothing/here", nil},
	} {
		got := allowedMethods(httptest.NewRequest(tc.method, tc.path, nil), api, outer)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: allowed %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}
