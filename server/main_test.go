package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: runs, streams, long polls,
// eviction and the validator's refresh must all end with their owners.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
