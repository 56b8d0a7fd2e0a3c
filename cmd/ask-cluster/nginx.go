package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
	"github.com/das-ask/ask/internal/loopback"
)

// renderGateway is the checked-in gateway config with its upstream named after name and
// holding every replica (nginx's default balancing: round-robin, no stickiness; a replica
// that refuses connections is skipped for the next), listening on listen, with
// proxy_read_timeout readTimeout.
func renderGateway(template, name string, replicas []string, listen string, readTimeout time.Duration) (string, error) {
	servers := make([]string, len(replicas))
	for i, r := range replicas {
		servers[i] = r + " max_fails=1 fail_timeout=2s"
	}
	return nginx.Render(template, name, servers, listen, readTimeout)
}

// startGateway starts nginx with the checked-in config rendered for the main replicas on
// Options.GatewayAddr and, for the overflow and limits groups there are, for each on a free port.
func (c *Cluster) startGateway(ctx context.Context, nginxBin string, g groupAddrs) error {
	o := c.opts
	// Every gateway's address not given, picked together: one port in two server blocks is no
	// error to nginx (it warns, "conflicting server name", and serves both with the first), so
	// one group's checks would run against another's replicas.
	picks, err := loopback.Addrs(3)
	if err != nil {
		return err
	}
	if o.GatewayAddr != "" {
		picks = slices.DeleteFunc(picks, func(a string) bool { return a == o.GatewayAddr })
	} else {
		o.GatewayAddr, picks = picks[0], picks[1:]
	}
	gwAddr := o.GatewayAddr
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
	if err := write("main", g.main, gwAddr); err != nil {
		return err
	}
	c.GatewayURL = "http://" + gwAddr + "/ask"
	for _, x := range []struct {
		name string
		ups  []string
		url  *string
	}{{"overflow", g.overflow, &c.OverflowURL}, {"limits", g.limits, &c.LimitsURL}} {
		if len(x.ups) == 0 {
			continue
		}
		addr := picks[0]
		picks = picks[1:]
		if err := write(x.name, x.ups, addr); err != nil {
			return err
		}
		*x.url = "http://" + addr + "/ask"
	}
	mainPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(nginx.Main(dir, 512, includes...)), 0o644); err != nil {
		return err
	}
	ng, err := startNginx(c.logDir, nginxBin, dir, mainPath, o.Echo)
	if err != nil {
		return err
	}
	c.others = append(c.others, ng)
	for _, u := range []string{c.GatewayURL, c.OverflowURL, c.LimitsURL} {
		if u == "" {
			continue
		}
		if err := ng.waitReady(ctx, getReady(u+"/v1/openapi.json")); err != nil {
			return err
		}
	}
	return nil
}

// startNginx starts nginx in the foreground with the main config mainPath, its prefix and error
// log in dir: a master that stops its workers if the launcher dies (startMaster).
func startNginx(logDir, nginxBin, dir, mainPath string, echo io.Writer) (*proc, error) {
	return startMaster("nginx", logDir, nginxBin,
		[]string{"-p", dir, "-c", mainPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;"}, nil, echo)
}
