#!/usr/bin/env bash
# Runs the clients beyond Go against one dev stack that it starts and stops:
#   1. the TypeScript client's tests (clients/typescript: npm test, including the spec-drift proof),
#   2. the Python example's tests (clients/python: python3 -m unittest),
#   3. the reference page in Chromium with Playwright (demo/ui/test: npm test), which saves
#      screenshots in demo/ui/test/artifacts/ (a CI artifact).
# Needs Go, Node.js 20 with npm, python3 and Debian's chromium at /usr/bin/chromium (or $CHROMIUM).
# Every suite runs even when an earlier one fails; the exit status is non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tmp=$(mktemp -d)
stack_pid=""
cleanup() {
  if [ -n "$stack_pid" ] && kill -0 "$stack_pid" 2>/dev/null; then
    kill -TERM "$stack_pid"
    wait "$stack_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

for tool in node npm python3; do
  command -v "$tool" >/dev/null || { echo "clients-test: $tool is required" >&2; exit 1; }
done
chromium_bin=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium_bin" ] || { echo "clients-test: $chromium_bin is missing (apt-get install chromium)" >&2; exit 1; }

echo "--- installing the pinned npm packages (npm ci)"
(cd clients/typescript && npm ci --no-audit --no-fund --silent)
(cd demo/ui/test && npm ci --no-audit --no-fund --silent)

echo "--- starting the dev stack (cmd/clients-stack)"
go build -o "$tmp/clients-stack" ./cmd/clients-stack
"$tmp/clients-stack" -urls "$tmp/urls.json" >/dev/null 2>"$tmp/stack.log" &
stack_pid=$!
for _ in $(seq 300); do
  [ -s "$tmp/urls.json" ] && break
  kill -0 "$stack_pid" 2>/dev/null || { cat "$tmp/stack.log" >&2; echo "clients-test: the dev stack did not start" >&2; exit 1; }
  sleep 0.1
done
[ -s "$tmp/urls.json" ] || { echo "clients-test: the dev stack did not start within 30 s" >&2; exit 1; }
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$tmp/urls.json" "$1"; }
ASK_URL=$(json_field ask)
ASK_IDP=$(json_field idp)
ASK_UI=$(json_field ui)
export ASK_URL ASK_IDP ASK_UI CHROMIUM="$chromium_bin"
echo "    ask $ASK_URL  idp $ASK_IDP  page $ASK_UI"

failed=()
echo "--- TypeScript client (clients/typescript)"
(cd clients/typescript && npm test --silent) || failed+=(typescript)
echo "--- Python example (clients/python)"
(cd clients/python && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -v) || failed+=(python)
echo "--- reference page in Chromium (demo/ui/test)"
(cd demo/ui/test && npm test --silent) || failed+=(browser)
echo "    screenshots: $(ls "$root"/demo/ui/test/artifacts/*.png 2>/dev/null | tr '\n' ' ')"

if [ "${#failed[@]}" -gt 0 ]; then
  echo "--- the dev stack's log:" >&2
  tail -50 "$tmp/stack.log" >&2
  echo "clients-test: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "clients-test: TypeScript, Python and browser tests passed"
