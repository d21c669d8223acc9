package server

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

// TestChartCheckFailsOpenWhenTheChartCannotBeFetched: a write whose chart
// source answers 429 (with a Retry-After of an hour), closes the
// connection, or never answers is not refused for it: the values check
// and the warning of unknown secret inputs each say the chart could not be
// read, the controller's own check then holding, and neither waits past
// the page fetch's deadline nor fetches the chart again.
func TestChartCheckFailsOpenWhenTheChartCannotBeFetched(t *testing.T) {
	var requests atomic.Int32
	release := make(chan struct{})
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch {
		case strings.HasPrefix(r.URL.Path, "/busy/"):
			w.Header().Set("Retry-After", "3600")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case strings.HasPrefix(r.URL.Path, "/closed/"):
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		default:
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(server.Close)
	t.Cleanup(func() { close(release) })
	fetcher, err := source.NewFetcher(source.Options{Guard: netguard.Config{Allow: []string{"127.0.0.1/32"}, LoopbackOnly: true},
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})})
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 2 * time.Second
	s := &Server{Fetcher: fetcher, FetchTimeout: deadline}
	for _, where := range []string{"busy", "closed", "silent"} {
		t.Run(where, func(t *testing.T) {
			requests.Store(0)
			spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: server.URL + "/" + where + "/vault-1.0.0.tgz"},
				Values: &apiextensionsv1.JSON{Raw: []byte(`{"auth":{"password":"hunter2"}}`)}}
			// The fetch of chartCheck, without its turn and access review.
			check := addons.NewChartCheck(func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
				return s.Fetcher.Fetch(source.Interactive(ctx, s.fetchTimeout()), spec, nil)
			})
			var warned []string
			warn := func(msg string) { warned = append(warned, msg) }
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			start := time.Now()
			if err := s.checkSecretValues(ctx, check, spec, nil, apiSecrets, warn); err != nil {
				t.Errorf("the write was refused: %v; want it to go on, warned", err)
			}
			s.warnUnknownSecretInputs(ctx, check, spec, map[string]string{"auth.pasword": "x"}, warn)
			if took := time.Since(start); took > deadline+3*time.Second {
				t.Errorf("the checks took %v; want them done by the page fetch's deadline, %v", took, deadline)
			}
			if len(warned) != 2 || !strings.Contains(warned[0], "the chart could not be read to check spec.values for secret inputs") ||
				!strings.Contains(warned[1], "the chart could not be read to check the paths of the secret inputs") {
				t.Errorf("warnings %q; want the check and the warning of unknown inputs each to say the chart could not be read", warned)
			}
			for _, w := range warned {
				if strings.Contains(w, "hunter2") {
					t.Errorf("a warning quotes the secret: %s", w)
				}
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("the chart was asked for %d times; want the check's fetch alone, the warning taking its error", n)
			}
		})
	}
}
