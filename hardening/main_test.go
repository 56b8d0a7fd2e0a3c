package hardening_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every stack, proxy, stream
// and validator a test starts must end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
