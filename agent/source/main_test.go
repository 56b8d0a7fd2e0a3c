package source_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/internal/leaktest"
)

// TestMain fails the package if a test leaves a goroutine behind: every client session is
// closed. The test server's idle connections and own sessions are ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.IgnoreTestServers()...)
}
