package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
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
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				_, _ = io.Copy(io.Discard, stdout)
			}()
			var out strings.Builder
			waitFor := func(msg string) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							t.Fatalf("ask-serve ended before saying %q:\n%s", msg, out.String())
						}
						out.WriteString(l + "\n")
						if strings.Contains(l, msg) {
							return
						}
					case <-deadline:
						t.Fatalf("ask-serve did not say %q:\n%s", msg, out.String())
					}
				}
			}
			waitFor("Ctrl-C stops everything.")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitFor("stopping…")
			for range lines {
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("ask-serve after %v: %v, want exit status 0\n%s", sig, err, out.String())
			}
		})
	}
}
