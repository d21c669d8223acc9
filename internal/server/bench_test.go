package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// BenchmarkAPILatency measures the API's get and list of 200 Addons over
// HTTPS on loopback, as a user with a namespace Role, with TokenReview
// caching on. It reports the p50 and p99 of 400 gets and 40 lists:
//
//	make bench-api
func BenchmarkAPILatency(b *testing.B) {
	const addonCount, gets, lists = 200, 400, 40
	ns := namespace(b)
	token := user(b, ns, "reader", addonRule("get", "list"))
	for i := range addonCount {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("addon-%03d", i)},
			Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}}}
		if err := admin.Create(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
	measure := func(n int, path func(i int) string) (p50, p99 time.Duration) {
		var d []time.Duration
		for i := range n {
			began := time.Now()
			code, body := call(b, token, http.MethodGet, path(i), nil)
			d = append(d, time.Since(began))
			if code != http.StatusOK {
				b.Fatalf("GET %s: %d %s", path(i), code, body)
			}
		}
		slices.Sort(d)
		return d[len(d)/2], d[len(d)*99/100]
	}
	b.ResetTimer()
	for range b.N {
		g50, g99 := measure(gets, func(i int) string { return fmt.Sprintf("/api/v1/namespaces/%s/addons/addon-%03d", ns, i%addonCount) })
		l50, l99 := measure(lists, func(int) string { return "/api/v1/namespaces/" + ns + "/addons" })
		b.ReportMetric(float64(g50.Microseconds())/1000, "ms-get-p50")
		b.ReportMetric(float64(g99.Microseconds())/1000, "ms-get-p99")
		b.ReportMetric(float64(l50.Microseconds())/1000, "ms-list200-p50")
		b.ReportMetric(float64(l99.Microseconds())/1000, "ms-list200-p99")
	}
}
