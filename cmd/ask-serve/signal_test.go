package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/config"
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

// TestAskServeSignalWhileStarting: a stop signal while ask-serve is still starting (here its
// service waiting for a Redis, DAS_ASK_STORE, that takes the connection and never answers) is a
// stop, as askd takes one (docs/operations.md): run returns nil (exit 0) after the line
// `stopped while starting` with the signal, and the banner and "stopping…" are never printed.
// It returned "ask service: DAS_ASK_STORE: redis store: context canceled", exit 1 (and a Ctrl-C
// while the demo source loads its data, "demo source: load deployments: context canceled"), so
// make ask-serve reported a stop asked for as a failure.
func TestAskServeSignalWhileStarting(t *testing.T) {
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		defer close(accepted)
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		mute.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	sigs := make(chan os.Signal, 2)
	var stdout, stderr bytes.Buffer
	lookup := config.MapEnv(map[string]string{"DAS_ASK_STORE": "redis://" + mute.Addr().String() + "/0"})
	errc := make(chan error, 1)
	go func() {
		errc <- run(sigs, []string{"-addr", "127.0.0.1:0", "-idp-addr", "127.0.0.1:0", "-source-addr", "127.0.0.1:0",
			"-stub-addr", "127.0.0.1:0", "-catalog-addr", "127.0.0.1:0", "-state", t.TempDir()}, lookup, &stdout, &stderr)
	}()
	select {
	case c := <-accepted: // the service is waiting on its store: starting
		accepted <- c
	case err := <-errc:
		t.Fatalf("ask-serve ended before it dialled its store: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("ask-serve never dialled its store")
	}
	sigs <- syscall.SIGTERM
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("ask-serve stopped while starting with %v (exit status %d), want nil: a stop asked for", err, exitStatus(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ask-serve did not stop")
	}
	if got := stderr.String(); !strings.Contains(got, "stopped while starting") || !strings.Contains(got, "signal=terminated") {
		t.Errorf("ask-serve's log for a stop while starting, want `stopped while starting` with the signal:\n%s", got)
	}
	if got := stdout.String(); strings.Contains(got, "Ctrl-C stops everything.") || strings.Contains(got, "stopping…") {
		t.Errorf("ask-serve printed the banner or the stop of running asks while it never ran:\n%s", got)
	}
}
