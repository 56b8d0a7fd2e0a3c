package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The lines of deploy/nginx/ask.conf that renderGateway replaces; each must occur exactly
// once, so that a change to the checked-in file cannot silently leave the cluster running
// something else.
const (
	tmplUpstream    = "upstream ask_service {"
	tmplProxyPass   = "proxy_pass http://ask_service;"
	tmplServer      = "server 127.0.0.1:8080;"
	tmplListen      = "listen 127.0.0.1:8081;"
	tmplReadTimeout = "proxy_read_timeout 60s;"
)

// renderGateway is the checked-in gateway config with its upstream named after name and
// holding every replica (nginx's default balancing: round-robin, no stickiness; a replica
// that refuses connections is skipped for the next), listening on listen, with
// proxy_read_timeout readTimeout.
func renderGateway(template, name string, replicas []string, listen string, readTimeout time.Duration) (string, error) {
	secs := int(readTimeout / time.Second)
	if secs < 1 {
		return "", fmt.Errorf("gateway: the read timeout must be at least 1s")
	}
	var servers []string
	for _, r := range replicas {
		servers = append(servers, "server "+r+" max_fails=1 fail_timeout=2s;")
	}
	out := template
	for _, r := range []struct{ old, new string }{
		{tmplUpstream, "upstream ask_" + name + " {"},
		{tmplProxyPass, "proxy_pass http://ask_" + name + ";"},
		{tmplServer, strings.Join(servers, "\n    ")},
		{tmplListen, "listen " + listen + ";"},
		{tmplReadTimeout, "proxy_read_timeout " + strconv.Itoa(secs) + "s;"},
	} {
		if n := strings.Count(out, r.old); n != 1 {
			return "", fmt.Errorf("gateway: deploy/nginx/ask.conf has %q %d times, want once", r.old, n)
		}
		out = strings.Replace(out, r.old, r.new, 1)
	}
	return out, nil
}

// nginxMain is the nginx.conf that includes the rendered config; everything nginx writes
// stays in dir.
func nginxMain(dir string, includes ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker_processes 1;\npid %s;\n", filepath.Join(dir, "nginx.pid"))
	fmt.Fprintf(&b, "error_log %s warn;\n", filepath.Join(dir, "error.log"))
	b.WriteString("events { worker_connections 512; }\nhttp {\n    access_log off;\n")
	fmt.Fprintf(&b, "    client_body_temp_path %s;\n    proxy_temp_path %s;\n", filepath.Join(dir, "client_body"), filepath.Join(dir, "proxy"))
	for _, inc := range includes {
		fmt.Fprintf(&b, "    include %s;\n", inc)
	}
	b.WriteString("}\n")
	return b.String()
}

// startGateway starts nginx with the checked-in config rendered for the main replicas on
// Options.GatewayAddr and, when there is an overflow group, for it on a free port.
func (c *Cluster) startGateway(ctx context.Context, nginxBin string, main, overflow []string) error {
	o := c.opts
	gwAddr, err := addrOr(o.GatewayAddr)
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(filepath.Join(o.Root, "deploy", "nginx", "ask.conf"))
	if err != nil {
		return err
	}
	readTimeout := o.GatewayReadTimeout
	if readTimeout <= 0 {
		readTimeout = 60 * time.Second
	}
	dir := filepath.Join(o.Dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var includes []string
	write := func(name string, ups []string, listen string) error {
		conf, err := renderGateway(string(tmpl), name, ups, listen, readTimeout)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name+".conf")
		includes = append(includes, path)
		return os.WriteFile(path, []byte(conf), 0o644)
	}
	if err := write("main", main, gwAddr); err != nil {
		return err
	}
	c.GatewayURL = "http://" + gwAddr + "/ask"
	if len(overflow) > 0 {
		ofAddr, err := freeAddr()
		if err != nil {
			return err
		}
		if err := write("overflow", overflow, ofAddr); err != nil {
			return err
		}
		c.OverflowURL = "http://" + ofAddr + "/ask"
	}
	mainPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(nginxMain(dir, includes...)), 0o644); err != nil {
		return err
	}
	ng, err := startProc("nginx", c.logDir, nginxBin,
		[]string{"-p", dir, "-c", mainPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;"}, nil, o.Echo)
	if err != nil {
		return err
	}
	c.others = append(c.others, ng)
	for _, u := range []string{c.GatewayURL, c.OverflowURL} {
		if u == "" {
			continue
		}
		if err := ng.waitReady(ctx, getReady(u+"/v1/openapi.json")); err != nil {
			return err
		}
	}
	return nil
}
