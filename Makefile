# TauGrid. `make help` lists the targets.

GO       ?= go
BIN      := $(CURDIR)/bin
TOOLS    := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/taugrid/tools
export CGO_CFLAGS := -Wno-deprecated-declarations

GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
# The real cosign CLI: the evidence tests verify attestations with it, offline.
COSIGN_VERSION := v3.1.3
COSIGN := $(TOOLS)/cosign-$(COSIGN_VERSION)
# A real OCI registry (distribution): the release test pushes to it.
DISTRIBUTION_VERSION := v3.1.2
REGISTRY_SERVER := $(TOOLS)/registry-$(DISTRIBUTION_VERSION)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the binaries into ./bin
	$(GO) build -o $(BIN)/ ./cmd/...

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: release
release: ## Write the tau CLI's release into ./dist: an archive per platform (Linux, macOS, Windows; amd64, arm64), SHA256SUMS, install.sh, install.ps1
	$(GO) run ./hack/release -version $(VERSION) -out dist

IMAGE_REGISTRY  ?= ghcr.io/taugrid
IMAGE_TAG       ?= $(shell sed -n 's/^appVersion: *//p' charts/taugrid/Chart.yaml)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_OUT       ?= build/images
# IMAGE_BUILD_FLAGS=--allow-dirty builds a work tree with uncommitted changes.
IMAGE_BUILD_FLAGS ?=
IMAGES          := tau-controller tau-nodeagent tau
# DOCKER empty: the images are built by hack/images with no container engine
# (OCI layouts under $(IMAGE_OUT), signed, with provenance; docs/images.md).
# DOCKER=docker (or podman) builds cmd/<image>/Dockerfile with that engine.
DOCKER          ?=
# Debian packages the library build copies from or compiles with.
IMAGE_DEBS      := ca-certificates gcc libc6-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross

.PHONY: image-deps
image-deps: ## Install the Debian packages make images needs (CA bundle, glibc and gcc for amd64 and arm64)
	@test -f /etc/ssl/certs/ca-certificates.crt && command -v gcc >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null && \
		test -f /usr/aarch64-linux-gnu/lib/libc.so.6 || { \
		sudo=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends $(IMAGE_DEBS) >/dev/null; }

.PHONY: images
images: ## Build the images tau-controller, tau-nodeagent and tau for amd64 and arm64, signed (TAU_IMAGE_SIGNING_KEY), into build/images
	@case "$(IMAGE_TAG)" in latest|"") echo "make images: IMAGE_TAG must be a version, not '$(IMAGE_TAG)'" >&2; exit 1;; esac
ifeq ($(DOCKER),)
	@$(MAKE) --no-print-directory image-deps
	$(GO) run ./hack/images build --out $(IMAGE_OUT) --registry $(IMAGE_REGISTRY) --tag $(IMAGE_TAG) --platforms $(IMAGE_PLATFORMS) $(IMAGE_BUILD_FLAGS)
else
	@$(DOCKER) info >/dev/null 2>&1 || { \
		echo "make images: no container engine answers ('$(DOCKER) info' failed). Start it, or leave DOCKER unset to build without one." >&2; exit 1; }
	for img in $(IMAGES); do \
		$(DOCKER) build -f cmd/$$img/Dockerfile -t $(IMAGE_REGISTRY)/$$img:$(IMAGE_TAG) . || exit 1; \
	done
endif

# make publish pushes to REGISTRY (host/path): each image (an index of
# IMAGE_PLATFORMS) with its signature and provenance under cosign's tags,
# then the chart, as an OCI artifact through Helm's registry client, its
# values naming the images by digest, and signed. Credentials: docker's
# config (docker login, or helm registry login). A registry on 127.0.0.1 is
# spoken to in plain HTTP.
REGISTRY ?=

.PHONY: publish
publish: ## Push the signed images (with SLSA provenance) and the chart to REGISTRY=host/path (docs/install.md)
	@test -n "$(REGISTRY)" || { echo "make publish: set REGISTRY=host/path, for example REGISTRY=ghcr.io/taugrid" >&2; exit 1; }
	@$(MAKE) --no-print-directory images IMAGE_REGISTRY=$(REGISTRY)
	$(GO) run ./hack/images publish --out $(IMAGE_OUT) --registry $(REGISTRY) --tag $(IMAGE_TAG) --chart $(CHART)

.PHONY: verify-images
verify-images: ## Check the signatures and provenance of the images make images wrote (IMAGE_PUBLIC_KEY: the release's key)
	$(GO) run ./hack/images verify --out $(IMAGE_OUT) --registry $(IMAGE_REGISTRY) --tag $(IMAGE_TAG) \
		$(if $(IMAGE_PUBLIC_KEY),--public-key $(IMAGE_PUBLIC_KEY))

.PHONY: testbin
testbin: ## Build (or reuse) the real control-plane binaries, cached outside the repo
	@hack/testbin.sh >/dev/null

# make test runs in two steps. First, three go test processes side by side:
# the packages that start no dev cluster, and controllers/integration in two
# halves, each with its own control plane: the MultiKueue fleet's tests
# (named for a Worker, a Dispatch or the Fleet; only they start worker
# clusters) and the rest. A test's name decides its half: nothing is
# skipped. Then the dev cluster's packages (the demo and the cluster's own
# test), one at a time on a quiet machine: each starts a whole kwok cluster
# with its controllers, whose start deadlines a loaded machine misses.
INTEGRATION := github.com/taugrid/taugrid/controllers/integration
DEVCLUSTER := github.com/taugrid/taugrid/hack/demo github.com/taugrid/taugrid/hack/devcluster/cluster
FLEET_TESTS := Worker|Dispatch|Fleet
TEST_FLAGS := -race -count=1 -timeout 30m
# The integration halves run up to 28 minutes under make test's load on
# two cores: 60 minutes, so a slow machine fails on what failed, not on
# go test's timeout.
INTEGRATION_FLAGS := -race -count=1 -timeout 60m

.PHONY: test
test: testbin $(COSIGN) $(REGISTRY_SERVER) ## Run every test (unit, integration on the real API server and Kueue, attestations and the release with the real cosign and a real registry) with -race
	@export TAU_TESTBIN=$$(hack/testbin.sh --dir) TAU_COSIGN=$(COSIGN) TAU_REGISTRY_SERVER=$(REGISTRY_SERVER); \
	pkgs=$$($(GO) list ./... | grep -vx -e '$(INTEGRATION)' $(foreach p,$(DEVCLUSTER),-e '$(p)')); \
	$(GO) test $(INTEGRATION_FLAGS) -run '$(FLEET_TESTS)' $(INTEGRATION) & fleet=$$!; \
	$(GO) test $(INTEGRATION_FLAGS) -skip '$(FLEET_TESTS)' $(INTEGRATION) & rest=$$!; \
	$(GO) test $(TEST_FLAGS) $$pkgs; others=$$?; \
	wait $$fleet; fleet=$$?; wait $$rest; rest=$$?; \
	$(GO) test $(TEST_FLAGS) -p 1 $(DEVCLUSTER); dev=$$?; \
	echo "make test: integration (fleet) exit $$fleet, integration (rest) exit $$rest, other packages exit $$others, dev cluster exit $$dev"; \
	[ $$fleet -eq 0 ] && [ $$rest -eq 0 ] && [ $$others -eq 0 ] && [ $$dev -eq 0 ]

.PHONY: test-unit
test-unit: ## Run the fast tests only (no control plane)
	$(GO) test -race -short ./...

.PHONY: fuzz
fuzz: ## Fuzz parse + validate + render (FUZZTIME=5m)
	$(GO) test ./render -run '^$$' -fuzz FuzzRender -fuzztime $(or $(FUZZTIME),1m)

.PHONY: bench
bench: ## Run the benchmarks
	$(GO) test ./render ./evidence -run '^$$' -bench . -benchmem

.PHONY: scale
scale: testbin ## Measure one controller at scale (not part of make test): SCALE_FLAGS='-nodes 100 -repos 100 -runs 1000' (go run ./hack/scale -h lists the flags)
	TAU_TESTBIN=$$(hack/testbin.sh --dir) $(GO) run ./hack/scale $(SCALE_FLAGS)

.PHONY: generate
CHART := charts/taugrid

generate: $(CONTROLLER_GEN) ## Regenerate CRDs, deepcopy, RBAC, the chart's copies and the tau.yaml JSON Schema
	$(CONTROLLER_GEN) object:headerFile=/dev/null paths=./api/... crd output:crd:dir=api/crds
	$(CONTROLLER_GEN) rbac:roleName=tau-controller paths="{./controllers/...,./policy/...,./forge/...,./server/...}" output:rbac:dir=$(CHART)/files/rbac
	@# The chart installs the CRDs and the node agent's policy from copies:
	@# Helm reads nothing outside the chart's folder.
	rm -rf $(CHART)/crds && mkdir -p $(CHART)/crds $(CHART)/files/nodeagent
	cp api/crds/*.yaml $(CHART)/crds/
	cp nodeagent/deploy/admission.yaml nodeagent/deploy/rbac.yaml $(CHART)/files/nodeagent/
	$(GO) run ./cmd/tau schema > docs/tau.schema.json

.PHONY: verify
verify: generate ## Fail if generated files are stale, code is unformatted, go.mod untidy or a tracked file over 1 MiB lies outside testdata/
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	@test -z "$$(git status --porcelain -- api docs/tau.schema.json $(CHART))" || \
		(git status --short -- api docs/tau.schema.json $(CHART); echo "generated files are stale: run make generate and commit"; exit 1)
	$(GO) mod tidy -diff
	@big=$$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | \
		awk '$$1 > 1048576 && $$2 !~ /(^|\/)testdata\//'); \
	test -z "$$big" || { echo "tracked files over 1 MiB outside testdata/ (build outputs belong in .gitignore):"; echo "$$big"; exit 1; }

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	@mv $(TOOLS)/controller-gen $@

.PHONY: cosign
cosign: $(COSIGN) ## Build (or reuse) the real cosign CLI the tests verify attestations with, and print its path
	@echo $(COSIGN)

$(COSIGN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION)
	@mv $(TOOLS)/cosign $@

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

.PHONY: demo-recovery
demo-recovery: testbin ## The demo, then a low-priority run preempted by a high-priority one and retried from its checkpoint
	$(GO) run ./hack/demo --recovery

.PHONY: demo-multicluster
demo-multicluster: testbin ## A MultiKueue manager and two workers: a pushed run goes to the worker with free GPUs; tau logs -f streams it from there
	$(GO) run ./hack/demo --multicluster

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

.PHONY: registry-server
registry-server: $(REGISTRY_SERVER) ## Build (or reuse) the real OCI registry (distribution) the release test pushes to, and print its path
	@echo $(REGISTRY_SERVER)

$(REGISTRY_SERVER):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/distribution/distribution/v3/cmd/registry@$(DISTRIBUTION_VERSION)
	@mv $(TOOLS)/registry $@
