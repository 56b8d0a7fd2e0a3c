# ask — one Makefile for the contract, the service, the demo stack, the client and the checks.
# Every target works on a fresh machine with only Go installed, unless it says otherwise.

GO        ?= go
BIN       := bin
PKGS      := ./...

.PHONY: all generate check-generate lint test test-short build

all: check-generate lint test

## generate: regenerate gen/ from openapi/ask.openapi.yaml (never edit gen/ by hand)
generate:
	$(GO) generate ./gen

## check-generate: regenerate and fail if anything in gen/ changed
check-generate:
	@scripts/check-generate.sh

## lint: gofmt, go vet, staticcheck, go mod tidy -diff
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) mod tidy -diff

## test: every Go test, with the race detector
test:
	$(GO) test -race -count=1 $(PKGS)

## build: every command into bin/
build:
	$(GO) build -o $(BIN)/ ./cmd/...
