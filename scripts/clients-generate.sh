#!/usr/bin/env bash
# Regenerates the TypeScript client's types (clients/typescript/src/schema.d.ts) from the contract
# with openapi-typescript, at the version pinned in clients/typescript/package-lock.json.
#   scripts/clients-generate.sh           regenerate in place
#   scripts/clients-generate.sh --check   regenerate into a temporary file and fail if it differs
# Needs Node.js and npm; installs the client's pinned packages (npm ci) when they are missing.
# Without npm it says so and exits 0, unless CI is set, where it fails.
set -euo pipefail
cd "$(dirname "$0")/../clients/typescript"
check=false
[ "${1:-}" = "--check" ] && check=true

if ! command -v npm >/dev/null 2>&1; then
  if [ -n "${CI:-}" ]; then
    echo "clients-generate: npm is required (Node.js 20) to generate the TypeScript types" >&2
    exit 1
  fi
  echo "clients-generate: skipped: needs Node.js and npm (the TypeScript types are not regenerated)" >&2
  exit 0
fi
if [ ! -x node_modules/.bin/openapi-typescript ]; then
  npm ci --no-audit --no-fund --silent
fi

out=src/schema.d.ts
if $check; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  out="$tmp/schema.d.ts"
fi
if ! log=$(node_modules/.bin/openapi-typescript ../../openapi/ask.openapi.yaml --output "$out" 2>&1); then
  echo "$log" >&2
  exit 1
fi
if $check; then
  if ! diff -u src/schema.d.ts "$out" >"$tmp/diff"; then
    echo "check-generate: clients/typescript/src/schema.d.ts is out of date with openapi/ask.openapi.yaml; run 'make generate' and commit:" >&2
    head -50 "$tmp/diff" >&2
    exit 1
  fi
  echo "check-generate: clients/typescript/src/schema.d.ts matches openapi/ask.openapi.yaml"
fi
