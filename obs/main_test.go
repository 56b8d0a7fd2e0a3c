package obs_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/internal/leaktest"
)

// TestMain fails the package if a test leaves a goroutine behind. Idle keep-alive connections
// and the demo source's server-side MCP sessions belong to the test's servers, not to obs.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.IgnoreTestServers()...)
}
