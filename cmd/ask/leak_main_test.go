package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// asTheCommand, set in a child's environment, makes the test binary run main: the command as a
// shell runs it, with its own signals and files.
const asTheCommand = "ASK_TEST_RUN_MAIN"

// TestMain fails the package if any goroutine outlives the tests. With asTheCommand set it is
// the command itself, main and nothing else (a test's child process).
func TestMain(m *testing.M) {
	if os.Getenv(asTheCommand) == "1" {
		main()
	}
	goleak.VerifyTestMain(m)
}
