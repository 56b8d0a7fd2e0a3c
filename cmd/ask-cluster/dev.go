package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/das-ask/ask/internal/loopback"
	"github.com/das-ask/ask/internal/redisserver"
)

// addrOr returns a, or a free loopback address when a is "".
func addrOr(a string) (string, error) {
	if a != "" {
		return a, nil
	}
	return loopback.Addr()
}

// startRedis starts redis-server with persistence off: conversation memory is never written
// to disk. With Options.RedisCluster it starts a Redis Cluster of three primaries instead.
func (c *Cluster) startRedis(ctx context.Context) error {
	if c.opts.RedisCluster {
		return c.startRedisCluster(ctx)
	}
	port := c.opts.RedisPort
	if port == 0 {
		var err error
		if port, err = loopback.Port(); err != nil {
			return err
		}
	}
	dir := filepath.Join(c.opts.Dir, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if c.opts.DurableRedis {
		d, err := startDurableRedis(ctx, c, dir, port)
		if err != nil {
			return err
		}
		c.durable, c.RedisURL = d, d.url
		c.log.Info("redis ready (AOF, appendfsync everysec)", "url", c.RedisURL)
		return nil
	}
	var err error
	if c.redis, err = redisserver.RunAt(ctx, dir, port); err != nil {
		return err
	}
	c.RedisURL = c.redis.URL
	c.log.Info("redis ready", "url", c.RedisURL)
	return nil
}

// startDev starts the development pieces: the identity provider (first: everything else
// fetches its keys), the demo source and the llm-stub.
func (c *Cluster) startDev(ctx context.Context) error {
	o := c.opts
	idpAddr, err := addrOr(o.IdPAddr)
	if err != nil {
		return err
	}
	c.IdPURL = "http://" + idpAddr
	idp, err := c.start("dev-idp", "dev-idp", []string{"serve", "--addr", idpAddr, "--state", filepath.Join(o.Dir, "idp")}, nil)
	if err != nil {
		return err
	}
	if err := idp.waitReady(ctx, getReady(c.IdPURL+"/.well-known/jwks.json")); err != nil {
		return err
	}
	c.authEnv = []string{
		"DAS_JWKS_URL=" + c.IdPURL + "/.well-known/jwks.json", "DAS_ISSUER=" + c.IdPURL,
		"DAS_AUDIENCE=das", "DAS_REQUIRED_SCOPE=das",
	}

	srcAddr, err := addrOr(o.SourceAddr)
	if err != nil {
		return err
	}
	c.SourceURL = "http://" + srcAddr
	src, err := c.start("demo-source", "demo-source",
		[]string{"--addr", srcAddr, "--audit", filepath.Join(o.Dir, "demo-source", "audit.jsonl")}, c.authEnv)
	if err != nil {
		return err
	}

	stubAddr, err := addrOr(o.StubAddr)
	if err != nil {
		return err
	}
	c.StubURL = "http://" + stubAddr + "/v1"
	stubArgs := []string{"--addr", stubAddr}
	if o.StubScript != "" {
		stubArgs = append(stubArgs, "--script", o.StubScript)
	}
	stub, err := c.start("llm-stub", "llm-stub", stubArgs, nil)
	if err != nil {
		return err
	}
	// Each ready once it answers a request only it serves: a dial alone could reach another
	// process that took the port, the start then going on against the wrong piece (the
	// llm-stub's port taken, it exited, and the cluster started with no model to call). The
	// source's is its MCP endpoint's resource metadata (public; /healthz every askd's admin
	// listener serves too), the stub's its request log.
	if err := src.waitReady(ctx, getReady(localURL(srcAddr)+"/.well-known/oauth-protected-resource/mcp")); err != nil {
		return err
	}
	return stub.waitReady(ctx, stubReady(localURL(stubAddr)))
}

// localURL is addr's http URL, an unspecified host (none, 0.0.0.0, [::]) as 127.0.0.1.
func localURL(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	return "http://" + addr
}

// stubLocalOnly is what the llm-stub answers (403) a caller of its request log off loopback:
// the stub's own answer too, when it listens on an address of the network.
const stubLocalOnly = "the request log is served to loopback callers only"

// stubReady is ready once the llm-stub at base answers for its request log: the log, or the
// stub's refusal to show it to a caller off loopback.
func stubReady(base string) func() error {
	return func() error {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(base + "/_stub/requests")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusForbidden && strings.Contains(string(body), stubLocalOnly) {
			return nil
		}
		return fmt.Errorf("GET %s/_stub/requests: %d", base, resp.StatusCode)
	}
}

// start starts one of the built commands as name; it is stopped with the cluster.
func (c *Cluster) start(name, command string, args, env []string) (*proc, error) {
	p, err := startProc(name, c.logDir, filepath.Join(c.bins, command), args, env, c.opts.Echo)
	if err != nil {
		return nil, err
	}
	c.others = append(c.others, p)
	return p, nil
}

// clusterPrimaries is the Redis Cluster's size with Options.RedisCluster.
const clusterPrimaries = 3

// startRedisCluster starts the Redis Cluster (persistence off, as startRedis's server).
func (c *Cluster) startRedisCluster(ctx context.Context) error {
	if c.opts.DurableRedis {
		return errors.New("cluster: the durable mode runs on one redis-server, not on a Redis Cluster")
	}
	dir := filepath.Join(c.opts.Dir, "redis-cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rc, err := redisserver.RunCluster(ctx, dir, clusterPrimaries, c.opts.RedisClusterReplicas)
	if err != nil {
		return err
	}
	c.rcluster, c.RedisURL = rc, rc.URL()
	c.log.Info("redis cluster ready", "url", c.RedisURL, "primaries", clusterPrimaries, "replicas_per_primary", c.opts.RedisClusterReplicas)
	return nil
}

// RedisCluster is the Redis Cluster the store runs on, nil without Options.RedisCluster.
func (c *Cluster) RedisCluster() *redisserver.Cluster { return c.rcluster }
