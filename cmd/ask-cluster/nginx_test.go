package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestRenderGateway: the checked-in config, rendered for three replicas, names every replica
// in one upstream with no stickiness directive, listens where asked, and keeps what the
// contract needs from the gateway (no buffering, Last-Event-ID passed on).
func TestRenderGateway(t *testing.T) {
	tmpl, err := os.ReadFile("../../deploy/nginx/ask.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf, err := renderGateway(string(tmpl), "main", []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, "127.0.0.1:9", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"upstream ask_main {", "proxy_pass http://ask_main;",
		"server 127.0.0.1:1 ", "server 127.0.0.1:2 ", "server 127.0.0.1:3 ",
		"listen 127.0.0.1:9;", "proxy_read_timeout 2s;", "proxy_buffering off;", "Last-Event-ID",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, conf)
		}
	}
	for _, sticky := range []string{"ip_hash", "hash ", "sticky", "least_conn"} {
		if strings.Contains(conf, sticky) {
			t.Errorf("rendered config balances with %q, want plain round-robin", sticky)
		}
	}
	if _, err := renderGateway("server { }", "main", []string{"127.0.0.1:1"}, "127.0.0.1:9", time.Second); err == nil {
		t.Error("a config without the expected lines rendered without error")
	}
}
