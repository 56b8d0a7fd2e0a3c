package agent_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/internal/leaktest"
)

// TestMain fails the package if a run leaves a goroutine behind: every MCP session a run opens
// is closed when it returns. The test servers' idle connections and sessions are not the run's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.IgnoreTestServers()...)
}
