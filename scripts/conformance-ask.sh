#!/usr/bin/env bash
# conformance-ask: the ask contract's conformance suite against the service directly.
#
#   scripts/conformance-ask.sh [ARGS...]            start the dev stack (llm-stub unless ASK_LLM
#                                                   names a real model) in process and check it
#   URL=http://host:8080/ask scripts/conformance-ask.sh [ARGS...]
#                                                   check an implementation that is already
#                                                   running; identities are minted by the dev IdP
#                                                   at ASK_IDP (as for the ask CLI; IDP= or
#                                                   ASK_IDP_URL, the older names, win when set
#                                                   beside it; default http://127.0.0.1:8090) unless
#                                                   ASK_TOKEN_A and ASK_TOKEN_B are set (or ARGS
#                                                   hold --token-a and --token-b), and the
#                                                   audit log is read from AUDIT (default, for
#                                                   the dev stack's own URL, port 8080 on this
#                                                   machine, http://127.0.0.1:8091,
#                                                   the demo source; with
#                                                   --phase2 or ASK_PHASE=2 also
#                                                   http://127.0.0.1:8093, the phase-2 demo's
#                                                   catalog); several are comma-separated
#
# ARGS go to cmd/conformance, e.g. --behaviour, --only 'replay\.', --json, --overflow-url.
# Exit status: 0 all passed, 1 a check failed, 2 the suite could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
BIN=${BIN:-bin}
# Built, then run as itself: `go run` turns every failure into exit status 1, so "the suite
# could not run" (2) would read as "a check failed" (1).
"$GO" build -o "$BIN/conformance" ./cmd/conformance
if [[ -z "${URL:-}" ]]; then
	exec "$BIN/conformance" --dev-stack "$@"
fi

# given reports whether ARGS set the flag $1 (-flag, --flag, either with =value).
given() {
	local flag=$1 a
	shift
	for a in "$@"; do
		case $a in -"$flag" | --"$flag" | -"$flag"=* | --"$flag"=*) return 0 ;; esac
	done
	return 1
}
args=(--url "$URL")
# Tokens given in ARGS (--token-a, --token-b) are the caller's choice as much as ASK_TOKEN_A and
# ASK_TOKEN_B are: with an --idp beside them the suite would mint its own and ignore them.
if [[ -z "${ASK_TOKEN_A:-}" || -z "${ASK_TOKEN_B:-}" ]] && ! given token-a "$@" && ! given token-b "$@"; then
	# ASK_IDP names the IdP as for the ask CLI: it was ignored here, and a caller who had exported
	# it for a stack on other addresses had the suite mint from 127.0.0.1:8090. The older names win.
	args+=(--idp "${IDP:-${ASK_IDP_URL:-${ASK_IDP:-http://127.0.0.1:8090}}}")
fi
# The phase-2 demo (make ask-serve ARGS="-phase 2") has two sources, each auditing the calls
# made to it: the warehouse at 8091 and the catalog at 8093. Reading only the first, every
# catalog step has no audit line and audit.step-ms fails. Those are this machine's: a URL
# elsewhere (someone else's service) has no default, and the audit checks skip unless AUDIT
# names its sources' logs; a default there would fail them on a log its sources never wrote.
audit=
# Only the dev stack's own address (port 8080): a stack moved to other ports (make ask-serve
# ARGS="-addr … -source-addr …") has its sources elsewhere too, and the default read the audit of
# another stack's source on 8091, or of none, and failed audit.step-ms and audit.caller-identity.
if [[ $URL =~ ^https?://(localhost|127\.[0-9.]+|\[::1\]):8080(/|$) ]]; then
	audit=http://127.0.0.1:8091
	if [[ "${ASK_PHASE:-}" == 2 || " $* " == *" --phase2 "* || " $* " == *" --phase2=true "* ]]; then
		audit+=,http://127.0.0.1:8093
	fi
fi
if [[ "${AUDIT-$audit}" != "" ]]; then
	args+=(--audit "${AUDIT:-$audit}")
fi
exec "$BIN/conformance" "${args[@]}" "$@"
