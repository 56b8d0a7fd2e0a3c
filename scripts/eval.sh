#!/usr/bin/env bash
# eval: score the ask service, and the model behind it, on a question set (cmd/ask-eval).
#
#   scripts/eval.sh [ARGS...]                 start the dev stack (llm-stub unless ASK_LLM names a
#                                             real model) in process and evaluate it
#   URL=http://host:8080/ask scripts/eval.sh  evaluate a service that is already running;
#                                             identities are minted by the dev IdP at ASK_IDP
#                                             (as for the ask CLI; IDP= or ASK_IDP_URL, the older
#                                             names, win when set beside it; default
#                                             http://127.0.0.1:8090) unless TOKENS is set
#                                             ("alice=TOKEN bob=TOKEN", one per identity of the set; handed to
#                                             ask-eval as $ASK_EVAL_TOKENS, not on its command line)
#
# SET=my-set.yaml picks the set (default: eval/sets/demo.yaml), OUT=dir where the report goes
# (default docs/eval/). ARGS go to cmd/ask-eval, e.g. --baseline docs/eval/report.json, --concurrency 8,
# --model NAME, --expect FILE. Exit status: 0 ran, 1 scores differ from --expect, 2 could not run
# (make eval reports any failure as 2: scripts that need the difference call this script).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
BIN=${BIN:-bin}
# Built, then run as itself: `go run` turns every failure into exit status 1, which would make
# "could not run" (2) read as "the scores differ" (1).
"$GO" build -o "$BIN/ask-eval" ./cmd/ask-eval
args=()
[[ -n "${SET:-}" ]] && args+=(--set "$SET")
[[ -n "${OUT:-}" ]] && args+=(--out "$OUT")
if [[ -z "${URL:-}" ]]; then
	exec "$BIN/ask-eval" --dev-stack "${args[@]}" "$@"
fi
args+=(--url "$URL")
if [[ -n "${TOKENS:-}" ]]; then
	# Through the environment, not as --token arguments: a process's arguments are readable by
	# every user of the machine (ps, /proc/PID/cmdline); its environment is not.
	export ASK_EVAL_TOKENS="$TOKENS"
else
	# ASK_IDP names the IdP as for the ask CLI: it was ignored here, and a caller who had exported
	# it for a stack on other addresses had ask-eval mint from 127.0.0.1:8090. The older names win.
	args+=(--idp "${IDP:-${ASK_IDP_URL:-${ASK_IDP:-http://127.0.0.1:8090}}}")
fi
exec "$BIN/ask-eval" "${args[@]}" "$@"
