package cli

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

// TestUncompressedAsksForNoGzip checks, on the wire, that the controller's
// connection asks its API server for no gzip, and that the connection it
// was given still does.
func TestUncompressedAsksForNoGzip(t *testing.T) {
	seen := make(chan string, 2)
	// NOTE: TLS, as every API server has: without it client-go uses
	// http.DefaultTransport and ignores DisableCompression.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Accept-Encoding")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	given := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		want string
	}{
		{"the controller's", uncompressed(given), ""},
		{"the one given", given, "gzip"},
	} {
		hc, err := rest.HTTPClientFor(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(srv.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := <-seen; got != tc.want {
			t.Errorf("%s connection sent Accept-Encoding %q, want %q", tc.name, got, tc.want)
		}
	}
}
