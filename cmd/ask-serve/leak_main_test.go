package main

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests. With ASK_SERVE_TEST_ARGS set,
// the test binary is ask-serve itself (main) with those arguments (space-separated), for the
// tests of the process's own signals.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("ASK_SERVE_TEST_ARGS"); ok {
		os.Args = append(os.Args[:1], strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
