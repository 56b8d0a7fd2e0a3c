package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/proctest"
)

// TestAskServeStopsGracefullyOnEachSignal: the process (this test binary as ask-serve) stops as
// askd does on SIGINT, SIGTERM and SIGHUP: it says it is stopping, gives running asks the
// grace, and exits 0. It handled only SIGINT and SIGTERM, so SIGHUP (the terminal it runs in
// closing) killed it at once, every stream cut without its terminal event and done.
func TestAskServeStopsGracefullyOnEachSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "ASK_SERVE_TEST_ARGS=-addr 127.0.0.1:0 -idp-addr 127.0.0.1:0 -source-addr 127.0.0.1:0 "+
				"-stub-addr 127.0.0.1:0 -catalog-addr 127.0.0.1:0 -state "+t.TempDir(),
				"DAS_ASK_ADMIN_ADDR=off", "DAS_ASK_SHUTDOWN_GRACE_S=0")
			cmd.Stderr = io.Discard
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			out := proctest.Watch(t, "ask-serve", stdout)
			out.WaitFor("Ctrl-C stops everything.", 30*time.Second)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			out.WaitFor("stopping…", 30*time.Second)
			out.Drain()
			if err := cmd.Wait(); err != nil {
				t.Errorf("ask-serve after %v: %v, want exit status 0\n%s", sig, err, out.String())
			}
		})
	}
}
