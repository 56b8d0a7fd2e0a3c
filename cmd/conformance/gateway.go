package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
	"github.com/das-ask/ask/internal/loopback"
)

// gatewayOptions configure startGateway.
type gatewayOptions struct {
	nginx       string
	template    string // path of deploy/nginx/ask.conf
	readTimeout time.Duration
	upstreams   []string // base URLs of the services, each served under /ask
	logger      *slog.Logger
}

// gateway is a running nginx in front of the services.
type gateway struct {
	dir  string
	cmd  *exec.Cmd
	done chan error
	// urls are the gateway's base URLs, one per upstream, in order (http://127.0.0.1:PORT/ask).
	urls []string
}

// startGateway renders the config for every upstream, starts nginx in the foreground and
// returns once it has bound every listener and each accepts connections. stop ends it. Its listen ports are picked
// by listening on port 0 and closing, so another socket may take one before nginx binds it:
// nginx then exits saying so, and the gateway is started again on new ports, up to
// gatewayAttempts times in all.
func startGateway(ctx context.Context, o gatewayOptions) (*gateway, error) {
	for attempt := 1; ; attempt++ {
		g, err := startGatewayOnce(ctx, o)
		if err == nil || attempt == gatewayAttempts || ctx.Err() != nil ||
			!strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			return g, err
		}
		o.logger.Warn("a port picked for the gateway was taken before nginx bound it; starting it again", "attempt", attempt, "err", err)
	}
}

// gatewayAttempts bounds how often startGateway starts nginx when a picked port was taken.
const gatewayAttempts = 3

func startGatewayOnce(ctx context.Context, o gatewayOptions) (*gateway, error) {
	tmpl, err := os.ReadFile(o.template)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	bin, err := exec.LookPath(o.nginx)
	if err != nil {
		return nil, fmt.Errorf("gateway: nginx not found (apt-get install -y nginx-light): %w", err)
	}
	dir, err := os.MkdirTemp("", "ask-gateway-")
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &gateway{dir: dir, done: make(chan error, 1)}
	var includes, listens []string
	// Every listen address picked together and none twice: nginx given one port in two
	// server blocks only warns and serves both with the first.
	picks, err := loopback.Addrs(len(o.upstreams))
	if err != nil {
		g.cleanup()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	for i, up := range o.upstreams {
		u, err := url.Parse(up)
		if err != nil {
			g.cleanup()
			return nil, fmt.Errorf("gateway: upstream %q: %w", up, err)
		}
		listen := picks[i]
		conf, err := nginx.Render(string(tmpl), "s"+strconv.Itoa(i), []string{u.Host}, listen, o.readTimeout)
		if err != nil {
			g.cleanup()
			return nil, err
		}
		path := filepath.Join(dir, "ask-"+strconv.Itoa(i)+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			g.cleanup()
			return nil, fmt.Errorf("gateway: %w", err)
		}
		includes, listens = append(includes, path), append(listens, listen)
		g.urls = append(g.urls, "http://"+listen+u.Path)
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(nginx.Main(dir, 256, includes...)), 0o644); err != nil {
		g.cleanup()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.cmd = exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	g.cmd.Stdout, g.cmd.Stderr = os.Stderr, os.Stderr
	g.cmd.SysProcAttr = nginxProcAttr()
	if err := g.cmd.Start(); err != nil {
		g.cleanup()
		return nil, fmt.Errorf("gateway: start nginx: %w", err)
	}
	go func() { g.done <- g.cmd.Wait() }()
	o.logger.Info("gateway started", "pid", g.cmd.Process.Pid, "dir", dir, "urls", strings.Join(g.urls, " "))
	if err := g.ready(ctx, listens); err != nil {
		return nil, errors.Join(err, g.stop())
	}
	return g, nil
}

// ready waits until nginx has written its pid file (it does once it has bound every listener:
// before, a listener's address may answer for another process that took the port) and every
// listener accepts a connection, nginx exits, or 10 s pass.
func (g *gateway) ready(ctx context.Context, addrs []string) error {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if nginx.Bound(g.dir, g.cmd.Process.Pid) {
			up := 0
			for _, a := range addrs {
				if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
					c.Close()
					up++
				}
			}
			if up == len(addrs) {
				return nil
			}
		}
		select {
		case err := <-g.done:
			g.done <- err
			log, _ := os.ReadFile(filepath.Join(g.dir, "error.log"))
			return fmt.Errorf("gateway: nginx exited (%v): %s", err, strings.TrimSpace(string(log)))
		case <-deadline.C:
			return errors.New("gateway: nginx did not listen within 10s")
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stop asks nginx to quit, waits for it (killing it after 5 s) and removes its directory.
func (g *gateway) stop() error {
	defer g.cleanup()
	if g.cmd == nil || g.cmd.Process == nil {
		return nil
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-g.done:
		return nil
	case <-t.C:
		_ = g.cmd.Process.Kill()
		<-g.done
		return errors.New("gateway: nginx did not stop within 5s and was killed")
	}
}

func (g *gateway) cleanup() { _ = os.RemoveAll(g.dir) }
