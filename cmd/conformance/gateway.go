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
)

// The lines of deploy/nginx/ask.conf that render replaces; each must occur exactly once, so a
// change to the checked-in file cannot silently leave the test running something else.
const (
	tmplUpstream    = "upstream ask_service {"
	tmplProxyPass   = "proxy_pass http://ask_service;"
	tmplServer      = "server 127.0.0.1:8080;"
	tmplListen      = "listen 127.0.0.1:8081;"
	tmplReadTimeout = "proxy_read_timeout 60s;"
)

// render returns the checked-in config for one service: its upstream named after name and
// pointed at upstream (host:port), listening on listen (host:port), with proxy_read_timeout
// set to readTimeout (whole seconds, at least 1).
func render(template, name, upstream, listen string, readTimeout time.Duration) (string, error) {
	secs := int(readTimeout / time.Second)
	if secs < 1 {
		return "", errors.New("gateway: the read timeout must be at least 1s")
	}
	out := template
	for _, r := range []struct{ old, new string }{
		{tmplUpstream, "upstream ask_" + name + " {"},
		{tmplProxyPass, "proxy_pass http://ask_" + name + ";"},
		{tmplServer, "server " + upstream + ";"},
		{tmplListen, "listen " + listen + ";"},
		{tmplReadTimeout, "proxy_read_timeout " + strconv.Itoa(secs) + "s;"},
	} {
		if n := strings.Count(out, r.old); n != 1 {
			return "", fmt.Errorf("gateway: the config has %q %d times, want once", r.old, n)
		}
		out = strings.Replace(out, r.old, r.new, 1)
	}
	return out, nil
}

// mainConf is the nginx.conf that includes the rendered service configs; everything nginx
// writes stays in dir.
func mainConf(dir string, includes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker_processes 1;\npid %s;\n", filepath.Join(dir, "nginx.pid"))
	fmt.Fprintf(&b, "error_log %s warn;\n", filepath.Join(dir, "error.log"))
	b.WriteString("events { worker_connections 256; }\nhttp {\n    access_log off;\n")
	fmt.Fprintf(&b, "    client_body_temp_path %s;\n    proxy_temp_path %s;\n", filepath.Join(dir, "client_body"), filepath.Join(dir, "proxy"))
	for _, inc := range includes {
		fmt.Fprintf(&b, "    include %s;\n", inc)
	}
	b.WriteString("}\n")
	return b.String()
}

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
// returns once every listener accepts connections. stop ends it.
func startGateway(ctx context.Context, o gatewayOptions) (*gateway, error) {
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
	for i, up := range o.upstreams {
		u, err := url.Parse(up)
		if err != nil {
			g.cleanup()
			return nil, fmt.Errorf("gateway: upstream %q: %w", up, err)
		}
		listen, err := freeAddr()
		if err != nil {
			g.cleanup()
			return nil, err
		}
		conf, err := render(string(tmpl), "s"+strconv.Itoa(i), u.Host, listen, o.readTimeout)
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
	if err := os.WriteFile(confPath, []byte(mainConf(dir, includes)), 0o644); err != nil {
		g.cleanup()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.cmd = exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	g.cmd.Stdout, g.cmd.Stderr = os.Stderr, os.Stderr
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

// ready waits until every listener accepts a connection, nginx exits, or 10 s pass.
func (g *gateway) ready(ctx context.Context, addrs []string) error {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
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

// freeAddr returns a loopback address with a port free at the time of the call.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
