#!/usr/bin/env bash
# conformance-gateway: the whole conformance suite through nginx, with the checked-in gateway
# config (deploy/nginx/ask.conf) mounting the dev stack at /ask.
#
# cmd/conformance --dev-stack --gateway starts the dev stack in process (plus a small-buffer
# stack for the overflow check and a keep-alive-less one for the control), renders the
# checked-in config for each with proxy_read_timeout shortened to 2 s, runs
# `nginx -p <tmpdir> -c <tmpdir>/nginx.conf -g 'daemon off;'` in the foreground, runs every
# check through the gateway's /ask, then the two gateway checks (a 3 s silent model wait
# survives a 2 s idle timeout because of keep-alives; without keep-alives it is cut off), and
# stops nginx and the stacks on exit.
#
# nginx (the Debian package) is installed when missing, which needs root.
# ARGS go to cmd/conformance, e.g. --behaviour, --only 'gateway\.', --json.
set -euo pipefail
cd "$(dirname "$0")/.."

NGINX=${NGINX:-nginx}
if ! command -v "$NGINX" >/dev/null 2>&1; then
	if [[ "$(id -u)" != 0 ]]; then
		echo "conformance-gateway: nginx is not installed; run: sudo apt-get install -y nginx-light" >&2
		exit 2
	fi
	echo "conformance-gateway: installing nginx-light" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq nginx-light >&2 || apt-get install -y -qq nginx >&2
fi

GO=${GO:-go}
BIN=${BIN:-bin}
# Built, then run as itself: `go run` turns every failure into exit status 1 (see conformance-ask.sh).
"$GO" build -o "$BIN/conformance" ./cmd/conformance
exec "$BIN/conformance" --dev-stack --gateway --nginx "$NGINX" --nginx-conf deploy/nginx/ask.conf "$@"
