// Package nginx renders the checked-in gateway config, ask.conf, for a gateway started by a
// test or a tool: its upstream renamed and pointed at the given servers, its listener moved and
// its proxy_read_timeout set; and writes the nginx.conf that includes the rendered files. The
// rest of ask.conf — what the contract needs from a gateway: no buffering, Last-Event-ID and
// Authorization passed on — is used as checked in.
package nginx

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Conf is ask.conf as checked in.
//
//go:embed ask.conf
var Conf string

// The lines of ask.conf that Render replaces; each must occur exactly once (the upstream's
// name and the maps' variables at least once, every occurrence replaced), so that a change to
// the checked-in file cannot silently leave a gateway running something else.
const (
	tmplUpstream    = "upstream ask_service {"
	tmplProxyPass   = "http://ask_service"
	tmplServer      = "server 127.0.0.1:8080;"
	tmplListen      = "listen 127.0.0.1:8081;"
	tmplReadTimeout = "proxy_read_timeout 30s;" // the event stream's
	tmplPostRoute   = "$ask_post_route"
	tmplReroute     = "$ask_reroute"
	tmplLongPoll    = "$ask_long_poll"
	tmplAllow       = "$ask_allow"
)

// Render returns template (ask.conf, or a file in its shape) with its upstream named ask_<name>
// and holding one server line per entry of servers (each "host:port", optionally followed by
// parameters such as "max_fails=1"), listening on listen (host:port), with the event stream's
// proxy_read_timeout (the gateway's idle timeout) readTimeout (whole seconds, at least 1). The
// maps' variables are renamed after name too, so several rendered files can share one nginx.
func Render(template, name string, servers []string, listen string, readTimeout time.Duration) (string, error) {
	secs := int(readTimeout / time.Second)
	if secs < 1 {
		return "", errors.New("gateway: the read timeout must be at least 1s")
	}
	if len(servers) == 0 {
		return "", errors.New("gateway: an upstream needs at least one server")
	}
	lines := make([]string, len(servers))
	for i, s := range servers {
		lines[i] = "server " + s + ";"
	}
	out := template
	for _, r := range []struct {
		old, new string
		all      bool
	}{
		{tmplUpstream, "upstream ask_" + name + " {", false},
		{tmplProxyPass, "http://ask_" + name, true},
		{tmplServer, strings.Join(lines, "\n    "), false},
		{tmplListen, "listen " + listen + ";", false},
		{tmplReadTimeout, "proxy_read_timeout " + strconv.Itoa(secs) + "s;", false},
		{tmplPostRoute, "$ask_" + name + "_post_route", true},
		{tmplReroute, "$ask_" + name + "_reroute", true},
		{tmplLongPoll, "$ask_" + name + "_long_poll", true},
		{tmplAllow, "$ask_" + name + "_allow", true},
	} {
		n := strings.Count(out, r.old)
		if r.all && n >= 1 {
			out = strings.ReplaceAll(out, r.old, r.new)
			continue
		}
		if n != 1 {
			return "", fmt.Errorf("gateway: the config has %q %d times, want once", r.old, n)
		}
		out = strings.Replace(out, r.old, r.new, 1)
	}
	return out, nil
}

// AccessLog is the access log's name in Main's dir.
const AccessLog = "access.log"

// PIDFile is the file in Main's dir that holds nginx's pid.
const PIDFile = "nginx.pid"

// Bound reports whether the nginx of pid, run on Main's config for dir, has bound its
// listeners: it writes its pid file after binding them. Before, a listener's address may answer
// for another process that took the port; an nginx that could not bind one exits without it.
func Bound(dir string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(dir, PIDFile))
	return err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid)
}

// Main returns the nginx.conf that includes the rendered configs, with workerConnections
// connections for its one worker; everything nginx writes (pid, error log, access log,
// temporary files) stays in dir. The access log (AccessLog) gives each request's id, status
// and every replica it was sent to with what each answered ($upstream_addr and
// $upstream_status list them all, a draining replica's 421 passed on among them): a test
// finds there which replicas a request it saw fail went to. $uri only, never the query
// string, nor any header.
func Main(dir string, workerConnections int, includes ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker_processes 1;\npid %s;\n", filepath.Join(dir, PIDFile))
	fmt.Fprintf(&b, "error_log %s warn;\n", filepath.Join(dir, "error.log"))
	fmt.Fprintf(&b, "events { worker_connections %d; }\nhttp {\n", workerConnections)
	b.WriteString("    log_format ask_upstreams '$request_id $status $request_method $uri upstreams=[$upstream_addr] answered=[$upstream_status]';\n")
	fmt.Fprintf(&b, "    access_log %s ask_upstreams;\n", filepath.Join(dir, AccessLog))
	fmt.Fprintf(&b, "    client_body_temp_path %s;\n    proxy_temp_path %s;\n", filepath.Join(dir, "client_body"), filepath.Join(dir, "proxy"))
	for _, inc := range includes {
		fmt.Fprintf(&b, "    include %s;\n", inc)
	}
	b.WriteString("}\n")
	return b.String()
}
