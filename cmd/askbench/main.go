// Command askbench measures the ask service against the limits of the machine it runs on and a
// peer, in one run, and writes the report (see package bench).
//
//	askbench [-out docs/bench] [-quick] [-no-micro] [-redis=false] [-redis-cluster=false] [-keepalive 10s] [-only workload,...]
//	askbench -render [-out docs/bench]
//
// runs the suite from the module root and writes <out>/REPORT.md and <out>/report.json
// (embedding <out>/FINDINGS.md, the hand-written analysis, when it exists); -render rewrites
// REPORT.md from report.json and FINDINGS.md without measuring. -redis (on by default) runs
// time-to-ticket, stream-delivery and replay once more against children whose store is a
// redis-server the run starts (loopback, persistence off), and -redis-cluster (on by default)
// once more on a Redis Cluster of three primaries the run starts (which needs redis-cli too);
// without them on PATH the report's Redis rows say they were skipped. The server side runs in child processes: askbench
// re-executes itself as
//
//	askbench serve -mode synthetic|stack [-keepalive D] [-max-events N] [-store redis://...|redis+cluster://...]
//
// which prints one JSON line naming its endpoints and serves until SIGTERM. `serve` is the
// suite's, not an operator's: it exposes a loopback debug endpoint (profiles, gates, stats).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/das-ask/ask/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "askbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(args) > 0 && args[0] == "serve" {
		fs := flag.NewFlagSet("askbench serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		mode := fs.String("mode", bench.ModeSynthetic, "synthetic or stack")
		keepAlive := fs.Duration("keepalive", 0, "the service's keep-alive interval (0: its default)")
		maxEvents := fs.Int("max-events", 0, "the service's per-ticket event bound (0: the mode's default)")
		storeURL := fs.String("store", "", "a redis:// URL: the synthetic service's store (default: in memory)")
		phase := fs.Int("phase", 0, "stack mode: 1 or 2 on the split demo (default: the one demo source, phase 1)")
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil // the usage was asked for, and printed
			}
			return err
		}
		if _, err := bench.RaiseNoFile(); err != nil {
			log.Warn("RLIMIT_NOFILE not raised", "err", err)
		}
		// The service's info lines (one per ask) are an operator's choice of cost; the bare
		// baselines log nothing, so the child logs warnings only.
		childLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return bench.Serve(ctx, bench.ServeOptions{
			Mode: *mode, KeepAlive: *keepAlive, MaxEvents: *maxEvents, Store: *storeURL, Phase: *phase,
			Handshake: stdout, Logger: childLog.With("component", "child"),
		})
	}
	fs := flag.NewFlagSet("askbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "docs/bench", "where to write REPORT.md and report.json")
	quick := fs.Bool("quick", false, "small sizes, for iterating (the report says so)")
	noMicro := fs.Bool("no-micro", false, "skip the Go microbenchmarks")
	keepAlive := fs.Duration("keepalive", 0, "keep-alive interval and idle window of the idle workload (0: the service's default, 10s)")
	render := fs.Bool("render", false, "measure nothing: rewrite <out>/REPORT.md from <out>/report.json and <out>/FINDINGS.md")
	redis := fs.Bool("redis", true, "also run time-to-ticket, stream-delivery and replay against the Redis store, on a redis-server started for the run (skipped, saying so, when redis-server is not on PATH)")
	redisCluster := fs.Bool("redis-cluster", true, "also run them on a Redis Cluster of three primaries started for the run (skipped, saying so, when redis-server or redis-cli is not on PATH)")
	redisNice := fs.Int("redis-nice", 0, "the nice value (-20..19) of each redis-server's main thread for the run; negative raises its priority and needs CAP_SYS_NICE (0: the default priority, as the runs of record)")
	only := fs.String("only", "", "comma-separated workloads to run (default all): time-to-ticket, ask-end-to-end, ask-phase2, stream-delivery, replay, peer-mcp, idle-streams, micro")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage was asked for, and printed
		}
		return err
	}
	// An argument is refused, not ignored: make bench ARGS="-redis false" parsed as -redis (true)
	// and an argument "false", and ran the Redis rounds it meant to skip.
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: askbench takes flags only (askbench -h); a boolean flag takes its value after =, as -redis=false", fs.Arg(0))
	}
	if *redisNice < -20 || *redisNice > 19 {
		return fmt.Errorf("-redis-nice %d: a nice value is from -20 to 19", *redisNice)
	}
	if *render {
		return bench.Render(*out)
	}
	var workloads []string
	if *only != "" {
		workloads = strings.Split(*only, ",")
	}
	start := time.Now()
	r, err := bench.Run(ctx, bench.RunOptions{Out: *out, Quick: *quick, NoMicro: *noMicro, KeepAlive: *keepAlive, Only: workloads, Redis: *redis, RedisCluster: *redisCluster, RedisNice: *redisNice, Logger: log})
	if err != nil {
		return err
	}
	for _, t := range r.Targets {
		state := "no figure"
		if t.Met != nil {
			state = map[bool]string{true: "met", false: "NOT MET"}[*t.Met]
		}
		fmt.Fprintf(stdout, "%-16s %-9s %s\n", t.Name, state, t.Measured)
	}
	if s := r.RedisSummary(); s != "" {
		fmt.Fprintf(stdout, "%-16s %s\n", "redis", s)
	}
	if s := r.RedisClusterSummary(); s != "" {
		fmt.Fprintf(stdout, "%-16s %s\n", "redis-cluster", s)
	}
	fmt.Fprintf(stdout, "report: %s (%s)\n", filepath.Join(*out, "REPORT.md"), time.Since(start).Round(time.Second))
	if len(r.Errors) > 0 {
		return fmt.Errorf("%d workload(s) failed; see the report", len(r.Errors))
	}
	return nil
}
