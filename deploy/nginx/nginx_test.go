package nginx_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
)

func TestRenderTheCheckedInConfig(t *testing.T) {
	got, err := nginx.Render(nginx.Conf, "s1", []string{"127.0.0.1:4242"}, "127.0.0.1:5151", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"upstream ask_s1 {", "proxy_pass http://ask_s1;", "server 127.0.0.1:4242;", "listen 127.0.0.1:5151;",
		"proxy_read_timeout 2s;", "proxy_buffering off;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`,
		"location /ask/ {", "Last-Event-ID", "Authorization", "Idempotency-Key",
		"$ask_s1_post_route", "$ask_s1_reroute", "$ask_s1_long_poll", "proxy_pass http://ask_s1$request_uri;",
		"proxy_next_upstream error timeout non_idempotent;", "proxy_read_timeout 5s;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the rendered config lacks %q", want)
		}
	}
	for _, gone := range []string{"ask_service", "8080", "8081", "proxy_read_timeout 30s", "$ask_post_route", "$ask_reroute", "$ask_long_poll"} {
		if strings.Contains(got, gone) {
			t.Errorf("the rendered config still has %q", gone)
		}
	}
}

// Several servers, each with its parameters, stand in one upstream.
func TestRenderSeveralServers(t *testing.T) {
	got, err := nginx.Render(nginx.Conf, "main", []string{"127.0.0.1:1 max_fails=1", "127.0.0.1:2 max_fails=1"}, "127.0.0.1:9", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "server 127.0.0.1:1 max_fails=1;\n    server 127.0.0.1:2 max_fails=1;") {
		t.Errorf("the upstream lacks its servers:\n%s", got)
	}
}

func TestRenderRefusesAConfigItCannotRewrite(t *testing.T) {
	if _, err := nginx.Render("upstream ask_service {\n}\n", "s", []string{"a:1"}, "b:2", time.Second); err == nil {
		t.Error("rendered a config without the lines it must replace")
	}
	if _, err := nginx.Render(nginx.Conf+nginx.Conf, "s", []string{"a:1"}, "b:2", time.Second); err == nil {
		t.Error("rendered a config with each line twice")
	}
	if _, err := nginx.Render(nginx.Conf, "s", []string{"a:1"}, "b:2", 500*time.Millisecond); err == nil {
		t.Error("rendered a sub-second read timeout")
	}
	if _, err := nginx.Render(nginx.Conf, "s", nil, "b:2", time.Second); err == nil {
		t.Error("rendered an upstream with no server")
	}
}

func TestMainKeepsEverythingInItsDirectory(t *testing.T) {
	got := nginx.Main("/tmp/gw", 256, "/tmp/gw/ask-0.conf", "/tmp/gw/ask-1.conf")
	for _, want := range []string{
		"pid /tmp/gw/nginx.pid;", "error_log /tmp/gw/error.log", "worker_connections 256;",
		"access_log /tmp/gw/access.log ask_upstreams;", "include /tmp/gw/ask-0.conf;", "include /tmp/gw/ask-1.conf;", "proxy_temp_path /tmp/gw/proxy;", "client_body_temp_path /tmp/gw/client_body;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("nginx.conf lacks %q:\n%s", want, got)
		}
	}
}

// TestNginxAcceptsTheRenderedConfig: nginx itself (`nginx -t`) accepts two rendered copies of
// the checked-in file in one http {} block, as the cluster and the conformance gateway run it.
func TestNginxAcceptsTheRenderedConfig(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	dir := t.TempDir()
	var includes []string
	for i, name := range []string{"main", "overflow"} {
		conf, err := nginx.Render(nginx.Conf, name, []string{"127.0.0.1:1 max_fails=1", "127.0.0.1:2"}, "127.0.0.1:"+strconv.Itoa(40001+i), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		includes = append(includes, p)
	}
	main := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(main, []byte(nginx.Main(dir, 64, includes...)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-p", dir, "-c", main, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}
