package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPortTaken: Start makes the cluster again when a process failed on a port taken before it
// bound it, as each of the processes it starts says so in its log (quoted into the error),
// and only then.
func TestPortTaken(t *testing.T) {
	for _, c := range []struct {
		err  string
		want bool
	}{
		{"askd-2 exited (exit status 1) before it was ready:\naskd: DAS_ASK_ADMIN_ADDR: listen tcp 127.0.0.1:34221: bind: address already in use\n", true},
		{"nginx exited (exit status 1) before it was ready:\nnginx: [emerg] bind() to 127.0.0.1:41235 failed (98: Address already in use)\n", true},
		{"redisserver: exited: 1:M 02 Dec 2026 20:57:28.057 # Warning: Could not create server TCP listening socket 127.0.0.1:40001: bind: Address already in use", true},
		{"askd-1 exited (exit status 1) before it was ready:\naskd: DAS_ASK_STORE: redis store: dial tcp 127.0.0.1:6379: connect: connection refused\n", false},
		{"askd-1 not ready within 30s: Get \"http://127.0.0.1:1/ask/v1/openapi.json\": context deadline exceeded", false},
	} {
		if got := portTaken(errors.New(c.err)); got != c.want {
			t.Errorf("portTaken(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestSignalWhileStartingIsAStop: Ctrl-C or SIGTERM while the cluster builds or starts its
// processes is a stop asked for, as askd and ask-serve take one: exit status 0 and the line
// `stopped while starting`, no banner. It exited 1, "cluster: context canceled", so make
// ask-serve-cluster reported a failure for a Ctrl-C.
func TestSignalWhileStartingIsAStop(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the signal, come as it starts
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"-dir", t.TempDir(), "-q"}, &stdout, &stderr)
	if code := status(err, &stderr); code != 0 {
		t.Errorf("a stop while starting: exit status %d, want 0\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped while starting") {
		t.Errorf("no `stopped while starting` line:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String(), "ask cluster:") {
		t.Errorf("the banner of a cluster that never ran:\n%s", stdout.String())
	}
}

// TestClusterStartOnATakenStubPort: a process that took the llm-stub's port before the stub bound it
// is not taken for the stub. The pieces were ready once their port accepted a connection, so
// the cluster started (CI, 2026-12-07) with the demo source answering on the stub's address and
// no model to call; now each is ready once it answers a request only it serves, and the stub's
// exit on the taken port is Start's error.
func TestClusterStartOnATakenStubPort(t *testing.T) {
	skipWithoutCluster(t, false)
	other := httptest.NewServer(http.NotFoundHandler()) // some other process's server
	defer other.Close()
	c, err := Start(t.Context(), Options{Root: "../..", Dir: t.TempDir(), Lease: testLease, Replicas: 1,
		StubAddr: other.Listener.Addr().String()})
	if err == nil {
		c.Stop()
		t.Fatal("the cluster started with the llm-stub's port held by another server")
	}
	if !strings.Contains(err.Error(), "llm-stub") || !portTaken(err) {
		t.Errorf("Start: %v\nwant the llm-stub's failure to bind its address", err)
	}
}

// TestClusterStartOnATakenDurableRedisPort: the durable Redis is ready once it answers PING,
// not once its port accepts a connection: another server on the port is not taken for it, and
// redis-server's exit on the taken port is Start's error.
func TestClusterStartOnATakenDurableRedisPort(t *testing.T) {
	skipWithoutCluster(t, false)
	other := httptest.NewServer(http.NotFoundHandler()) // some other process's server
	defer other.Close()
	port := other.Listener.Addr().(*net.TCPAddr).Port
	c, err := Start(t.Context(), Options{Root: "../..", Dir: t.TempDir(), Lease: testLease, Replicas: 1,
		DurableRedis: true, RedisPort: port})
	if err == nil {
		c.Stop()
		t.Fatal("the cluster started with the durable Redis's port held by another server")
	}
	if !strings.Contains(err.Error(), "redis") || !portTaken(err) {
		t.Errorf("Start: %v\nwant redis-server's failure to bind its port", err)
	}
}
