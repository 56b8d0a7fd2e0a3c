#!/usr/bin/env bash
# Regenerates gen/ from the contract and fails if the result differs from what is committed
# (or from the working tree, when gen/ has uncommitted changes of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r gen "$tmp/before"
go generate ./gen
if ! diff -ru "$tmp/before" gen >"$tmp/diff"; then
  echo "check-generate: gen/ is out of date with openapi/ask.openapi.yaml; run 'make generate' and commit:" >&2
  head -50 "$tmp/diff" >&2
  exit 1
fi
echo "check-generate: gen/ matches openapi/ask.openapi.yaml"
# The TypeScript client's types come from the same document (absent in a partial copy of the tree).
if [ -d clients/typescript ]; then
  scripts/clients-generate.sh --check
fi
