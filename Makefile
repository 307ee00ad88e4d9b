# karpenter-migrate — build, test and demo targets.
# Tools are built from the Go module proxy into $(TOOLS) and reused.

GO          ?= go
export GOTOOLCHAIN := local
CACHE       ?= $(HOME)/.cache/karpenter-migrate
export KM_CACHE := $(CACHE)
TOOLS       := $(CACHE)/tools
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
PKGS        := ./...

# The commit `version` and --version print ("-dirty" with uncommitted changes):
# go build records it too, but not under go run or GOFLAGS=-buildvcs=false.
GIT_COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),-dirty)
LDFLAGS     := $(if $(GIT_COMMIT),-X github.com/karpenter-migrate/karpenter-migrate/pkg/version.Commit=$(GIT_COMMIT))

.PHONY: all build test lint fmt-check vet staticcheck shellcheck unit moto moto-check fuzz bench bench-karpenter controlplane e2e chaos demo demo-real

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/karpenter-migrate ./cmd/karpenter-migrate

## demo: a full migration of the embedded sandbox cluster, in seconds once built (the first build
## compiles every dependency: about 15 CPU-minutes; see README.md). ARGS="--rollback" etc.
demo:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/karpenter-migrate demo $(ARGS)

## demo-real: the same demo on a real control plane with the real Karpenter (kwok provider):
## builds the control-plane binaries first, into the cache the tests use, when missing.
demo-real: controlplane
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/karpenter-migrate demo --control-plane $(ARGS)

## test: everything CI runs — format, vet, staticcheck, then the race-enabled suite
## (which includes the control-plane tests, so the binaries are built first, and
## the moto tier, so moto_server must be on PATH).
test: fmt-check vet staticcheck shellcheck controlplane moto-check unit

lint: fmt-check vet staticcheck shellcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^scripts/controlplane/')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

$(STATICCHECK):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/.staticcheck-build $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/.staticcheck-build/staticcheck $(STATICCHECK)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) $(PKGS)

## shellcheck: lint the rollout scripts as POSIX sh; installs Debian's shellcheck when missing.
SHELL_SCRIPTS := scripts/rollout.sh scripts/rollout-all.sh scripts/bench-karpenter.sh
shellcheck:
	@command -v shellcheck >/dev/null 2>&1 || { \
	  echo "installing shellcheck (apt-get)"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y shellcheck >/dev/null || { $$SUDO apt-get update >/dev/null && $$SUDO apt-get install -y shellcheck >/dev/null; }; }
	shellcheck -s sh $(SHELL_SCRIPTS)

unit: controlplane moto-check
	$(GO) test -race -timeout 20m $(PKGS)

## moto-check: moto_server (moto 5.2.1, part of the machine image) is on PATH.
moto-check:
	@command -v moto_server >/dev/null 2>&1 || { \
	  echo "moto_server not found on PATH: the AWS tests run against it (moto 5.2.1 with boto3, part of this"; \
	  echo "project's machine image); they fail without it rather than skip."; exit 1; }

## moto: only the tests against moto_server (TestMoto*), the AWS emulator nobody here wrote.
moto: controlplane moto-check
	$(GO) test -race -count=1 -run '^TestMoto' $(PKGS)

## controlplane: build etcd, Kubernetes, kwok and Karpenter for the end-to-end
## tests into $(CACHE), only when missing (12 to 20 min from a clean cache).
controlplane:
	scripts/controlplane/build.sh

## e2e: only the tests that run against the real control plane.
e2e: controlplane
	$(GO) test -race -count=1 -timeout 20m ./internal/testenv/... ./pkg/rollout/e2e/...

## chaos: the whole chaos ladder (#19, docs/ARCHITECTURE.md "What survives what"): every
## fault at every injection point. `make test` runs one rotating shard of the kill points
## (CHAOS_SHARD=k/m reruns one; the test log names the day's).
chaos: controlplane
	CHAOS_SHARD=all $(GO) test -race -count=1 -timeout 90m -v -run '^TestChaos' ./pkg/rollout/e2e/ ./pkg/kube/... ./pkg/rollout/ ./pkg/cli/ ./pkg/aws/...

## fuzz: a short run of every fuzz target.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 10s $$pkg || exit 1; \
	  done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## bench-karpenter: Karpenter v1.14.1's BenchmarkScheduling5000 (downloaded into $(CACHE), not
## the repo) then BenchmarkKarpenterMix5000, and the ratio (PODS=20000 etc.).
bench-karpenter:
	scripts/bench-karpenter.sh
