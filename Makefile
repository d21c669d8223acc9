# Everything a person runs is a target here. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

GO ?= go
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
# Packages run in parallel, each with its own local control plane; two at a
# time fits CI's two cores.
TEST_PARALLEL ?= 2
# The timeout is per package: internal/controller alone takes 23-25 minutes
# on two busy cores, so 40 leaves it room while a hung test still ends well
# inside CI's 90 minutes.
TEST_TIMEOUT ?= 40m
# BIN_DIR holds the control plane, helm, the chart corpus and Flux: an
# exported CAPSTAN_BIN_DIR, as docs/testcluster.md says, or bin/ here. Every
# target and script uses it, so that `make bin` builds where `make test` and
# `make dev` look; it is absolute because go test runs in each package's
# folder. The checkout's own builds (bin/capstan, bin/image) stay in bin/.
BIN_DIR ?= $(abspath $(or $(CAPSTAN_BIN_DIR),$(CURDIR)/bin))
export CAPSTAN_BIN_DIR := $(BIN_DIR)

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: bin
bin: ## Build the local control plane (etcd, kube-*, kwok) and helm into bin/ (or $CAPSTAN_BIN_DIR), once per pinned version.
	hack/build-controlplane.sh
	@if [ -x hack/helm/build.sh ]; then hack/helm/build.sh; fi

.PHONY: charts
charts: ## Fetch the chart corpus (hack/charts/corpus.txt) from the Go module proxy into bin/charts (or $CAPSTAN_BIN_DIR/charts), once per pinned list.
	hack/charts/fetch.sh

.PHONY: chromium
chromium: ## Install Debian's headless Chromium for the web page's tests, when it is missing.
	@if ! command -v chromium >/dev/null 2>&1; then \
		echo "Installing Debian's chromium for the web page's tests..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	fi

.PHONY: build
build: ## Build bin/capstan.
	$(GO) build -o bin/capstan ./cmd/capstan

.PHONY: image
image: ## Build the multi-arch (amd64, arm64) non-root image, with labels and an SBOM, into the OCI layout bin/image; no Docker needed (CA_CERTS names the CA bundle to put in it).
	$(GO) run ./hack/image -out bin/image $(if $(CA_CERTS),-ca-certs "$(CA_CERTS)")

.PHONY: image-push
image-push: ## Build the image and push it: IMAGE=registry/name:tag make image-push (credentials from ~/.docker/config.json).
	@if [ -z "$(IMAGE)" ]; then echo "IMAGE is not set: IMAGE=registry/name:tag make image-push"; exit 1; fi
	$(GO) run ./hack/image -out bin/image $(if $(CA_CERTS),-ca-certs "$(CA_CERTS)") -push "$(IMAGE)"

.PHONY: test
test: bin build chromium charts ## Run go vet and every test, on the local control plane.
	$(GO) vet ./...
	CAPSTAN_BIN_DIR=$(BIN_DIR) $(GO) test -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) -count=1 ./...

.PHONY: dev
dev: bin build ## Run Capstan on a local control plane with sample add-ons (Ctrl-C stops everything).
	bin/capstan dev --bin-dir $(BIN_DIR) $(DEV_ARGS)

.PHONY: generate
generate: ## Generate deepcopy code, CRDs (stamped with their schema's hash) and RBAC from the markers, for config/ and charts/capstan.
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(TOOLS) controller-gen crd:maxDescLen=400 paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/crdstamp config/crd/bases/*.yaml
	$(TOOLS) controller-gen rbac:roleName=controller paths=./internal/... output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/*.yaml charts/capstan/crds/
	cp config/rbac/role.yaml charts/capstan/files/controller-role.yaml
	cp config/roles/addon_roles.yaml charts/capstan/files/addon-roles.yaml

.PHONY: verify-generate
verify-generate: generate ## Fail when `make generate` changes the tree (CI runs this).
	@if [ -n "$$(git status --porcelain -- api config charts/capstan)" ]; then \
		echo "make generate changed these files; run it and commit the result:"; \
		git status --porcelain -- api config charts/capstan; git diff --stat -- api config charts/capstan; exit 1; fi

.PHONY: lint
lint: ## Run golangci-lint.
	$(TOOLS) golangci-lint run ./...

.PHONY: chaos
chaos: bin ## The full chaos run: 100 SIGKILLs of the controller and 30 of the git syncer (make test runs 10 and 6), and the control plane outages; CAPSTAN_CHAOS_SEED replays one run.
	CAPSTAN_BIN_DIR=$(BIN_DIR) CAPSTAN_CHAOS_KILLS=$${CAPSTAN_CHAOS_KILLS:-100} CAPSTAN_CHAOS_SYNCER_KILLS=$${CAPSTAN_CHAOS_SYNCER_KILLS:-30} $(GO) test -count=1 -v -timeout 90m ./test/chaos/

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 60s) each, one after the other, and print their executions.
	FUZZTIME=$${FUZZTIME:-60s} hack/fuzz.sh

.PHONY: bench
bench: bin ## Run the benchmarks and print their figures.
	CAPSTAN_BIN_DIR=$(BIN_DIR) $(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

.PHONY: bench-converge
bench-converge: bin ## Converge 200 add-ons from cold, once, with the floor beside it (CAPSTAN_BENCH_ADDONS sets the count, CAPSTAN_BENCH_SOURCE=chart the chart variant).
	CAPSTAN_BIN_DIR=$(BIN_DIR) $(GO) test -run '^$$' -bench Converge -benchtime=1x -timeout 60m -v ./internal/benchmark/

.PHONY: bench-converge-series
bench-converge-series: bin ## BenchmarkConverge CAPSTAN_BENCH_RUNS times (default 5), with each run's ratio to the floor and the median.
	GO=$(GO) hack/bench-series.sh

.PHONY: flux
flux: ## Build Flux's helm-controller and source-controller (pinned in hack/flux) and their CRDs into bin/flux (or $CAPSTAN_BIN_DIR/flux), once per pinned version.
	hack/flux/build.sh

.PHONY: bench-flux
bench-flux: bin flux ## Issue 19: 100 add-ons of a 21-object chart by Capstan, the floor and Flux, one after the other on one control plane.
	CAPSTAN_BIN_DIR=$(BIN_DIR) $(GO) test -run '^$$' -bench AgainstFlux -benchtime=1x -timeout 90m -v ./internal/benchmark/

.PHONY: bench-requests
bench-requests: bin ## What one request of each kind an install sends costs the API server's CPU.
	CAPSTAN_BIN_DIR=$(BIN_DIR) $(GO) test -run '^$$' -bench RequestCosts -benchtime=1x -timeout 20m -v ./internal/benchmark/

.PHONY: bench-render
bench-render: bin ## Issue 19: capstan render against helm template of a 330-object chart, 10 paired runs.
	CAPSTAN_BIN_DIR=$(BIN_DIR) $(GO) test -run '^$$' -bench ColdRender -benchtime=1x -timeout 30m -v ./internal/benchmark/

.PHONY: bench-api
bench-api: bin ## The API's p50 and p99 latency of get and list with 200 add-ons.
	CAPSTAN_BIN_DIR=$(BIN_DIR) $(GO) test -run '^$$' -bench APILatency -benchtime=1x -timeout 20m ./internal/server/

.PHONY: clean
clean: ## Remove bin/ (the next make bin builds the control plane cold); a folder an exported CAPSTAN_BIN_DIR names is a cache others may share, and is left.
	rm -rf bin
