#!/usr/bin/env bash
# Run every fuzz target for a bounded number of executions, one after another (go test -fuzz
# takes one target per run). CI: scripts/fuzz-smoke.sh (about 10 s each on a 2-core machine).
# Longer: FUZZSCALE=30 scripts/fuzz-smoke.sh (about 5 min each), which is what `make fuzz` runs;
# FUZZTIME=<any -fuzztime value> overrides the budget of every target. A crash leaves its input
# under the package's testdata/fuzz/<Target>/: commit it with the fix, so it stays a regression
# test.
#
# The budgets are execution counts (-fuzztime Nx), not durations: with a duration, Go 1.26's
# fuzzing coordinator can report its own deadline as a failure ("context deadline exceeded",
# no crasher written) when -fuzztime ends while a worker is mid-call (golang/go#75804, fixed in
# Go 1.27). A count never arms that deadline, so the run ends cleanly however loaded the machine.
#
# A fuzz build instruments every package its test binary links, so it compiles them all again.
# The build tag fuzzsmoke leaves out the server tests that link the whole stack (the agent and
# the model SDKs, the demo source's SQLite, OpenTelemetry's exporters) and the two that use
# their helpers: none of them holds a fuzz target or anything one uses. On a cold cache that is about 100 s of compiling
# instead of about 320 s on a 2-core machine (2026-12-07); `make test` builds them all, as ever.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZSCALE="${FUZZSCALE:-1}"
GO="${GO:-go}"

# package  target  executions at scale 1 (5-10 s each on this 2-core machine, 2026-12-02)
targets=(
  "./server FuzzCreateAskBody    30000"
  "./server FuzzConversationBody 40000"
  "./server FuzzStreamCursor     40000"
  "./server FuzzGetAskPrefer     40000"
  "./server FuzzBodies           40000"
  "./server FuzzCreateAskFast    60000"
  "./server FuzzAppendJSONString 60000"
  "./auth   FuzzBearer           80000"
  "./auth   FuzzAuthenticate     100000"
  "./client FuzzSSEParser        100000"
)

for t in "${targets[@]}"; do
  read -r pkg name execs <<<"$t"
  budget="${FUZZTIME:-$((execs * FUZZSCALE))x}"
  echo "fuzz: $name in $pkg for $budget"
  "$GO" test -tags fuzzsmoke -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" "$pkg"
done
