# Baton: make demo runs the end-to-end demo, make test the whole suite.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 20s
STATICCHECK_VERSION := v0.8.2

.PHONY: build test demo lint fuzz bench clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/baton ./cmd/baton

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

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

# The side-by-side harness (needs wrk; nginx when installed) and the
# testing.B benchmarks.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(GO) run ./bench

clean:
	rm -rf bin
