// Package benchmark holds the end-to-end benchmarks, where capstan runs as a
// process of its own: the controller against the local control plane
// (internal/testcluster), so the requests, memory and CPU it reports are its
// own, `capstan render` against `helm template`, so start-up counts, and
// the controller against Flux's helm-controller and source-controller
// (built into bin/flux by hack/flux), each a process of its own. The
// benchmarks live in the package's tests; a control plane starts only when
// -bench selects BenchmarkConverge or BenchmarkAgainstFlux, so
// `go test ./...` runs nothing here.
// docs/benchmarks.md describes what they measure and the figures.
package benchmark
