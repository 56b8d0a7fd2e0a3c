#!/usr/bin/env bash
# Run every fuzz target for a bounded time, one after another (go test -fuzz takes one target
# per run). CI: scripts/fuzz-smoke.sh (10 s each, the default). Longer: FUZZTIME=5m
# scripts/fuzz-smoke.sh, which is what `make fuzz` runs. A crash leaves its input under the
# package's testdata/fuzz/<Target>/: commit it with the fix, so it stays a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-10s}"
GO="${GO:-go}"

# package  target
targets=(
  "./server FuzzCreateAskBody"
  "./server FuzzConversationBody"
  "./server FuzzStreamCursor"
  "./server FuzzGetAskPrefer"
  "./auth   FuzzBearer"
  "./auth   FuzzAuthenticate"
  "./client FuzzSSEParser"
)

for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz: $name in $pkg for $FUZZTIME"
  "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
done
