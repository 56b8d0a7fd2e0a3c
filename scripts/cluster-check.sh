#!/usr/bin/env bash
# The multi-replica check CI runs: the whole conformance suite through nginx in front of three
# askd replicas sharing Redis (no stickiness; the overflow check through a second group with a
# buffer of 8, the limits, deadline and TTL checks through a third with small limits, the webhook
# checks with the suite's receiver, which the replicas admit; every check run), the in-flight cap
# and the TTL replica against replica, then the chaos test — SIGKILL the replica running an ask mid-stream; the client
# reconnects through the gateway, sees no gap, and gets error{interrupted} and one done within
# the lease, and is restarted by the cluster; then one replica is frozen (SIGSTOP) and every keyed
# create and status read through nginx is still answered within seconds; and a replica SIGKILLed
# while its webhook POST is open at the receiver, after which a survivor delivers under the same
# webhook-id; then a second cluster whose replicas run phase 2, the whole suite with the phase
# checks through it and a replica killed once a source branch is open (TestClusterPhase2). Every
# piece is its own process (cmd/ask-cluster). The Redis store's and the
# service's own Redis tests run in `make test` whenever redis-server is installed.
#
# Needs redis-server and nginx: apt-get install -y redis-server nginx-light
set -euo pipefail
cd "$(dirname "$0")/.."
for bin in redis-server nginx; do
	if ! command -v "$bin" >/dev/null 2>&1; then
		echo "cluster-check: $bin not found; install it with: apt-get install -y redis-server nginx-light" >&2
		exit 1
	fi
done
ASK_CLUSTER_TEST=1 exec go test -count=1 -v -run 'TestCluster' ./cmd/ask-cluster/
