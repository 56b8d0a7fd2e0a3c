package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/seal"
)

// Options configure a cluster. Zero values mean: every address on 127.0.0.1 with a free
// port, three replicas, the service's defaults.
type Options struct {
	// Root is the repository's root (for go build and deploy/nginx/ask.conf); "" means ".".
	Root string
	// Dir keeps the binaries, the IdP's keys, the audit log, every process's log and nginx's
	// files; "" means a new temporary directory, removed by Stop.
	Dir string
	// Replicas is the number of askd processes; 0 means 3.
	Replicas int
	// GatewayAddr is nginx's listen address; the service is at http://GatewayAddr/ask.
	GatewayAddr string
	// ReplicaAddrs are the replicas' listen addresses (missing ones get free ports).
	ReplicaAddrs []string
	// RedisPort is redis-server's port on 127.0.0.1; 0 means a free one.
	RedisPort int
	// IdPAddr, SourceAddr and StubAddr are the dev IdP's, the demo source's and the
	// llm-stub's listen addresses.
	IdPAddr, SourceAddr, StubAddr string
	// Nginx is the nginx binary; "" means nginx on PATH.
	Nginx string
	// GatewayReadTimeout is nginx's proxy_read_timeout; 0 means the checked-in 60 s.
	GatewayReadTimeout time.Duration
	// Lease, KeepAlive, TTL and Deadline set DAS_ASK_LEASE_S, DAS_ASK_KEEPALIVE_S,
	// DAS_ASK_TTL_S and DAS_ASK_DEADLINE_S (whole seconds) on every replica; 0 leaves the
	// service's default.
	Lease, KeepAlive, TTL, Deadline time.Duration
	// MaxEvents sets DAS_ASK_MAX_EVENTS on the main replicas; 0 leaves the default.
	MaxEvents int
	// Echo receives every process's output, each line prefixed with its name; nil keeps it in
	// the log files only.
	Echo io.Writer
	// Logger receives the cluster's own progress; nil discards it.
	Logger *slog.Logger
	// KeepDir leaves Dir in place on Stop.
	KeepDir bool
	// StubScript is the llm-stub's script file; "" means its embedded default.
	StubScript string
	// OverflowReplicas, when not 0, starts a second group of replicas sharing the same Redis
	// under another key prefix, with DAS_ASK_MAX_EVENTS=OverflowMaxEvents (default 8), behind
	// their own gateway (OverflowURL): the target of the conformance suite's overflow check.
	OverflowReplicas  int
	OverflowMaxEvents int
	// LimitsReplicas, when not 0, starts a third group of replicas sharing the same Redis under
	// another key prefix (ask-limits:), with LimitsEnv added to their environment last (small
	// caps, a short deadline and TTL: DAS_ASK_MAX_INFLIGHT_PER_ID, DAS_ASK_DEADLINE_S, …),
	// behind their own gateway (LimitsURL): the target of the conformance suite's limits checks.
	LimitsReplicas int
	LimitsEnv      []string
	// Env is added to every replica's environment (e.g. the DAS_ASK_WEBHOOK_* settings).
	Env []string
	// Phase sets ASK_PHASE on every replica (2: a branch per source, and divergence); 0 leaves
	// the default, phase 1.
	Phase int
	// ReplicaStore, when set, gives replica i (0-based) its DAS_ASK_STORE instead of the
	// cluster's Redis URL (the chaos suite puts a fault-injecting proxy in front of Redis).
	ReplicaStore func(i int, redisURL string) string
	// ReplicaEnv is added to every replica's environment.
	ReplicaEnv []string
	// DurableRedis runs redis-server with AOF (appendfsync everysec) instead of persistence
	// off, for the service's durable mode; KillRedis and RestartRedis then work.
	DurableRedis bool
	// RedisCluster runs the store on a Redis Cluster of three primaries (redis-server
	// --cluster-enabled yes, persistence off, joined with redis-cli --cluster create, every
	// port a free one: RedisPort is not used) instead of one redis-server, each primary with
	// RedisClusterReplicas replicas; the replicas get the cluster's URL (RedisURL).
	RedisCluster         bool
	RedisClusterReplicas int
}

// Cluster is a running cluster: Redis, the dev IdP, the demo source, the llm-stub, the
// replicas and nginx, each its own process.
type Cluster struct {
	// GatewayURL is the service through nginx (http://host:port/ask); ReplicaURLs each
	// replica directly; IdPURL, SourceURL, StubURL the dev pieces; RedisURL the store.
	GatewayURL, IdPURL, SourceURL, StubURL, RedisURL string
	ReplicaURLs                                      []string
	// LimitsReplicaURLs are the limits group's replicas, directly.
	LimitsReplicaURLs []string
	// OverflowURL is the overflow group's gateway, when Options.OverflowReplicas is set;
	// LimitsURL the limits group's, when Options.LimitsReplicas is set.
	OverflowURL, LimitsURL string

	opts     Options
	log      *slog.Logger
	redis    *redisserver.Server
	rcluster *redisserver.Cluster // when Options.RedisCluster
	durable  *durableRedis        // when Options.DurableRedis
	others   []*proc              // idp, source, stub, nginx
	replicas []*member            // kept running: restarted when they die
	overflow []*member
	limits   []*member
	ownDir   bool
	logDir   string            // every process's log
	bins     string            // the built commands
	authEnv  []string          // the bearer settings the service and the source share
	view     *redisstore.Store // opened by Runner, to read tickets' runners
}

// Start builds the commands and starts every process, returning once each is ready. On error
// everything started is stopped.
//
// Ports not given in o are picked by listening on port 0 and closing, so another socket (an
// outgoing connection's ephemeral port) may take one before its process binds it: a start
// that fails on an address already in use is stopped and made again, up to startAttempts
// times in all.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, o)
		if err == nil || attempt == startAttempts || ctx.Err() != nil || !portTaken(err) {
			return c, err
		}
		if o.Logger != nil {
			o.Logger.Warn("a port picked for the cluster was taken before it was bound; starting again", "attempt", attempt, "err", err)
		}
	}
}

// startAttempts bounds how often Start makes the cluster when a picked port was taken.
const startAttempts = 3

// portTaken reports whether err (a process's failure to start, with its log's tail) says a
// port was in use.
func portTaken(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "address already in use")
}

func start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Root == "" {
		o.Root = "."
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Nginx == "" {
		o.Nginx = "nginx"
	}
	if o.Echo != nil {
		o.Echo = &lockedWriter{w: o.Echo} // one line at a time from every process
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c = &Cluster{log: log}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "ask-cluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	}
	c.opts = o
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	c.logDir, c.bins = filepath.Join(o.Dir, "logs"), filepath.Join(o.Dir, "bin")
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return c, err
	}
	nginxBin, err := exec.LookPath(o.Nginx)
	if err != nil {
		return c, fmt.Errorf("nginx not found (apt-get install -y nginx-light): %w", err)
	}
	if err := build(ctx, o.Root, c.bins); err != nil {
		return c, err
	}
	if err := c.startRedis(ctx); err != nil {
		return c, err
	}
	if err := c.startDev(ctx); err != nil {
		return c, err
	}
	groups, err := c.startReplicas(ctx)
	if err != nil {
		return c, err
	}
	if err := c.startGateway(ctx, nginxBin, groups); err != nil {
		return c, err
	}
	log.Info("cluster ready", "gateway", c.GatewayURL, "replicas", strings.Join(c.ReplicaURLs, " "), "idp", c.IdPURL, "redis", c.RedisURL)
	return c, nil
}

// Stop stops every process (replicas first, SIGTERM with a grace, then SIGKILL), then Redis,
// and removes the directory it created.
func (c *Cluster) Stop() {
	for _, m := range c.members() {
		m.Stop(15 * time.Second)
	}
	for i := len(c.others) - 1; i >= 0; i-- {
		c.others[i].stop(5 * time.Second)
	}
	if c.view != nil {
		_ = c.view.Close()
	}
	if c.redis != nil {
		_ = c.redis.Stop()
	}
	if c.rcluster != nil {
		_ = c.rcluster.Stop()
	}
	if c.durable != nil {
		c.durable.stop()
	}
	if c.ownDir && !c.opts.KeepDir {
		_ = os.RemoveAll(c.opts.Dir)
	}
}

// members are every askd process: the main group's, the overflow group's, the limits group's.
func (c *Cluster) members() []*member {
	return append(append(append([]*member{}, c.replicas...), c.overflow...), c.limits...)
}

// Kill sends SIGKILL to replica i (0-based) and waits for it to die; the cluster then starts
// it again (see Restarts).
func (c *Cluster) Kill(i int) { c.replicas[i].Kill() }

// Freeze sends SIGSTOP to replica i: it stays, holding its connections and leases, answering
// nothing. Thaw sends SIGCONT.
func (c *Cluster) Freeze(i int) error { return c.replicas[i].Freeze() }
func (c *Cluster) Thaw(i int) error   { return c.replicas[i].Thaw() }

// RollingRestart stops replica i gracefully (SIGTERM), waits for it to exit and for its
// supervisor's restart of it on the same address to serve the contract.
func (c *Cluster) RollingRestart(ctx context.Context, i int) error {
	m := c.replicas[i]
	old, err := m.Terminate()
	if err != nil {
		return err
	}
	select {
	case <-old.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for m.proc() == old {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.WaitReplicaReady(ctx, i)
}

// Restarts is how many times replica i was started again after it died.
func (c *Cluster) Restarts(i int) int { return c.replicas[i].Restarts() }

// WaitReplicaReady waits until replica i (restarted or not) serves the contract.
func (c *Cluster) WaitReplicaReady(ctx context.Context, i int) error {
	return c.replicas[i].proc().waitReady(ctx, getReady(c.ReplicaURLs[i]+"/v1/openapi.json"))
}

// Runner returns the index of the replica running ticket: the ticket's runner as the store
// records it (store/redis's Runner), matched with the replica name each replica's log states
// at its start ("store: redis"; a restarted replica states a new one).
func (c *Cluster) Runner(ctx context.Context, ticket string) (int, error) {
	v, err := c.storeView(ctx)
	if err != nil {
		return -1, err
	}
	name, err := v.Runner(ctx, ticket)
	if err != nil {
		return -1, fmt.Errorf("ticket %s's runner: %w", ticket, err)
	}
	needle := []byte(`"replica":"` + name + `"`)
	for i, m := range c.replicas {
		for _, line := range bytes.Split(m.proc().log(), []byte("\n")) {
			if bytes.Contains(line, needle) && bytes.Contains(line, []byte(`"msg":"store: redis"`)) {
				return i, nil
			}
		}
	}
	return -1, fmt.Errorf("ticket %s's runner %q: %w", ticket, name, errNotRunning)
}

// Holder returns the index of the replica whose webhook deliverer is holder (its log's
// "webhook deliverer started" line names it).
func (c *Cluster) Holder(holder string) (int, error) {
	needle := []byte(`"holder":"` + holder + `"`)
	for i, m := range c.replicas {
		for _, line := range bytes.Split(m.proc().log(), []byte("\n")) {
			if bytes.Contains(line, needle) && bytes.Contains(line, []byte(`"msg":"webhook deliverer started"`)) {
				return i, nil
			}
		}
	}
	return -1, errNotRunning
}

// Logs returns every process's log, for a failing test.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, m := range c.members() {
		fmt.Fprintf(&b, "==> %s (restarted %d times)\n%s\n", m.name, m.Restarts(), tailOf(m.proc().log(), 4000))
	}
	for _, p := range c.others {
		fmt.Fprintf(&b, "==> %s\n%s\n", p.name, tailOf(p.log(), 4000))
	}
	return b.String()
}

// Wait returns when one of the pieces every replica needs (the IdP, the demo source, the
// llm-stub, nginx) exits (its error), or ctx is done (nil). A replica that dies is not among
// them: it is restarted, and the cluster keeps serving meanwhile.
func (c *Cluster) Wait(ctx context.Context) error {
	all := c.others
	exited := make(chan *proc, len(all))
	stop := make(chan struct{})
	defer close(stop)
	for _, p := range all {
		go func() {
			select {
			case <-p.done:
				exited <- p
			case <-stop:
			}
		}()
	}
	select {
	case p := <-exited:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	case <-ctx.Done():
		return nil
	}
}

// build compiles the commands the cluster runs into dir.
func build(ctx context.Context, root, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator),
		"./cmd/askd", "./cmd/dev-idp", "./cmd/demo-source", "./cmd/llm-stub")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return errors.New("go build: " + err.Error() + "\n" + string(out))
	}
	return nil
}

// storeView is a store client onto the cluster's Redis, for reading what a ticket records
// (its runner, its webhook's holder) through the store's own keys.
func (c *Cluster) storeView(ctx context.Context) (*redisstore.Store, error) {
	if c.view == nil {
		// Only reads: the seal key is needed only by New's check of a persisting Redis.
		o := redisstore.Options{URL: c.RedisURL, Logger: c.log}
		if c.durable != nil {
			k, err := seal.ParseKeys(seal.NewKey("view"))
			if err != nil {
				return nil, err
			}
			o.Seal = k
		}
		v, err := redisstore.New(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("open the store to read what a ticket records: %w", err)
		}
		c.view = v
	}
	return c.view, nil
}

// WebhookHolder is the replica name holding ticket's webhook delivery, as the store records it.
func (c *Cluster) WebhookHolder(ctx context.Context, ticket string) (string, error) {
	v, err := c.storeView(ctx)
	if err != nil {
		return "", err
	}
	return v.WebhookHolder(ctx, ticket)
}
