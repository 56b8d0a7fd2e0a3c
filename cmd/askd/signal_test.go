package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/internal/proctest"
)

// TestAskdStopsGracefullyOnEachSignal: the process (this test binary as askd) stops as
// documented on SIGTERM, SIGINT and SIGHUP: it logs that it is stopping, gives running asks the
// grace, and exits 0. SIGHUP, Go's default for which is to die at once, comes when the terminal
// askd runs in closes: with the in-memory store it took every ticket with it, the open streams
// cut without their terminal event and done. askd has nothing to reload (its settings are its
// environment, which a running process cannot be given anew), so SIGHUP stops it as the others
// do and a supervisor starting it again is the reload.
func TestAskdStopsGracefullyOnEachSignal(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "ASKD_TEST_MAIN=1",
				"DAS_JWKS_URL="+cfg.JWKSURL, "DAS_ISSUER="+cfg.Issuer, "DAS_AUDIENCE="+cfg.Audience,
				"DAS_ASK_ADDR=127.0.0.1:0", "DAS_ASK_ADMIN_ADDR=off", "DAS_SOURCES=demo=http://127.0.0.1:1/mcp",
				"DAS_ASK_SHUTDOWN_GRACE_S=0", "DAS_LOG_FORMAT=text")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			out := proctest.Watch(t, "askd", stderr)
			out.WaitFor("msg=serving", 20*time.Second)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			out.WaitFor(`msg="stopping: no shutdown grace: running asks end now`, 20*time.Second) // DAS_ASK_SHUTDOWN_GRACE_S=0
			out.WaitFor("msg=stopped", 20*time.Second)
			out.Drain()
			err = cmd.Wait()
			var exit *exec.ExitError
			if errors.As(err, &exit) || err != nil {
				t.Errorf("askd after %v: %v, want exit status 0\n%s", sig, err, out.String())
			}
		})
	}
}
