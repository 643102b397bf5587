# marina — read top to bottom: build, test, lint, docs, bench, clean.
# Everything the targets need is installed by the targets themselves (`make tools`).

SHELL         := /bin/bash
GO            ?= go
export GOTOOLCHAIN := local
PKG           := github.com/bcollard/marina
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT        ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS       := -s -w \
  -X $(PKG)/core/buildinfo.Version=$(VERSION) \
  -X $(PKG)/core/buildinfo.Commit=$(COMMIT) \
  -X $(PKG)/core/buildinfo.BuildDate=$(BUILD_DATE)
# build and install (not the release) record the checkout, so that `marina
# plugin new` on a development build points the new plugin at this SDK
# (core/buildinfo.SourceDir); skipped for a path with a space, which -X cannot carry
empty         :=
space         := $(empty) $(empty)
DEV_LDFLAGS   := $(LDFLAGS)$(if $(findstring $(space),$(CURDIR)),, -X $(PKG)/core/buildinfo.Checkout=$(CURDIR))
# Tools and build caches live outside the checkout so repeated runs are fast.
CACHE_DIR     ?= $(HOME)/.cache/marina-tools
TOOLS_BIN     := $(CACHE_DIR)/bin
STATICCHECK   := $(TOOLS_BIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
FUZZTIME      ?= 5000x
# FUZZMINIMIZE bounds the minimizing of each new input the fuzzer keeps
# (Go's default, 60s, made a 5000x run take 3 s or 45 s by chance)
FUZZMINIMIZE  ?= 5s

.PHONY: all build install test test-short fuzz lint vet-darwin docs docs-check bench ci tools clean

all: build

# On macOS marina-lima (cmd/marina-lima, marina's Lima engine) is also Lima's
# host agent, the process that runs the VM through Virtualization.framework: it
# must carry the com.apple.security.virtualization entitlement, so every macOS
# build signs it ad hoc with it, exactly as Lima's Makefile signs limactl.
# marina itself no longer drives Virtualization.framework and is not signed
# with the entitlement: it needs none, and an entitlement it does not use is
# one it should not hold (the Go linker's own ad-hoc signature, on arm64, is
# all macOS asks of it). Elsewhere nothing is signed (codesign exists only on
# macOS).
HOST_OS       := $(shell uname -s)
ENTITLEMENTS  := packaging/darwin/vz.entitlements
SIGN           = codesign --entitlements $(ENTITLEMENTS) --force -s - $(1)

## build: bin/marina and bin/marina-lima, its Lima engine, which marina finds
## beside itself (on macOS: marina-lima signed ad hoc with
## packaging/darwin/vz.entitlements)
# cgo is required on macOS: marina-lima needs it for Lima's vz driver (without a
# C compiler the build fails instead of yielding a binary that cannot start a
# VM), and marina keeps it for the C library's user lookup (os/user, Lima's
# limayaml defaults). On Linux both are built without cgo, like the Linux
# release: os/user's pure-Go lookup then works for a uid the user database does
# not know (core/homeenv). One go build of both: they share most packages.
BUILD_CGO     = $(if $(filter Darwin,$(HOST_OS)),CGO_ENABLED=1 ,CGO_ENABLED=0 )
build:
	$(BUILD_CGO)$(GO) build -trimpath -ldflags '$(DEV_LDFLAGS)' -o bin/ ./cmd/marina ./cmd/marina-lima
ifeq ($(HOST_OS),Darwin)
	$(call SIGN,bin/marina-lima)
endif

## install: go install of marina and marina-lima, side by side, with the version
## stamped (on macOS: marina-lima signed like build)
GOBIN_DIR      = $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)
install:
	$(BUILD_CGO)$(GO) install -trimpath -ldflags '$(DEV_LDFLAGS)' ./cmd/marina ./cmd/marina-lima
ifeq ($(HOST_OS),Darwin)
	$(call SIGN,$(GOBIN_DIR)/marina-lima)
endif

## release-archive: $(DIST)/marina-<version>-<OS>-<arch>.tar.gz for RELEASE_GOOS/RELEASE_GOARCH
## (default: this machine), laid out like Lima's: bin/marina and bin/marina-lima
## (darwin ones built with cgo, marina-lima signed with the entitlement),
## share/lima/lima-guestagent.Linux-<arch>.gz (built from the pinned Lima
## module), share/doc/{marina,lima}; checked at file level
## (`go run ./packaging/release check`). A darwin archive needs a Mac.
RELEASE_GOOS   ?= $(shell $(GO) env GOOS)
RELEASE_GOARCH ?= $(shell $(GO) env GOARCH)
DIST           ?= dist
RELEASE_DIR     = $(DIST)/build/$(RELEASE_GOOS)-$(RELEASE_GOARCH)
RELEASE_BIN     = $(RELEASE_DIR)/marina
RELEASE_ENGINE  = $(RELEASE_DIR)/marina-lima
.PHONY: release-archive release-darwin release-checksums release-formula
release-archive:
	@if [ "$(RELEASE_GOOS)" = darwin ] && [ "$(HOST_OS)" != Darwin ]; then \
	  echo "a darwin archive needs cgo for darwin (Lima's vz driver) and codesign: build it on macOS (.github/workflows/release.yml)"; exit 1; fi
	CGO_ENABLED=$(if $(filter darwin,$(RELEASE_GOOS)),1,0) GOOS=$(RELEASE_GOOS) GOARCH=$(RELEASE_GOARCH) \
	  $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(RELEASE_DIR)/ ./cmd/marina ./cmd/marina-lima
ifeq ($(HOST_OS),Darwin)
	$(if $(filter darwin,$(RELEASE_GOOS)),$(call SIGN,$(RELEASE_ENGINE)),@echo "not signing $(RELEASE_ENGINE): a $(RELEASE_GOOS) binary carries no entitlements")
else
	@echo "not signing $(RELEASE_ENGINE): codesign exists only on macOS (and only darwin binaries are signed)"
endif
	$(GO) run ./packaging/release archive -version $(VERSION) -goos $(RELEASE_GOOS) -goarch $(RELEASE_GOARCH) \
	  -marina $(RELEASE_BIN) -marina-lima $(RELEASE_ENGINE) -go $(GO) -out $(DIST)

## release-darwin: both macOS archives (arm64, amd64), each with a signed
## marina-lima — on a Mac
release-darwin:
	$(MAKE) release-archive RELEASE_GOOS=darwin RELEASE_GOARCH=arm64
	$(MAKE) release-archive RELEASE_GOOS=darwin RELEASE_GOARCH=amd64

## release-checksums: $(DIST)/SHA256SUMS of the archives (sha256sum's format)
release-checksums:
	$(GO) run ./packaging/release checksums -dir $(DIST)

## release-formula: $(DIST)/marina.rb, the Homebrew formula for this release's
## darwin archives (from packaging/homebrew/marina.rb.tmpl and SHA256SUMS)
release-formula:
	$(GO) run ./packaging/release formula -version $(VERSION) -sums $(DIST)/SHA256SUMS \
	  -template packaging/homebrew/marina.rb.tmpl -out $(DIST)/marina.rb

## demo: marina's main job on this Linux machine: Docker, locally built service
## images, marina up on the host driver, status, doctor, a name resolved (root)
.PHONY: demo
demo:
	bash test/demo/demo.sh

## test: the README's test command (test/run.sh). Sets the machine up first
## (test-setup: Docker, the tier-2 images, the tier-3 binaries — installed and
## built when missing, cached), then runs every tier: marina's own packages with
## the race detector; the process-heavy ones PROC_COUNT times in a row (2 in CI,
## so a flake shows as a failure); the test harness packages (test/) without
## -race; last the end-to-end tests (test/e2e: marina up, cluster create/delete
## against the kind stand-in, beside a user's lab), verbosely
PROC_COUNT ?= $(if $(CI),2,1)
test:
	PROC_COUNT=$(PROC_COUNT) bash test/run.sh

## test-setup: a Docker engine (installed and started as root), the tier-2 test
## images and the tier-3 binaries, each rebuilt only when its inputs changed.
## MARINA_SKIP_DOCKER=1 / MARINA_SKIP_KUBE=1 skip parts for local loops (never in CI)
.PHONY: test-setup
test-setup:
	bash test/setup.sh

## test-stress: the suite under load — a busy loop on every core — with the
## process-heavy packages 3 times on one CPU (-cpu 1), then everything else.
## Flakes (timing assumptions) show here; fix them, never retry them
.PHONY: test-stress
test-stress: test-setup
	bash test/stress.sh

## test-vm: the on-demand VM tier (test/vm, as root; not in CI: ~6 min under
## TCG with the image cached): a Debian image built offline (cached), Lima's
## guest agent, then marina's lima driver boots, interrupts, breaks, recovers,
## stops and deletes a real qemu VM as a user of its own, and marina up runs
## against it (lima0, route, local DNS); each step timed (test/README.md)
.PHONY: test-vm
test-vm:
	bash test/vm/run.sh

## test-images: build the tier-2 test images (part of test-setup)
.PHONY: test-images
test-images:
	bash test/images/build.sh

## test-kube: build the tier-3 binaries (part of test-setup)
.PHONY: test-kube
test-kube:
	bash test/tools/build.sh

## SDK: the plugin SDK is a module of its own (sdk/go.mod; marina requires it
## with a replace to ./sdk). Package patterns name it by import path, so one go
## command covers both modules; fuzzing and `go mod tidy` run inside sdk/
SDK_MOD := github.com/bcollard/marina/sdk
PKGS := ./... $(SDK_MOD)/...

## test-short: quick loop while editing
test-short:
	$(GO) test -count=1 $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each (an execution count: Go 1.26's
## coordinator can fail a duration-bounded run with "context deadline exceeded", go.dev/issue/75804).
## Targets are found in the sources (func FuzzX in *_test.go), not with `go test -list`,
## which would compile every package's test binary once more just to list them
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for target in $$(grep -h -o '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | sed 's/^func //' | sort); do \
	    echo "fuzz $$dir $$target ($(FUZZTIME))"; \
	    case $$dir in \
	      ./sdk/*) $(GO) -C sdk test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./$${dir#./sdk/} ;; \
	      *) $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$dir ;; \
	    esac; \
	  done; \
	done

## lint: gofmt, go vet, staticcheck (both modules), and both go.mod files tidy
## (the SDK module must build on its own: a plugin depends on it alone)
lint: $(STATICCHECK)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) -C sdk mod tidy -diff
	$(GO) -C sdk build ./...
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

## vet-darwin: the macOS build compiles and vets without cgo; then the code only a
## cgo build compiles (darwin && cgo: Lima's vz driver and host agent, marina's
## core/vm/lima/limaengine and cmd/marina-lima, their importers) is type-checked from source with `import "C"`
## faked (packaging/darwin/cgocheck; arm64, whose files are a superset of amd64's).
## C, Objective-C and linking are checked only on a Mac (.github/workflows/release.yml)
vet-darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet $(PKGS)
	$(GO) run ./packaging/darwin/cgocheck -goarch arm64 ./...

## docs: regenerate docs/config.md from the config schema
docs:
	$(GO) test ./core/config -run '^TestReferenceUpToDate$$' -count=1 -update

## bench: benchmarks (ratios against a baseline measured in the same run), then
## the figures that have a goal as one table (test/bench/summary.sh; issue 14's
## start-up figures: docs/bench.md). Reported, never asserted.
## One package at a time (-p 1): two packages' benchmarks would load each other
bench:
	out=$$(mktemp); trap 'rm -f "$$out"' EXIT; set -o pipefail; \
	  $(GO) test -p 1 -timeout 60m -run '^$$' -bench . -benchmem $(PKGS) | tee "$$out"; rc=$$?; \
	  bash test/bench/summary.sh <"$$out"; exit $$rc

## ci: what .ci/run runs
ci: lint vet-darwin test fuzz

## tools: install the pinned linters into $(TOOLS_BIN)
tools: $(STATICCHECK)

$(STATICCHECK):
	GOBIN=$(TOOLS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## clean: remove build output (caches under $(CACHE_DIR) are kept; `rm -rf` it to reclaim space)
clean:
	rm -rf bin/

## proto: regenerate the plugin wire protocol (offline: Debian's protoc + pinned Go plugins)
PROTOC_GEN_GO      := $(TOOLS_BIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC := $(TOOLS_BIN)/protoc-gen-go-grpc
.PHONY: proto
proto: $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC)
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	cd sdk/proto && protoc --plugin=protoc-gen-go=$(PROTOC_GEN_GO) --plugin=protoc-gen-go-grpc=$(PROTOC_GEN_GO_GRPC) \
	  --go_out=. --go_opt=paths=source_relative \
	  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	  marina/plugin/v1/plugin.proto

$(PROTOC_GEN_GO):
	GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12

$(PROTOC_GEN_GO_GRPC):
	GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
