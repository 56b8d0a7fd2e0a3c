package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/das-ask/ask/store/redis/redistest"
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
}

// Cluster is a running cluster: Redis, the dev IdP, the demo source, the llm-stub, the
// replicas and nginx, each its own process.
type Cluster struct {
	// GatewayURL is the service through nginx (http://host:port/ask); ReplicaURLs each
	// replica directly; IdPURL, SourceURL, StubURL the dev pieces; RedisURL the store.
	GatewayURL, IdPURL, SourceURL, StubURL, RedisURL string
	ReplicaURLs                                      []string
	// OverflowURL is the overflow group's gateway, when Options.OverflowReplicas is set.
	OverflowURL string

	opts     Options
	log      *slog.Logger
	redis    *redistest.Server
	others   []*proc // idp, source, stub, nginx
	replicas []*proc
	overflow []*proc
	ownDir   bool
}

// Start builds the commands and starts every process, returning once each is ready. On error
// everything started is stopped.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Root == "" {
		o.Root = "."
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Nginx == "" {
		o.Nginx = "nginx"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c = &Cluster{opts: o, log: log}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "ask-cluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	}
	c.opts.Dir = o.Dir
	if o.Echo != nil {
		o.Echo = &lockedWriter{w: o.Echo} // one line at a time from every process
	}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	logDir := filepath.Join(o.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return c, err
	}
	nginxBin, err := exec.LookPath(o.Nginx)
	if err != nil {
		return c, fmt.Errorf("nginx not found (apt-get install -y nginx-light): %w", err)
	}
	bins := filepath.Join(o.Dir, "bin")
	if err := build(ctx, o.Root, bins); err != nil {
		return c, err
	}

	addr := func(a string) (string, error) {
		if a != "" {
			return a, nil
		}
		return freeAddr()
	}
	// Redis, persistence off: conversation memory is never written to disk.
	port := o.RedisPort
	if port == 0 {
		a, err := freeAddr()
		if err != nil {
			return c, err
		}
		_, p, _ := net.SplitHostPort(a)
		port, _ = strconv.Atoi(p)
	}
	redisDir := filepath.Join(o.Dir, "redis")
	if err := os.MkdirAll(redisDir, 0o755); err != nil {
		return c, err
	}
	if c.redis, err = redistest.RunAt(ctx, redisDir, port); err != nil {
		return c, err
	}
	c.RedisURL = c.redis.URL
	log.Info("redis ready", "url", c.RedisURL)

	idpAddr, err := addr(o.IdPAddr)
	if err != nil {
		return c, err
	}
	c.IdPURL = "http://" + idpAddr
	idp, err := startProc("dev-idp", logDir, filepath.Join(bins, "dev-idp"),
		[]string{"serve", "--addr", idpAddr, "--state", filepath.Join(o.Dir, "idp")}, nil, o.Echo)
	if err != nil {
		return c, err
	}
	c.others = append(c.others, idp)
	if err := idp.waitReady(ctx, getReady(c.IdPURL+"/.well-known/jwks.json")); err != nil {
		return c, err
	}
	authEnv := []string{
		"DAS_JWKS_URL=" + c.IdPURL + "/.well-known/jwks.json", "DAS_ISSUER=" + c.IdPURL,
		"DAS_AUDIENCE=das", "DAS_REQUIRED_SCOPE=das",
	}

	srcAddr, err := addr(o.SourceAddr)
	if err != nil {
		return c, err
	}
	c.SourceURL = "http://" + srcAddr
	src, err := startProc("demo-source", logDir, filepath.Join(bins, "demo-source"),
		[]string{"--addr", srcAddr, "--audit", filepath.Join(o.Dir, "demo-source", "audit.jsonl")}, authEnv, o.Echo)
	if err != nil {
		return c, err
	}
	c.others = append(c.others, src)

	stubAddr, err := addr(o.StubAddr)
	if err != nil {
		return c, err
	}
	c.StubURL = "http://" + stubAddr + "/v1"
	stubArgs := []string{"--addr", stubAddr}
	if o.StubScript != "" {
		stubArgs = append(stubArgs, "--script", o.StubScript)
	}
	stub, err := startProc("llm-stub", logDir, filepath.Join(bins, "llm-stub"), stubArgs, nil, o.Echo)
	if err != nil {
		return c, err
	}
	c.others = append(c.others, stub)
	if err := src.waitReady(ctx, dialReady(srcAddr)); err != nil {
		return c, err
	}
	if err := stub.waitReady(ctx, dialReady(stubAddr)); err != nil {
		return c, err
	}

	env := append(append([]string{}, authEnv...),
		"DAS_ASK_STORE="+c.RedisURL, "DAS_LOG_FORMAT=json",
		"ASK_LLM=stub", "ASK_LLM_BASE_URL="+c.StubURL, "DAS_SOURCES=demo="+c.SourceURL+"/mcp")
	for name, v := range map[string]time.Duration{"DAS_ASK_LEASE_S": o.Lease, "DAS_ASK_KEEPALIVE_S": o.KeepAlive, "DAS_ASK_TTL_S": o.TTL, "DAS_ASK_DEADLINE_S": o.Deadline} {
		if v > 0 {
			env = append(env, name+"="+strconv.Itoa(int(v/time.Second)))
		}
	}
	if o.MaxEvents > 0 {
		env = append(env, "DAS_ASK_MAX_EVENTS="+strconv.Itoa(o.MaxEvents))
	}
	startGroup := func(name string, n int, addrs []string, groupEnv []string) ([]*proc, []string, []string, error) {
		var procs []*proc
		var urls, upstreams []string
		for i := range n {
			a := ""
			if i < len(addrs) {
				a = addrs[i]
			}
			if a, err = addr(a); err != nil {
				return procs, nil, nil, err
			}
			admin, err := freeAddr()
			if err != nil {
				return procs, nil, nil, err
			}
			p, err := startProc(name+"-"+strconv.Itoa(i+1), logDir, filepath.Join(bins, "askd"), nil,
				append(append(append([]string{}, env...), groupEnv...), "DAS_ASK_ADDR="+a, "DAS_ASK_ADMIN_ADDR="+admin), o.Echo)
			if err != nil {
				return procs, nil, nil, err
			}
			procs = append(procs, p)
			urls = append(urls, "http://"+a+"/ask")
			upstreams = append(upstreams, a)
		}
		for i, p := range procs {
			if err := p.waitReady(ctx, getReady(urls[i]+"/v1/openapi.json")); err != nil {
				return procs, nil, nil, err
			}
		}
		return procs, urls, upstreams, nil
	}
	var upstreams, overflowUpstreams []string
	c.replicas, c.ReplicaURLs, upstreams, err = startGroup("askd", o.Replicas, o.ReplicaAddrs, nil)
	if err != nil {
		return c, err
	}
	if o.OverflowReplicas > 0 {
		maxEv := o.OverflowMaxEvents
		if maxEv <= 0 {
			maxEv = 8
		}
		c.overflow, _, overflowUpstreams, err = startGroup("askd-overflow", o.OverflowReplicas, nil,
			[]string{"DAS_ASK_MAX_EVENTS=" + strconv.Itoa(maxEv), "DAS_ASK_REDIS_PREFIX=ask-overflow:"})
		if err != nil {
			return c, err
		}
	}

	gwAddr, err := addr(o.GatewayAddr)
	if err != nil {
		return c, err
	}
	tmpl, err := os.ReadFile(filepath.Join(o.Root, "deploy", "nginx", "ask.conf"))
	if err != nil {
		return c, err
	}
	readTimeout := o.GatewayReadTimeout
	if readTimeout <= 0 {
		readTimeout = 60 * time.Second
	}
	ngDir := filepath.Join(o.Dir, "nginx")
	if err := os.MkdirAll(ngDir, 0o755); err != nil {
		return c, err
	}
	var includes []string
	writeConf := func(name string, ups []string, listen string) error {
		conf, err := renderGateway(string(tmpl), name, ups, listen, readTimeout)
		if err != nil {
			return err
		}
		path := filepath.Join(ngDir, name+".conf")
		includes = append(includes, path)
		return os.WriteFile(path, []byte(conf), 0o644)
	}
	if err := writeConf("main", upstreams, gwAddr); err != nil {
		return c, err
	}
	if len(overflowUpstreams) > 0 {
		ofAddr, err := freeAddr()
		if err != nil {
			return c, err
		}
		if err := writeConf("overflow", overflowUpstreams, ofAddr); err != nil {
			return c, err
		}
		c.OverflowURL = "http://" + ofAddr + "/ask"
	}
	mainPath := filepath.Join(ngDir, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(nginxMain(ngDir, includes...)), 0o644); err != nil {
		return c, err
	}
	ng, err := startProc("nginx", logDir, nginxBin,
		[]string{"-p", ngDir, "-c", mainPath, "-e", filepath.Join(ngDir, "error.log"), "-g", "daemon off;"}, nil, o.Echo)
	if err != nil {
		return c, err
	}
	c.others = append(c.others, ng)
	c.GatewayURL = "http://" + gwAddr + "/ask"
	for _, u := range []string{c.GatewayURL, c.OverflowURL} {
		if u == "" {
			continue
		}
		if err := ng.waitReady(ctx, getReady(u+"/v1/openapi.json")); err != nil {
			return c, err
		}
	}
	log.Info("cluster ready", "gateway", c.GatewayURL, "replicas", strings.Join(c.ReplicaURLs, " "), "idp", c.IdPURL, "redis", c.RedisURL)
	return c, nil
}

// Stop stops every process (replicas first, SIGTERM with a grace, then SIGKILL), then Redis,
// and removes the directory it created.
func (c *Cluster) Stop() {
	for _, p := range append(append([]*proc{}, c.replicas...), c.overflow...) {
		p.stop(15 * time.Second)
	}
	for i := len(c.others) - 1; i >= 0; i-- {
		c.others[i].stop(5 * time.Second)
	}
	if c.redis != nil {
		_ = c.redis.Stop()
	}
	if c.ownDir && !c.opts.KeepDir {
		_ = os.RemoveAll(c.opts.Dir)
	}
}

// Kill sends SIGKILL to replica i (0-based) and waits for it to die.
func (c *Cluster) Kill(i int) { c.replicas[i].kill() }

// Runner returns the index of the replica that accepted ticket (and so runs it), from the
// replicas' logs.
func (c *Cluster) Runner(ticket string) (int, error) {
	needle := []byte(`"ticket":"` + ticket + `"`)
	for i, p := range c.replicas {
		for _, line := range bytes.Split(p.log(), []byte("\n")) {
			if bytes.Contains(line, needle) && bytes.Contains(line, []byte(`"msg":"ask accepted"`)) {
				return i, nil
			}
		}
	}
	return -1, errNotRunning
}

// Logs returns every process's log, for a failing test.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, p := range append(append(append([]*proc{}, c.replicas...), c.overflow...), c.others...) {
		fmt.Fprintf(&b, "==> %s\n%s\n", p.name, tailOf(p.log(), 4000))
	}
	return b.String()
}

// Wait returns when any process exits (its error), or ctx is done (nil).
func (c *Cluster) Wait(ctx context.Context) error {
	all := append(append(append([]*proc{}, c.replicas...), c.overflow...), c.others...)
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
