# ask — one Makefile for the contract, the service, the demo stack, the client and the checks.
# Every target works on a fresh machine with only Go installed, unless it says otherwise.

SHELL        := bash
.SHELLFLAGS  := -eu -o pipefail -c

GO        ?= go
BIN       := bin
PKGS      := ./...

.PHONY: all help generate check-generate lint lint-schema test build ask-serve ask token conformance-ask conformance-gateway test-clients ask-serve-cluster cluster-check cluster-check-rediscluster chaos bench fuzz eval soak

all: check-generate lint test

## help: list these targets, each with what it does
help:
	@sed -n 's/^## //p' $(firstword $(MAKEFILE_LIST))

## generate: regenerate gen/ and the TypeScript client's types from openapi/ask.openapi.yaml (never edit them by hand)
generate:
	$(GO) generate ./gen
	scripts/clients-generate.sh

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

REDOCLY_VERSION := 2.77.0
REDOCLY_DIR     := $(or $(TMPDIR),/tmp)/ask-redocly-$(REDOCLY_VERSION)

## lint-schema: lint the contract with Redocly (needs Node.js and npm)
lint-schema:
	@test -x $(REDOCLY_DIR)/node_modules/.bin/redocly || \
	  npm install --prefix $(REDOCLY_DIR) --no-audit --no-fund --silent @redocly/cli@$(REDOCLY_VERSION)
	$(REDOCLY_DIR)/node_modules/.bin/redocly lint --format=stylish openapi/ask.openapi.yaml 2>&1 | grep -v '[║╔╚]'

# The commands a newcomer runs first, built in one go build (shared packages compile once, in
# parallel) into bin/, so make ask and make token after make ask-serve compile nothing again.
DEV_CMDS := ./cmd/ask-serve ./cmd/ask ./cmd/dev-idp

## ask-serve: the whole dev system in the foreground (IdP, demo source, llm-stub, ask service), built into bin/
ask-serve:
	@if [ -x $(BIN)/ask-serve ]; then echo "ask-serve: building bin/ask-serve, bin/ask, bin/dev-idp (only what changed)…"; \
	  else echo "ask-serve: building bin/ask-serve, bin/ask, bin/dev-idp for the first time: this compiles every dependency (the model SDKs, SQLite, OpenTelemetry) and takes about 2–4 minutes on a 2-core machine; later runs start in seconds."; fi
	@$(GO) build -o $(BIN)/ $(DEV_CMDS)
	@$(BIN)/ask-serve $(ARGS)

Q    ?=
# AS is make's built-in assembler variable ("as"): take the caller's value, else none, and the
# CLI's own default decides ($ASK_OID, else alice): an --as alice here asked as alice a caller
# who had exported ASK_OID=bob.
AS   := $(if $(filter default undefined,$(origin AS)),,$(AS))
OID  ?= alice
## ask: put Q to the running dev stack as AS (default $ASK_OID, else alice); ARGS="--continue" for a follow-up
# Q reaches the CLI through the environment, as typed: put in the recipe's text, make expanded
# its $ and the shell its quotes, $ and backquotes ("in $" lost its $, a backquoted word ran).
ask: export ASK_MAKE_Q = $(value Q)
ask:
	@test -n "$$ASK_MAKE_Q" || { echo 'usage: make ask Q="How many sev1 incidents did we have in 2026-Q2?" [AS=bob] [ARGS=--continue]' >&2; exit 1; }
	@test -x $(BIN)/ask || echo "ask: building bin/ask (the first time takes a minute or two)…" >&2
	@$(GO) build -o $(BIN)/ask ./cmd/ask && $(BIN)/ask $(if $(AS),--as "$(AS)") $(ARGS) -- "$$ASK_MAKE_Q"

## token: print a bearer for OID (default alice) from the running dev identity provider ($ASK_IDP, as for make ask; ARGS="--idp …" wins)
token:
	@$(GO) build -o $(BIN)/dev-idp ./cmd/dev-idp && $(BIN)/dev-idp token --oid "$(OID)" $(if $(ASK_IDP),--idp "$$ASK_IDP") $(ARGS)

## conformance-ask: the contract's checks against the service directly: the dev stack with the llm-stub in process, or URL=... (identities from the dev IdP at $ASK_IDP, or IDP=..., which wins; ARGS=--behaviour adds the behaviour checks)
conformance-ask:
	@URL="$(URL)" scripts/conformance-ask.sh $(ARGS)

## conformance-gateway: the same checks through nginx with deploy/nginx/ask.conf (installs nginx-light if missing; needs root)
conformance-gateway:
	@scripts/conformance-gateway.sh $(ARGS)

## test-clients: TypeScript, Python and browser clients against a dev stack (needs Node 20, npm, python3, chromium)
test-clients:
	scripts/clients-test.sh

## ask-serve-cluster: three askd replicas sharing Redis behind nginx round-robin (no stickiness) on 127.0.0.1:8080/ask, with the dev IdP, demo source and llm-stub, each its own process (needs redis-server and nginx-light); REDIS_CLUSTER=1: the store on a Redis Cluster of three primaries with a replica each; ARGS="-phase 2": the replicas in phase 2
ask-serve-cluster:
	@scripts/cluster-serve.sh $(if $(REDIS_CLUSTER),-redis-cluster) $(ARGS)

## cluster-check: the conformance suite, every check run (limits and webhooks included), through nginx in front of three replicas sharing Redis, the replica-kill chaos test and a rolling restart under load; then the same in phase 2 (the phase checks, a replica killed once a source branch is open)
cluster-check:
	@scripts/cluster-check.sh

## cluster-check-rediscluster: the same on a Redis Cluster of three primaries with a replica each: conformance through nginx (phase 1 and phase 2), a replica killed, the ticket's primary failed over, SIGKILLed and its slot migrated mid-run, then the chaos suite's Redis Cluster scenarios (ARGS=-short: the CI version; needs redis-server, redis-cli and nginx)
cluster-check-rediscluster:
	@scripts/cluster-check-rediscluster.sh $(ARGS)

## chaos: the chaos suite against the cluster through nginx: replica kill/freeze, Redis pauses and freezes, lost replies, a cancel storm, a Redis restart in durable mode, 200 asks each, every ticket checked, one table (ARGS=-short: the CI version; ARGS=-phase2: the replicas in phase 2, every branch checked too; needs redis-server and nginx)
chaos:
	@scripts/chaos.sh $(ARGS)

## bench: measure the service against this machine's limits and the MCP Go SDK, with the Redis store too when redis-server is installed, on one primary and on a three-primary Redis Cluster (ARGS=-redis=false -redis-cluster=false: memory only); writes docs/bench/REPORT.md and docs/bench/report.json (under 5 minutes)
bench:
	$(GO) run ./cmd/askbench -out docs/bench/ $(ARGS)

## soak: the leak soak: a long mixed load (asks, streams dropped and resumed with Last-Event-ID, cancels, keyed retries) on each store, memory and Redis, and with the real phase-2 agent (a quarter as many asks), then back to the goroutines and about the heap before it once the TTL has passed (ASK_SOAK_ASKS, default 20000; make test runs 300; Redis part needs redis-server)
soak:
	ASK_SOAK_ASKS=$(or $(ASK_SOAK_ASKS),20000) $(GO) test -count=1 -timeout 60m -run '^TestMixedLoadReturnsToBaseline$$' -v ./server

## fuzz: every fuzz target for 30 times the CI budget of executions (about 5 min each; FUZZSCALE=N, or FUZZTIME=<go -fuzztime value>); CI runs scripts/fuzz-smoke.sh (about 10 s each)
fuzz:
	FUZZSCALE=$(or $(FUZZSCALE),30) FUZZTIME=$(FUZZTIME) scripts/fuzz-smoke.sh

## eval: score the service and its model on a question set (default eval/sets/demo.yaml): the dev stack in process (llm-stub unless ASK_LLM names a model), or URL=... (identities from the dev IdP at $ASK_IDP, or IDP=..., which wins; or TOKENS="alice=T bob=T"); SET=my-set.yaml, OUT=dir (default docs/eval/); writes REPORT.md, report.json, report.png; ARGS="--baseline docs/eval/report.json" prints the difference
eval:
	@URL="$(URL)" SET="$(SET)" OUT="$(OUT)" scripts/eval.sh $(ARGS)
