package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
)

// durableRedis is redis-server with AOF (appendonly yes, appendfsync everysec) in its own
// directory, for the service's durable mode: killing it and starting it again in the same
// directory loses at most the last second of writes. The chaos suite's Redis-restart scenario
// drives it.
type durableRedis struct {
	c    *Cluster
	dir  string
	port int
	url  string

	mu  sync.Mutex
	cur *proc
}

func startDurableRedis(ctx context.Context, c *Cluster, dir string, port int) (*durableRedis, error) {
	d := &durableRedis{c: c, dir: dir, port: port, url: "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"}
	if err := d.start(ctx, false); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *durableRedis) start(ctx context.Context, again bool) error {
	starter := startProc
	if again {
		starter = restartProc
	}
	p, err := starter("redis", d.c.logDir, "redis-server", append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(d.port), "--dir", d.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
		"--appendfilename", "ask.aof", "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning",
	}, redisserver.Tuning...), nil, nil)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.cur = p
	d.mu.Unlock()
	// Ready once it answers PING: a dial alone could reach another process that took the port
	// (it is the same port again after a kill).
	addr := "127.0.0.1:" + strconv.Itoa(d.port)
	return p.waitReady(ctx, func() error { return redisserver.Ping(addr) })
}

func (d *durableRedis) proc() *proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur
}

func (d *durableRedis) stop() { d.proc().stop(5 * time.Second) }

// KillRedis sends SIGKILL to the durable Redis and waits for it to die.
func (c *Cluster) KillRedis() error {
	if c.durable == nil {
		return fmt.Errorf("cluster: KillRedis needs Options.DurableRedis")
	}
	c.durable.proc().kill()
	return nil
}

// RestartRedis starts the durable Redis again in its directory (it reloads its AOF) and
// waits until it answers.
func (c *Cluster) RestartRedis(ctx context.Context) error {
	if c.durable == nil {
		return fmt.Errorf("cluster: RestartRedis needs Options.DurableRedis")
	}
	return c.durable.start(ctx, true)
}

// AOFPath is the durable Redis's append-only file (its directory, in Redis 7).
func (c *Cluster) AOFPath() string {
	if c.durable == nil {
		return ""
	}
	return filepath.Join(c.durable.dir, "appendonlydir")
}
