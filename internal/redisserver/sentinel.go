package redisserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SentinelName is the name the Sentinel of RunSentinel monitors its primary under: the master
// of a redis+sentinel:// URL.
const SentinelName = "ask"

// SentinelDownAfter is the Sentinel's down-after-milliseconds: how long a primary may be
// unreachable before the Sentinel fails it over (Sentinel's default is 30 s; a test waits this
// long after a kill).
const SentinelDownAfter = time.Second

// Sentinel is a primary, one replica and one Redis Sentinel monitoring them (quorum 1), each
// Debian's redis-server (the Sentinel as `redis-server sentinel.conf --sentinel`), as a
// deployment that fails over with Sentinel runs them. Its methods are safe for concurrent use
// with clients of the servers; ask Primary after a failover rather than remembering.
type Sentinel struct {
	// Addr is the Sentinel's host:port.
	Addr string

	servers []*Server // the two data servers, in the order they were started
	cmd     *exec.Cmd
	done    chan error
}

// RunSentinel starts a primary, its replica (--replicaof) and a Sentinel under dir (a
// directory each), and returns once the replica is in sync and the Sentinel knows it. Stop ends
// all three.
func RunSentinel(ctx context.Context, dir string) (_ *Sentinel, err error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %s not installed (apt-get install -y redis-server): %w", Binary, err)
	}
	s := &Sentinel{}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	var primary *Server
	for i, role := range []string{"primary", "replica"} {
		d := filepath.Join(dir, role)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		// Either may become a replica of the other: each syncs from the socket's snapshot into
		// a file it deletes once loaded (rdb-del-sync-files; by default it keeps it, question
		// text inside), as docs/scale-out.md asks of every node in the memory-only mode.
		extra := []string{"--repl-diskless-sync", "yes", "--rdb-del-sync-files", "yes"}
		if i > 0 {
			host, port, _ := strings.Cut(primary.Addr, ":")
			extra = append(extra, "--replicaof", host, port)
		}
		var srv *Server
		for attempt := 0; ; attempt++ {
			port, perr := freePort()
			if perr != nil {
				return nil, perr
			}
			srv, err = start(ctx, bin, d, port, false, nil, extra)
			if err == nil {
				break
			}
			if attempt == 3 {
				return nil, err
			}
		}
		s.servers = append(s.servers, srv)
		if i == 0 {
			primary = srv
		}
	}
	if err := s.startSentinel(ctx, bin, filepath.Join(dir, "sentinel"), primary); err != nil {
		return nil, err
	}
	return s, s.waitSynced(ctx, primary, s.servers[1], true)
}

// startSentinel starts the Sentinel process on a free port, monitoring primary.
func (s *Sentinel) startSentinel(ctx context.Context, bin, dir string, primary *Server) error {
	// The Sentinel runs in dir and its configuration names dir: relative, it would name dir/dir.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("redisserver: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("redisserver: %w", err)
	}
	host, port, _ := strings.Cut(primary.Addr, ":")
	for attempt := 0; ; attempt++ {
		p, err := freePort()
		if err != nil {
			return err
		}
		// A Sentinel rewrites its configuration file as it learns the topology, so it gets one
		// of its own.
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
			"sentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 10000\n",
			p, dir, SentinelName, host, port, SentinelName, SentinelDownAfter.Milliseconds(), SentinelName)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return fmt.Errorf("redisserver: %w", err)
		}
		logPath := filepath.Join(dir, "sentinel.log")
		logf, err := os.Create(logPath)
		if err != nil {
			return fmt.Errorf("redisserver: %w", err)
		}
		cmd := exec.Command(bin, conf, "--sentinel", "--daemonize", "no", "--loglevel", "warning")
		cmd.Dir, cmd.SysProcAttr, cmd.Stdout, cmd.Stderr = dir, sysProcAttr(), logf, logf
		err = cmd.Start()
		_ = logf.Close()
		if err != nil {
			return fmt.Errorf("redisserver: start the Sentinel: %w", err)
		}
		s.cmd, s.done, s.Addr = cmd, make(chan error, 1), "127.0.0.1:"+strconv.Itoa(p)
		go func() { s.done <- cmd.Wait() }()
		err = waitFor(ctx, 10*time.Second, func() error { return Ping(s.Addr) }, s.done)
		if err == nil {
			return nil
		}
		_ = s.stopSentinel()
		if attempt == 3 {
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("redisserver: the Sentinel did not answer: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
}

// URL is the deployment as the service's DAS_ASK_STORE names it:
// redis+sentinel://<the Sentinel>/<SentinelName>.
func (s *Sentinel) URL() string { return "redis+sentinel://" + s.Addr + "/" + SentinelName }

// Client is a plain client of the Sentinel itself (SENTINEL commands); the caller closes it.
func (s *Sentinel) Client() *goredis.SentinelClient {
	return goredis.NewSentinelClient(&goredis.Options{Addr: s.Addr})
}

// Primary is the server the Sentinel names primary now.
func (s *Sentinel) Primary(ctx context.Context) (*Server, error) {
	c := s.Client()
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, SentinelName).Result()
	if err != nil {
		return nil, err
	}
	return s.server(strings.Join(hp, ":"))
}

func (s *Sentinel) server(addr string) (*Server, error) {
	for _, srv := range s.servers {
		if srv.Addr == addr {
			return srv, nil
		}
	}
	return nil, fmt.Errorf("redisserver: the Sentinel names %s, not a server of this deployment", addr)
}

// other is the data server that is not srv.
func (s *Sentinel) other(srv *Server) *Server {
	if s.servers[0] == srv {
		return s.servers[1]
	}
	return s.servers[0]
}

// role is srv's ROLE: "master" or "slave".
func role(ctx context.Context, srv *Server) (string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	r, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(r) == 0 {
		return "", errors.New("redisserver: empty ROLE")
	}
	name, _ := r[0].(string)
	return name, nil
}

// replication reads field of srv's INFO replication.
func replication(ctx context.Context, srv *Server, field string) (string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("redisserver: no %s in INFO replication", field)
}

// waitSynced waits until replica's link to primary is up, it holds everything primary had
// written when the wait began (its offset at least primary's then: writes may go on), and, with
// listed, the Sentinel lists it as a replica that can be promoted.
func (s *Sentinel) waitSynced(ctx context.Context, primary, replica *Server, listed bool) error {
	want := int64(-1)
	err := waitFor(ctx, 30*time.Second, func() error {
		if want < 0 {
			v, err := replication(ctx, primary, "master_repl_offset")
			if err != nil {
				return err
			}
			if want, err = strconv.ParseInt(v, 10, 64); err != nil {
				want = -1
				return err
			}
		}
		if up, err := replication(ctx, replica, "master_link_status"); err != nil || up != "up" {
			return fmt.Errorf("replica link %q: %v", up, err)
		}
		v, err := replication(ctx, replica, "slave_repl_offset")
		if err != nil {
			return err
		}
		if got, err := strconv.ParseInt(v, 10, 64); err != nil || got < want {
			return fmt.Errorf("replica at offset %s of %d: %v", v, want, err)
		}
		if !listed {
			return nil
		}
		c := s.Client()
		defer c.Close()
		rs, err := c.Replicas(ctx, SentinelName).Result()
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r["name"] == replica.Addr && !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") {
				return nil
			}
		}
		return errors.New("the Sentinel does not list the replica yet")
	}, s.done)
	if err != nil {
		return fmt.Errorf("redisserver: replica %s of %s: %w", replica.Addr, primary.Addr, err)
	}
	return nil
}

// Failover hands the primary's role to the replica, as an operator's planned failover does:
// once the replica holds everything the primary wrote, SENTINEL FAILOVER, and it returns when
// the Sentinel names the replica primary and the replica answers as one. (The Sentinel turns the
// old primary into the new one's replica when it next looks at it, 10–15 s later here. A
// Sentinel failover does not pause writers: a write the old primary takes meanwhile is lost,
// as with any Sentinel failover.) It returns the new primary.
func (s *Sentinel) Failover(ctx context.Context) (*Server, error) {
	old, err := s.Primary(ctx)
	if err != nil {
		return nil, err
	}
	next := s.other(old)
	if err := s.waitSynced(ctx, old, next, true); err != nil {
		return nil, err
	}
	c := s.Client()
	defer c.Close()
	if err := c.Failover(ctx, SentinelName).Err(); err != nil {
		return nil, fmt.Errorf("redisserver: SENTINEL FAILOVER: %w", err)
	}
	return next, s.waitPromoted(ctx, next)
}

// Synced waits until the replica holds everything the primary had written when it was called
// (a crash after it loses nothing the primary acknowledged before it).
func (s *Sentinel) Synced(ctx context.Context) error {
	p, err := s.Primary(ctx)
	if err != nil {
		return err
	}
	return s.waitSynced(ctx, p, s.other(p), false)
}

// KillPrimary SIGKILLs the primary, as a crash would, and returns once the Sentinel has
// promoted the replica (after SentinelDownAfter) and it answers as primary. The old primary
// stays dead. What the replica had not received when the primary died is lost (Synced first
// to lose nothing). It returns the new primary.
func (s *Sentinel) KillPrimary(ctx context.Context) (*Server, error) {
	old, err := s.Primary(ctx)
	if err != nil {
		return nil, err
	}
	if err := old.Kill(); err != nil {
		return nil, err
	}
	next := s.other(old)
	return next, s.waitPromoted(ctx, next)
}

// waitPromoted waits until the Sentinel names next primary and next answers ROLE master.
func (s *Sentinel) waitPromoted(ctx context.Context, next *Server) error {
	err := waitFor(ctx, 30*time.Second, func() error {
		p, err := s.Primary(ctx)
		if err != nil {
			return err
		}
		if p != next {
			return fmt.Errorf("the Sentinel still names %s", p.Addr)
		}
		r, err := role(ctx, next)
		if err != nil || r != "master" {
			return fmt.Errorf("%s is %q: %v", next.Addr, r, err)
		}
		return nil
	}, s.done)
	if err != nil {
		return fmt.Errorf("redisserver: failover to %s: %w", next.Addr, err)
	}
	return nil
}

func (s *Sentinel) stopSentinel() error {
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Kill()
	err := <-s.done
	s.done <- err
	return nil
}

// Stop kills the Sentinel and both servers and waits for each to exit.
func (s *Sentinel) Stop() error {
	err := s.stopSentinel()
	for _, srv := range s.servers {
		err = errors.Join(err, srv.Stop())
	}
	return err
}
