#!/usr/bin/env bash
# The ask service as a cluster on this machine: redis-server (persistence off), the dev IdP,
# the demo source, the llm-stub, three askd replicas sharing Redis, and nginx round-robin in
# front of them on 127.0.0.1:8080/ask (no stickiness). Arguments go to cmd/ask-cluster
# (-replicas, -lease, -gateway, -q, -redis-cluster for a Redis Cluster of three primaries
# instead of one redis-server, ...). Ctrl-C stops everything.
#
# Needs redis-server and nginx: apt-get install -y redis-server nginx-light
set -euo pipefail
cd "$(dirname "$0")/.."
bins="redis-server nginx"
case " $* " in *" -redis-cluster "* | *" --redis-cluster "* | *" -redis-cluster="*) bins="$bins redis-cli" ;; esac
for bin in $bins; do
	if ! command -v "$bin" >/dev/null 2>&1; then
		echo "cluster-serve: $bin not found; install it with: apt-get install -y redis-server redis-tools nginx-light" >&2
		exit 1
	fi
done
# Built, then run as itself: `go run` answers Ctrl-C with exit status 1 even when the program it
# runs stops cleanly, so make would report a failure for every Ctrl-C.
go build -o bin/ask-cluster ./cmd/ask-cluster
exec bin/ask-cluster "$@"
