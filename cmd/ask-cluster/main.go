// Command ask-cluster runs the ask service as several replicas sharing Redis behind nginx, each
// piece its own process on loopback: redis-server (persistence off), the development identity
// provider, the demo source, the llm-stub, three askd replicas with DAS_ASK_STORE=redis://…,
// and nginx with deploy/nginx/ask.conf balancing round-robin over the replicas with no
// stickiness. It needs redis-server and nginx (apt-get install -y redis-server nginx-light).
//
//	go run ./cmd/ask-cluster [-gateway 127.0.0.1:8080] [-replicas 3] [-replica-port 8181]
//	                        [-redis-port 6390 | -redis-cluster [-redis-cluster-replicas 1]]
//	                        [-lease 10s] [-phase 1|2] [-dir .state/cluster] [-q]
//	go run ./cmd/ask-cluster chaos [-short] [-phase2] [-redis-cluster] [-run NAME] [-out FILE]
//
// -phase 2 runs the replicas in phase 2 (ASK_PHASE=2: a branch per source, and divergence); the
// chaos subcommand is the chaos suite (`make chaos`, chaos.go). The gateway takes the service's usual address, so `make ask Q=...` works unchanged against
// the cluster; each replica is also reachable directly (8181, 8182, 8183). Every process's
// output is echoed with its name and kept in <dir>/logs. Ctrl-C stops everything. With
// -redis-cluster the store is a Redis Cluster of three primaries (each with a replica by
// default, every node on a free port) instead of one redis-server; it needs redis-cli too
// (redis-tools, which Debian's redis-server depends on). See docs/scale-out.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/das-ask/ask/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := status(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// status says run's error on stderr and gives the exit status: 0 for none and for -h, whose
// usage the flag set has printed (not an error to report), 1 otherwise.
func status(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "cluster:", err)
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "chaos" {
		return runChaos(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("ask-cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The usage names the chaos subcommand too (make chaos, docs/scale-out.md): -h said "Usage of
	// cluster" and listed these flags alone.
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: ask-cluster [flags]\n       ask-cluster chaos [flags]   (the chaos suite, make chaos; ask-cluster chaos -h lists its flags)\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var o Options
	fs.StringVar(&o.GatewayAddr, "gateway", "127.0.0.1:8080", "nginx's listen address (the service is under /ask)")
	fs.IntVar(&o.Replicas, "replicas", 3, "askd replicas")
	basePort := fs.Int("replica-port", 8181, "the first replica's port; the others follow")
	fs.IntVar(&o.RedisPort, "redis-port", 6390, "redis-server's port")
	fs.StringVar(&o.IdPAddr, "idp-addr", "127.0.0.1:8090", "the development identity provider's address")
	fs.StringVar(&o.SourceAddr, "source-addr", "127.0.0.1:8091", "the demo source's address")
	fs.StringVar(&o.StubAddr, "stub-addr", "127.0.0.1:8092", "the llm-stub's address")
	fs.DurationVar(&o.Lease, "lease", 10*time.Second, "DAS_ASK_LEASE_S: how soon a dead replica's runs end in error{interrupted}")
	fs.StringVar(&o.Dir, "dir", ".state/cluster", "binaries, keys, audit and logs")
	fs.StringVar(&o.Nginx, "nginx", "nginx", "the nginx binary")
	fs.StringVar(&o.StubScript, "stub-script", "", "the llm-stub's script file (default: its embedded script)")
	fs.BoolVar(&o.RedisCluster, "redis-cluster", false, "run the store on a Redis Cluster of three primaries (free ports; -redis-port is not used) instead of one redis-server")
	fs.IntVar(&o.RedisClusterReplicas, "redis-cluster-replicas", 1, "with -redis-cluster: replicas per primary")
	fs.IntVar(&o.Phase, "phase", 0, "1 or 2: the replicas' ASK_PHASE (2: a branch per source, and divergence); default: ASK_PHASE as set here, else 1")
	quiet := fs.Bool("q", false, "do not echo the processes' output (it stays in <dir>/logs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.Replicas < 1 {
		return fmt.Errorf("-replicas: want at least 1")
	}
	// Checked before anything starts: each replica is given -lease as DAS_ASK_LEASE_S, whole
	// seconds from 1 to 3600 (1500ms was cut to 1 s, 500ms made 0, which askd refuses, after
	// Redis and the rest had started), and a port no listener can take failed only at its start.
	if o.Lease < time.Second || o.Lease > time.Hour || o.Lease%time.Second != 0 {
		return fmt.Errorf("-lease %v: want whole seconds from 1s to %v (DAS_ASK_LEASE_S)", o.Lease, time.Hour)
	}
	if o.Phase != 0 && o.Phase != 1 && o.Phase != 2 {
		return fmt.Errorf("-phase %d: want 1 or 2 (ASK_PHASE)", o.Phase)
	}
	if o.RedisPort < 1 || o.RedisPort > 65535 {
		return fmt.Errorf("-redis-port %d: want a port from 1 to 65535", o.RedisPort)
	}
	if last := 65535 - (o.Replicas - 1); *basePort < 1 || *basePort > last {
		return fmt.Errorf("-replica-port %d: with %d replicas, want a port from 1 to %d", *basePort, o.Replicas, last)
	}
	// Every process is started in its own directory under Dir and told paths under it (redis's
	// --dir, nginx's prefix): named relative to this one, as the default is, each would look for
	// them below its own.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	o.Dir = dir
	for i := range o.Replicas {
		o.ReplicaAddrs = append(o.ReplicaAddrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(*basePort+i)))
	}
	o.KeepDir = true
	if !*quiet {
		o.Echo = stderr
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	c, err := Start(ctx, o)
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C or SIGTERM while it builds or starts the processes is a stop asked for, as
			// askd and ask-serve take one (Start has stopped what it had started): it exited 1,
			// "cluster: context canceled", and make reported an error.
			o.Logger.Info("stopped while starting", "cause", err.Error())
			return nil
		}
		return err
	}
	defer c.Stop()
	fmt.Fprintf(stdout, "ask cluster: %d replicas sharing %s behind %s (round-robin, no stickiness)\n",
		len(c.ReplicaURLs), c.RedisURL, c.GatewayURL)
	if rc := c.RedisCluster(); rc != nil {
		fmt.Fprintf(stdout, "  redis cluster: %d nodes (%d primaries), logs under %s\n", len(rc.Nodes), clusterPrimaries, filepath.Join(o.Dir, "redis-cluster"))
	}
	for i, u := range c.ReplicaURLs {
		fmt.Fprintf(stdout, "  askd-%d  %s\n", i+1, u)
	}
	fmt.Fprintf(stdout, "  idp %s  source %s  llm-stub %s\n", c.IdPURL, c.SourceURL, c.StubURL)
	fmt.Fprintln(stdout, tryLine(c.GatewayURL, c.IdPURL))
	return c.Wait(ctx)
}

// tryLine is the banner's make ask line, with ASK_URL and ASK_IDP when the gateway or the IdP
// moved off the addresses the CLI defaults to: without them make ask asks whatever holds
// 127.0.0.1:8080, not this cluster.
func tryLine(gateway, idp string) string {
	env := ""
	if gateway != config.DefaultClientURL {
		env += "ASK_URL=" + gateway + " "
	}
	if idp != config.DefaultClientIdP {
		env += "ASK_IDP=" + idp + " "
	}
	return "try: " + env + `make ask Q="How many sev1 incidents did we have in 2026-Q2?"   (Ctrl-C stops the cluster)`
}
