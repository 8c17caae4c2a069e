# Baton: make demo runs the end-to-end demo, make test the whole suite.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
FUZZTIME ?= 20s
CI_FUZZTIME ?= 2s
STATICCHECK_VERSION := v0.8.2

.PHONY: build image-build-check test demo lint fuzz fuzz-ci bench clean

# The static build (build/static.sh), the same one the Dockerfile runs.
# TAGS=sidecar (the default): the build beside every agent; TAGS= the full
# build (the injector's image, the demo, chaos).
TAGS ?= sidecar
build:
	GO=$(GO) VERSION=$(VERSION) TAGS=$(TAGS) sh build/static.sh bin/baton

# The image's build without docker: the same script, then proof that the
# binary is static (no ELF interpreter, CGO_ENABLED=0), stripped and stamped.
image-build-check:
	GO=$(GO) VERSION=$(VERSION) sh build/static.sh bin/baton-image
	@if command -v file >/dev/null; then file bin/baton-image | grep -q 'statically linked' || { file bin/baton-image; echo 'bin/baton-image is not statically linked'; exit 1; }; fi
	BATON_BINARY=$(CURDIR)/bin/baton-image BATON_VERSION=$(VERSION) $(GO) test -count=1 -run 'TestStaticBinary|TestDockerfile|TestMakefileRunsTheScript' ./build

# Allocation counts mean nothing under -race (sync.Pool drops items): the
# tests that assert them run again without it, the request path's guard
# (proxy/allocs_test.go, built without -race) among them.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run 'NoAlloc' ./trust/taint/ ./handoff/record/ ./genai/ ./middleware/
	$(GO) test -count=1 -run 'TestRequestPathAllocs' ./proxy/
	cd charts/baton/test && $(GO) test -count=1 ./...

demo:
	$(GO) run ./cmd/baton demo

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Every native fuzz target, FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# Every native fuzz target for CI_FUZZTIME each, as CI runs them: each
# package's instrumented test binary compiled once, the targets run one per
# CPU at once; a failing input fails it, shown (.ci/fuzz).
fuzz-ci:
	GO=$(GO) FUZZTIME=$(CI_FUZZTIME) bash .ci/fuzz

# The side-by-side harness (needs wrk; nginx and haproxy when installed) and the
# testing.B benchmarks.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(GO) run ./bench

clean:
	rm -rf bin
