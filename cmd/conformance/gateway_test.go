package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestRenderTheCheckedInConfig(t *testing.T) {
	tmpl, err := os.ReadFile("../../deploy/nginx/ask.conf")
	if err != nil {
		t.Fatal(err)
	}
	got, err := render(string(tmpl), "s1", "127.0.0.1:4242", "127.0.0.1:5151", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"upstream ask_s1 {", "proxy_pass http://ask_s1;", "server 127.0.0.1:4242;", "listen 127.0.0.1:5151;",
		"proxy_read_timeout 2s;", "proxy_buffering off;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`,
		"location /ask/ {", "Last-Event-ID", "Authorization",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the rendered config lacks %q", want)
		}
	}
	for _, gone := range []string{"ask_service", "8080", "8081", "proxy_read_timeout 60s"} {
		if strings.Contains(got, gone) {
			t.Errorf("the rendered config still has %q", gone)
		}
	}
}

func TestRenderRefusesAConfigItCannotRewrite(t *testing.T) {
	if _, err := render("upstream ask_service {\n}\n", "s", "a:1", "b:2", time.Second); err == nil {
		t.Error("rendered a config without the lines it must replace")
	}
	tmpl, _ := os.ReadFile("../../deploy/nginx/ask.conf")
	if _, err := render(string(tmpl), "s", "a:1", "b:2", 500*time.Millisecond); err == nil {
		t.Error("rendered a sub-second read timeout")
	}
}

func TestMainConfKeepsEverythingInItsDirectory(t *testing.T) {
	got := mainConf("/tmp/gw", []string{"/tmp/gw/ask-0.conf"})
	for _, want := range []string{"pid /tmp/gw/nginx.pid;", "error_log /tmp/gw/error.log", "include /tmp/gw/ask-0.conf;", "proxy_temp_path /tmp/gw/proxy;"} {
		if !strings.Contains(got, want) {
			t.Errorf("nginx.conf lacks %q:\n%s", want, got)
		}
	}
}
