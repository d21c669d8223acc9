// Package corpus holds the chart corpus test: real, popular charts,
// fetched from their projects' Go modules by hack/charts/fetch.sh, each
// installed once by `helm install` and once by Capstan on the local control
// plane, with the live objects compared. docs/rendering.md has the table.
package corpus
