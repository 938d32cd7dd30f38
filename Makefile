# TauGrid. `make help` lists the targets.

GO       ?= go
BIN      := $(CURDIR)/bin
TOOLS    := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/taugrid/tools
export CGO_CFLAGS := -Wno-deprecated-declarations

GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the binaries into ./bin
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: testbin
testbin: ## Build (or reuse) the real control-plane binaries, cached outside the repo
	@hack/testbin.sh >/dev/null

.PHONY: test
test: testbin ## Run every test (unit, integration on the real API server and Kueue) with -race
	TAU_TESTBIN=$$(hack/testbin.sh --dir) $(GO) test -race -count=1 -timeout 30m ./...

.PHONY: test-unit
test-unit: ## Run the fast tests only (no control plane)
	$(GO) test -race -short ./...

.PHONY: fuzz
fuzz: ## Fuzz parse + validate + render (FUZZTIME=5m)
	$(GO) test ./render -run '^$$' -fuzz FuzzRender -fuzztime $(or $(FUZZTIME),1m)

.PHONY: bench
bench: ## Run the benchmarks
	$(GO) test ./render ./evidence -run '^$$' -bench . -benchmem

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate CRDs, deepcopy and the tau.yaml JSON Schema
	$(CONTROLLER_GEN) object:headerFile=/dev/null paths=./api/... crd output:crd:dir=api/crds
	$(GO) run ./cmd/tau schema > docs/tau.schema.json

.PHONY: verify
verify: generate ## Fail if generated files are stale, code is unformatted or go.mod untidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	@test -z "$$(git status --porcelain -- api docs/tau.schema.json)" || \
		(git status --short -- api docs/tau.schema.json; echo "generated files are stale: run make generate and commit"; exit 1)
	$(GO) mod tidy -diff

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	@mv $(TOOLS)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(TOOLS)/golangci-lint $@

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint and go vet
	$(GOLANGCI_LINT) run ./...

.PHONY: demo
demo: testbin ## End to end: local cluster, git server, controller; push a run tag and follow it
	$(GO) run ./hack/demo

.PHONY: demo-render
demo-render: ## Offline: validate and render the example research repo under the example policy
	@$(GO) run ./cmd/tau validate --dir examples/research --policy examples/platform --tenant team-a
	@$(GO) run ./cmd/tau render --dir examples/research --policy examples/platform --tenant team-a

.PHONY: dev-cluster
dev-cluster: testbin ## Start a local cluster (kwok, Kueue, KubeRay) with fake H200 nodes
	$(GO) run ./hack/devcluster up

.PHONY: dev-cluster-down
dev-cluster-down: ## Stop the local cluster and every process it started
	$(GO) run ./hack/devcluster down
