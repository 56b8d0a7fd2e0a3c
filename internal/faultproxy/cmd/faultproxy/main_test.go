package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunServesProxyAndControl(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--target", echo.Addr().String()}, pw, io.Discard); _ = pw.Close() }()
	out := bufio.NewReader(pr)
	proxyLine, _ := out.ReadString('\n')
	controlLine, _ := out.ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, out) }()
	proxy := strings.TrimSpace(strings.TrimPrefix(proxyLine, "proxy "))
	control := strings.TrimSpace(strings.TrimPrefix(controlLine, "control "))

	res, err := http.Post(control+"/drop?n=1&match=lose", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /drop = %d", res.StatusCode)
	}
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	_, _ = io.WriteString(c, "keep\n")
	if got, err := r.ReadString('\n'); err != nil || got != "keep\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	_, _ = io.WriteString(c, "lose\n")
	if _, err := r.ReadString('\n'); err != io.EOF {
		t.Fatalf("the drop armed over the control API: %v, want EOF", err)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), nil, io.Discard, io.Discard); err == nil {
		t.Error("no --target: want an error")
	}
}
