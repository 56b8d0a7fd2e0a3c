// Package redisserver starts a throwaway redis-server for the dev cluster, the benchmark and
// (through store/redis/redistest) the tests: on loopback, in a directory of its own, with
// persistence off (no RDB snapshot, no AOF) as the ask service's memory-only mode runs it, or
// with an append-only file (appendfsync everysec) as its durable mode does (RunDurable); or a
// whole Redis Cluster of such servers (RunCluster: --cluster-enabled yes, joined with
// redis-cli --cluster create), with the faults a deployment meets: a node killed, frozen or
// restarted, a primary failed over, a slot migrated live; or a primary with a replica and a
// Sentinel (RunSentinel), failed over or its primary killed. It is a process helper for the
// development tools (cmd/ask-cluster, the benchmark) and the tests; the service itself never
// links it.
package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/das-ask/ask/internal/loopback"
	redisstore "github.com/das-ask/ask/store/redis"
)

// Binary is the server the package starts, looked up on PATH.
const Binary = "redis-server"

// Server is a running redis-server.
type Server struct {
	// Addr is host:port; URL is redis://Addr/0.
	Addr, URL string

	// Dir is the server's working directory: its AOF and RDB files, in the durable mode.
	Dir string

	durable bool
	wrapper []string // what runs the server (RunUnder), nil for the binary itself
	extra   []string // settings of its role beyond the common ones (a replica's --replicaof)
	port    int
	cmd     *exec.Cmd
	done    chan error
}

// Tuning is the settings every server started here runs with beyond its role's: the ones the
// store asks of Redis (store/redis.StreamNodeMaxBytes; docs/scale-out.md, "Sizing Redis").
var Tuning = []string{"--stream-node-max-bytes", strconv.Itoa(redisstore.StreamNodeMaxBytes)}

// Run starts a server whose working directory is dir and returns once it answers PING.
// Stop ends it.
func Run(ctx context.Context, dir string) (*Server, error) { return run(ctx, dir, false, nil) }

// RunUnder starts a server like Run, as the last argument of wrapper, a tool that runs a
// program (valgrind --tool=callgrind, say: store/redis/redistest.StartCallgrind), allowing it a
// minute to answer PING instead of ten seconds.
func RunUnder(ctx context.Context, dir string, wrapper ...string) (*Server, error) {
	return run(ctx, dir, false, wrapper)
}

// RunDurable starts a server like Run, but with an append-only file (appendonly yes,
// appendfsync everysec) in dir, as the durable mode runs it: Kill and Restart put it through
// a crash on the same files.
func RunDurable(ctx context.Context, dir string) (*Server, error) { return run(ctx, dir, true, nil) }

func run(ctx context.Context, dir string, durable bool, wrapper []string) (*Server, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %s not installed (apt-get install -y redis-server): %w", Binary, err)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := start(ctx, bin, dir, port, durable, wrapper, nil)
		if err == nil || attempt == 3 {
			return s, err
		}
	}
}

// RunAt starts a server on 127.0.0.1:port whose working directory is dir, like Run.
func RunAt(ctx context.Context, dir string, port int) (*Server, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %s not installed (apt-get install -y redis-server): %w", Binary, err)
	}
	return start(ctx, bin, dir, port, false, nil, nil)
}

func start(ctx context.Context, bin, dir string, port int, durable bool, wrapper, extra []string) (*Server, error) {
	// redis-server runs in dir and is told --dir dir: a relative dir would name dir/dir.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	persistence := []string{"--save", "", "--appendonly", "no"}
	if durable {
		persistence = []string{"--save", "", "--appendonly", "yes", "--appendfsync", "everysec"}
	}
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir}, persistence...)
	args = append(append(args, Tuning...), extra...)
	args = append(append([]string{bin}, args...), "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")
	wait := 10 * time.Second
	if len(wrapper) > 0 {
		args, wait = append(append([]string{}, wrapper...), args...), time.Minute
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = sysProcAttr()
	logPath := dir + "/redis-" + strconv.Itoa(port) + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisserver: start %s: %w", bin, err)
	}
	s := &Server{Addr: addr, URL: "redis://" + addr + "/0", Dir: dir, durable: durable, wrapper: wrapper, extra: extra, port: port, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	err = waitFor(ctx, wait, func() error { return Ping(addr) }, s.done)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, errExited):
		out, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("redisserver: %s %w: %s", bin, err, strings.TrimSpace(string(out)))
	case ctx.Err() != nil:
		return nil, errors.Join(ctx.Err(), s.Stop())
	}
	return nil, errors.Join(fmt.Errorf("redisserver: redis-server did not answer: %w", err), s.Stop())
}

// errExited is waitFor's error when the process it waits on exits.
var errExited = errors.New("exited")

// waitFor polls f every 20 ms until it succeeds; else it fails when the wait passes (with f's
// last error), when ctx ends (ctx.Err()), or when done (a process's exit, put back for others
// to read) delivers (errExited).
func waitFor(ctx context.Context, wait time.Duration, f func() error, done chan error) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case perr := <-done:
			done <- perr
			return fmt.Errorf("%w (%v)", errExited, perr)
		case <-deadline.C:
			return fmt.Errorf("not within %s: %w", wait, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Kill()
	err := <-s.done
	s.done <- err
	return nil
}

// Pid is the server's process (the wrapper's, which is the same process for valgrind).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Kill ends the server with SIGKILL, as a crash would: what the AOF had not fsynced is lost.
func (s *Server) Kill() error { return s.Stop() }

// Restart starts the server again on the same address and directory (so on the same AOF)
// after Kill, and returns once it answers PING (once it has loaded its data).
func (s *Server) Restart(ctx context.Context) error {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return err
	}
	n, err := start(ctx, bin, s.Dir, s.port, s.durable, s.wrapper, s.extra)
	if err != nil {
		return err
	}
	s.cmd, s.done = n.cmd, n.done
	return nil
}

// RestartDurable is Restart, but the server comes back persisting (appendonly yes, appendfsync
// everysec), as an operator restarting a memory-only Redis with another configuration would
// bring it back: what it held is gone, and from now on it writes an AOF in its directory.
func (s *Server) RestartDurable(ctx context.Context) error {
	s.durable = true
	return s.Restart(ctx)
}

// Ping sends PING to addr in the inline protocol and expects +PONG.
func Ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New("redisserver: unexpected answer to PING")
	}
	return nil
}

// freePort is a free loopback port, none handed out before in this process (package loopback).
func freePort() (int, error) {
	p, err := loopback.Port()
	if err != nil {
		return 0, fmt.Errorf("redisserver: %w", err)
	}
	return p, nil
}
