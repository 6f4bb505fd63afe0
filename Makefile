# nodejoin: run `make help` for the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN_VERSION := v0.23.0
# Worker nodes started by `make up`: local instances whose real kubelets join (simulated
# kubelets where real ones cannot run: see `nodejoin up --help`).
NODES ?= 2
NAME ?= nodejoin
# Integration and e2e tests start real control planes; each lane of hack/test.sh runs one
# package at a time so that two 2-core test binaries do not starve each other's API servers.
TEST_FLAGS ?= -p 1 -timeout 30m

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install the Debian packages local nodes need (as root; otherwise list them)
	@hack/install-deps.sh

.PHONY: tools
tools: ## Build the pinned Kubernetes binaries, etcd, CoreDNS, the CNI plugins loopback and portmap, agnhost, ginkgo and e2e.test into bin/ (each cached on its own)
	@hack/build-tools.sh
	@$(MAKE) --no-print-directory images

.PHONY: images
images: build-netagent ## Build the local images (pause, agnhost, busybox, kube-proxy, CoreDNS, nodejoin-netagent, nodejoin-controller) into bin/images/, and those only conformance tests use into bin/images/conformance/, from bin/ and pinned Debian packages
	$(GO) run ./hack/images

# The aws-node image's commands are static: they run in an image without a C library,
# and its init container copies the CNI plugin onto nodes, whatever their libc.
NETAGENT_CMDS := $(addprefix ./,$(wildcard cmd/nodejoin-netagent cmd/nodejoin-cni))
OTHER_CMDS := $(filter-out $(NETAGENT_CMDS),$(addprefix ./,$(wildcard cmd/*)))

.PHONY: build-netagent
build-netagent: ## Build nodejoin-netagent and nodejoin-cni (static) into bin/
	@mkdir -p $(BIN)
	$(if $(NETAGENT_CMDS),CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/ $(NETAGENT_CMDS))

.PHONY: build
build: build-netagent ## Build nodejoin, nodeadm, nodejoin-controller, nodejoin-netagent and nodejoin-cni into bin/
	$(GO) build -o $(BIN)/ $(OTHER_CMDS)

.PHONY: up
up: deps tools build ## Start a local cluster with NODES joined nodes and two control-plane nodes running the controller's chart, in the background (NAME, NODES); stop it with `make down`
	$(BIN)/nodejoin up --name $(NAME) --nodes $(NODES) --control-plane-nodes 2 --detach
	@echo "Use it:  $(BIN)/kubectl --kubeconfig \"\$$($(BIN)/nodejoin kubeconfig --name $(NAME))\" get nodes -o wide"

.PHONY: down
down: ## Stop the local cluster started by `make up` and remove its state
	@if [ -x $(BIN)/nodejoin ]; then $(BIN)/nodejoin down --name $(NAME); else $(GO) run ./cmd/nodejoin down --name $(NAME); fi

.PHONY: test
test: deps tools build ## Run every test: host-network tests alone, then e2e beside a short fuzz of every decoder, unit and integration (real kube-apiserver) tests
	@GO=$(GO) TEST_FLAGS="$(TEST_FLAGS)" hack/test.sh

# What `make conformance` runs: "list" (test/conformance/focus.yaml) or "all" (every
# conformance test but the skipped ones), and where its JUnit report and logs go.
CONFORMANCE_FOCUS ?= list
# With CONFORMANCE_FOCUS=all, a chunk of the suite: the tests whose name matches this Go
# regular expression.
CONFORMANCE_MATCH ?=
# e2e.test processes in parallel (through bin/ginkgo; [Serial] tests run last, alone).
CONFORMANCE_PROCS ?= 1
ARTIFACTS ?= $(CURDIR)/_artifacts/conformance

.PHONY: conformance
conformance: deps tools build ## Run upstream conformance tests (test/conformance/focus.yaml) on a fresh 2-node cluster; prints passed/failed/skipped
	$(GO) test -count=1 -v -timeout 4h -run '^TestConformance$$' ./test/conformance -args -conformance -focus=$(CONFORMANCE_FOCUS) -match='$(CONFORMANCE_MATCH)' -procs=$(CONFORMANCE_PROCS) -artifacts=$(ARTIFACTS)

.PHONY: fuzz
fuzz: ## Fuzz every decoder: FUZZTIME each (default 20000x inputs; or a duration such as 5m)
	@hack/fuzz.sh

.PHONY: test-unit
test-unit: ## Run the unit tests only (no root, no binaries)
	$(GO) test -short ./...

.PHONY: lint
lint: $(BIN)/golangci-lint ## Run golangci-lint (pinned version, installed into bin/)
	$(BIN)/golangci-lint run ./...
	cd hack/tools/etcd && $(BIN)/golangci-lint run --config $(CURDIR)/.golangci.yml ./...
	cd hack/tools/coredns && $(BIN)/golangci-lint run --config $(CURDIR)/.golangci.yml ./...

$(BIN)/golangci-lint: Makefile
	@mkdir -p $(BIN)
	@if ! $(BIN)/golangci-lint version 2>/dev/null | grep -q "version $(GOLANGCI_LINT_VERSION:v%=%)"; then \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION)"; \
		GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi
	@touch $@

.PHONY: generate
generate: $(BIN)/controller-gen ## Generate deep copies, the CRDs (controller-gen), the chart's RBAC from internal/rbac, and deploy/ and the chart's golden files from the chart (pinned helm)
	$(BIN)/controller-gen object paths=./api/nodejoin/v1alpha1/...
	@# The CRDs of NodeAccessEntry and NodeGroup only: NodeJoinConfig is user data, not an API object.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		$(BIN)/controller-gen crd:crdVersions=v1 paths=./api/nodejoin/v1alpha1/... output:crd:dir="$$tmp" && \
		for crd in nodejoin.io_nodeaccessentries.yaml nodejoin.io_nodegroups.yaml; do \
			cp "$$tmp/$$crd" api/nodejoin/v1alpha1/crds/ && cp "$$tmp/$$crd" deploy/crds/ || exit 1; \
		done
	@# The chart's RBAC, FlowSchema and CRDs from internal/rbac; then deploy/ from the chart.
	$(GO) test -count=1 ./internal/rbac -run '^TestChartAndCRDsMatchCode$$' -update
	@hack/build-tools.sh helm
	$(GO) test -count=1 ./test/chart -run '^(TestDeployIsRenderedFromTheChart|TestTemplateGoldenEveryMode)$$' -update

$(BIN)/controller-gen: Makefile
	@mkdir -p $(BIN)
	@if ! $(BIN)/controller-gen --version 2>/dev/null | grep -qx "Version: $(CONTROLLER_GEN_VERSION)"; then \
		echo "installing controller-gen $(CONTROLLER_GEN_VERSION)"; \
		GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION); \
	fi
	@touch $@

# Nodes `make bench` joins at once, and flags added to `nodejoin bench join`.
BENCH_NODES ?= 100
BENCH_FLAGS ?=

.PHONY: bench
bench: build ## Join BENCH_NODES (100) simulated nodes at once, then again with kube-controller-manager and with the floor (no checks) as baselines, and print the table
	@hack/build-tools.sh
	$(BIN)/nodejoin bench join --nodes $(BENCH_NODES) --baseline kcm,floor $(BENCH_FLAGS)

.PHONY: bench-go
bench-go: ## Run the Go benchmarks (go test -bench) and print their figures
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: clean
clean: ## Remove bin/ (the tools cache in ~/.cache/nodejoin stays)
	rm -rf $(BIN)
