#!/usr/bin/env bash
# The multi-replica check on a Redis Cluster: cmd/ask-cluster with its store on a Redis Cluster
# of three primaries, each with a replica (redis-server --cluster-enabled yes, joined with
# redis-cli --cluster create). First `TestRedisCluster`: the whole conformance suite through
# nginx in front of three askd replicas, every check run (limits and webhooks as in
# scripts/cluster-check.sh), an askd replica SIGKILLed mid-run, and in the middle of a run the
# ticket's Redis primary failed over (CLUSTER FAILOVER), SIGKILLed (its replica elected), and
# the ticket's slot migrated live; `TestRedisClusterPhase2`: the suite with the phase checks, the
# replicas in phase 2, a replica killed once a source branch is open. Then the chaos suite on the cluster (every
# ticket of a bounded load checked while the cluster's primaries fail over, one is SIGKILLed,
# and the service's slots are migrated). See docs/scale-out.md.
#
#   scripts/cluster-check-rediscluster.sh          # the full run: chaos with 200 asks per scenario
#   scripts/cluster-check-rediscluster.sh -short   # what CI runs: chaos with 36 asks, the cluster's faults only
#
# Needs redis-server, redis-cli and nginx: apt-get install -y redis-server redis-tools nginx-light
set -euo pipefail
cd "$(dirname "$0")/.."
for bin in redis-server redis-cli nginx; do
	if ! command -v "$bin" >/dev/null 2>&1; then
		echo "cluster-check-rediscluster: $bin not found; install it with: apt-get install -y redis-server redis-tools nginx-light" >&2
		exit 1
	fi
done
ASK_CLUSTER_TEST=1 go test -count=1 -v -run 'TestRedisCluster' ./cmd/ask-cluster/
exec go run ./cmd/ask-cluster chaos -redis-cluster "$@"
