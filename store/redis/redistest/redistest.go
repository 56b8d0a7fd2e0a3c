// Package redistest starts a throwaway redis-server for tests and the dev cluster: on
// loopback, in a directory of its own, with persistence off (no RDB snapshot, no AOF) as the
// ask service's memory-only mode runs it, or with an AOF (appendfsync everysec) as its durable
// mode does. Tests that need it skip, saying why, when the redis-server binary is absent
// (apt-get install -y redis-server).
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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
	port    int
	cmd     *exec.Cmd
	done    chan error
}

// Start starts a server for tb and stops it when tb's test ends. It skips tb when the
// binary is not installed.
func Start(tb testing.TB) *Server { return startFor(tb, false) }

// StartDurable starts a server with an append-only file (appendonly yes, appendfsync
// everysec) in its directory, as the durable mode runs it; Kill and Restart put it through a
// crash on the same files.
func StartDurable(tb testing.TB) *Server { return startFor(tb, true) }

func startFor(tb testing.TB, durable bool) *Server {
	tb.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		tb.Skipf("%s not installed (apt-get install -y redis-server): the Redis store is tested against a real server", Binary)
	}
	dir := tb.TempDir()
	var s *Server
	for attempt := 0; ; attempt++ {
		port, perr := freePort()
		if perr != nil {
			tb.Fatal(perr)
		}
		if s, err = start(context.Background(), bin, dir, port, durable); err == nil || attempt == 3 {
			break
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Stop() })
	return s
}

// Kill ends the server with SIGKILL, as a crash would: what the AOF had not fsynced is lost.
func (s *Server) Kill() error { return s.Stop() }

// Restart starts the server again on the same address and directory (so on the same AOF)
// after Kill, and returns once it answers PING (once it has loaded its data).
func (s *Server) Restart(ctx context.Context) error {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return err
	}
	n, err := start(ctx, bin, s.Dir, s.port, s.durable)
	if err != nil {
		return err
	}
	s.cmd, s.done = n.cmd, n.done
	return nil
}

// Run starts a server whose working directory is dir and returns once it answers PING.
// Stop ends it.
func Run(ctx context.Context, dir string) (*Server, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("redistest: %s not installed (apt-get install -y redis-server): %w", Binary, err)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := start(ctx, bin, dir, port, false)
		if err == nil || attempt == 3 {
			return s, err
		}
	}
}

// RunAt starts a server on 127.0.0.1:port whose working directory is dir, like Run.
func RunAt(ctx context.Context, dir string, port int) (*Server, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("redistest: %s not installed (apt-get install -y redis-server): %w", Binary, err)
	}
	return start(ctx, bin, dir, port, false)
}

func start(ctx context.Context, bin, dir string, port int, durable bool) (*Server, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	persistence := []string{"--save", "", "--appendonly", "no"}
	if durable {
		persistence = []string{"--save", "", "--appendonly", "yes", "--appendfsync", "everysec"}
	}
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir}, persistence...)
	cmd := exec.Command(bin, append(args, "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")...)
	cmd.Dir = dir
	logPath := dir + "/redis-" + strconv.Itoa(port) + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: start %s: %w", bin, err)
	}
	s := &Server{Addr: addr, URL: "redis://" + addr + "/0", Dir: dir, durable: durable, port: port, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if ping(addr) == nil {
			return s, nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("redistest: %s exited (%v): %s", bin, err, strings.TrimSpace(string(out)))
		case <-deadline.C:
			return nil, errors.Join(errors.New("redistest: redis-server did not answer within 10s"), s.Stop())
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), s.Stop())
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

// ping sends PING in the inline protocol and expects +PONG.
func ping(addr string) error {
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
		return errors.New("redistest: unexpected answer to PING")
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
