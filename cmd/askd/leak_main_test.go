package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests. With ASKD_TEST_MAIN set, the
// test binary is askd itself (main), for the tests of the process's own signals.
func TestMain(m *testing.M) {
	if os.Getenv("ASKD_TEST_MAIN") != "" {
		os.Args = os.Args[:1]
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
