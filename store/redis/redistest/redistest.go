// Package redistest starts a throwaway redis-server for tests (internal/redisserver does the
// work): tests that need it skip, saying why, when the redis-server binary is absent
// (apt-get install -y redis-server). Binaries use internal/redisserver, never this kit.
package redistest

import (
	"context"
	"os/exec"
	"testing"

	"github.com/das-ask/ask/internal/redisserver"
)

// Binary is the server the package starts, looked up on PATH.
const Binary = redisserver.Binary

// Server is a running redis-server.
type Server = redisserver.Server

// Start starts a server for tb and stops it when tb's test ends. It skips tb when the
// binary is not installed.
func Start(tb testing.TB) *Server { return start(tb, redisserver.Run) }

// StartDurable starts a server with an append-only file (appendonly yes, appendfsync
// everysec), as the durable mode runs it; Server.Kill and Server.Restart put it through a
// crash on the same files.
func StartDurable(tb testing.TB) *Server { return start(tb, redisserver.RunDurable) }

func start(tb testing.TB, run func(context.Context, string) (*Server, error)) *Server {
	tb.Helper()
	if _, err := exec.LookPath(Binary); err != nil {
		tb.Skipf("%s not installed (apt-get install -y redis-server): the Redis store is tested against a real server", Binary)
	}
	s, err := run(context.Background(), tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Stop() })
	return s
}
