#!/usr/bin/env bash
# The chaos suite: the cluster (three askd replicas sharing Redis behind nginx, each piece its own
# process) under a bounded load, one fault per scenario, every ticket checked; prints one table and
# exits non-zero if any promise broke. Arguments go to `cmd/ask-cluster chaos` (-short for the CI
# version, -run NAME for one scenario, -out FILE to keep the table). See docs/scale-out.md.
#
# Needs redis-server and nginx: apt-get install -y redis-server nginx-light
set -euo pipefail
cd "$(dirname "$0")/.."
for bin in redis-server nginx; do
	if ! command -v "$bin" >/dev/null 2>&1; then
		echo "chaos: $bin not found; install it with: apt-get install -y redis-server nginx-light" >&2
		exit 1
	fi
done
exec go run ./cmd/ask-cluster chaos "$@"
