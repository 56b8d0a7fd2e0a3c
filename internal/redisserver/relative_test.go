package redisserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
)

// TestRelativeDir: a server and a cluster started in a directory named relative to the working
// directory, as `make ask-serve-cluster` names .state/cluster, start and keep their files there
// (redis-server runs in its directory and is told --dir: a relative one would name itself
// below itself, and redis-server refuses to start).
func TestRelativeDir(t *testing.T) {
	for _, bin := range []string{redisserver.Binary, redisserver.CLI} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install -y redis-server): the server is the real thing", bin)
		}
	}
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := os.MkdirAll(filepath.Join("state", "redis"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := redisserver.Run(ctx, filepath.Join("state", "redis"))
	if err != nil {
		t.Fatalf("Run with a relative directory: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Error(err)
	}
	logs, _ := filepath.Glob(filepath.Join("state", "redis", "redis-*.log"))
	if len(logs) != 1 {
		t.Errorf("the server's log in state/redis: %v", logs)
	}
	c, err := redisserver.RunCluster(ctx, filepath.Join("state", "cluster"), 3, 0)
	if err != nil {
		t.Fatalf("RunCluster with a relative directory: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join("state", "cluster", "node-1", "nodes.conf")); err != nil {
		t.Errorf("the first node's files are not under state/cluster: %v", err)
	}
}
