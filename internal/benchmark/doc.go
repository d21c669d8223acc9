// Package benchmark holds the end-to-end benchmarks: the capstan controller
// runs as a process of its own against the local control plane
// (internal/testcluster), so the requests, memory and CPU it reports are its
// own. The benchmarks live in the package's tests; a control plane starts
// only when -bench selects them, so `go test ./...` runs nothing here.
// docs/benchmarks.md describes what they measure and the figures.
package benchmark
