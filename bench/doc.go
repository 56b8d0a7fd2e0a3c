// Package bench measures how well the ask service owns waits for many clients, each figure
// beside a baseline taken in the same run on the same machine: a bare Echo handler behind the
// same JWT validation, a plain net/http writer of the same pre-encoded SSE frames, and the MCP Go
// SDK's streamable HTTP transport with its memory event store. Ratios, not absolute figures, are
// what hold on a noisy machine, so every workload alternates ours and its baseline in rounds.
//
// The suite (Run) is the load generator. The servers run in child processes (Serve, reached by
// re-executing the askbench binary with its `serve` subcommand), so that the child's resident
// memory, goroutines, CPU time and pprof profiles are the service's alone. Each child gets
// real tokens from its own development identity provider, and the suite drives it over loopback
// with the generated client (package gen).
//
// Time to ticket, stream delivery and replay run once more against a child whose store is Redis
// (package store/redis) on a redis-server the run starts, each beside its own bare baseline
// (RunOptions.Redis; skipped, and the report says so, when redis-server is not installed), and
// on a three-primary Redis Cluster (RunOptions.RedisCluster). Their time to ticket has a third
// side in every round, ours on an in-memory child, which is what the Redis target is judged on.
//
// Run writes REPORT.md and report.json: every figure with its baseline and ratio, the machine,
// the Go version, the commit and the date, which targets are met, and the top entries of the CPU
// and heap profiles the children wrote.
package bench
