package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx/nginxtest"
)

// TestMain: with CONFORMANCE_TEST_LAUNCHER set, the test binary starts the gateway as the
// command does (launcherMain), for TestGatewayStopsWhenTheCommandDies.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv("CONFORMANCE_TEST_LAUNCHER"); ok {
		if err := launcherMain(); err != nil {
			fmt.Fprintln(os.Stderr, "launcher:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// launcherMain starts the gateway in front of an upstream nobody serves, says "nginx PID LISTEN
// DIR" on stdout once it listens, and waits to be killed.
func launcherMain() error {
	g, err := startGateway(context.Background(), gatewayOptions{
		nginx: "nginx", template: "../../deploy/nginx/ask.conf", readTimeout: time.Second,
		upstreams: []string{"http://127.0.0.1:1/ask"}, logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	u, err := url.Parse(g.urls[0])
	if err != nil {
		return err
	}
	fmt.Printf("nginx %d %s %s\n", g.cmd.Process.Pid, u.Host, g.dir)
	return fmt.Errorf("nginx exited: %v", <-g.done)
}

// TestGatewayStopsWhenTheCommandDies: a conformance run that dies (the terminal it runs in
// closing, which is SIGHUP and Go's default death; SIGKILL; a CI step's timeout) leaves no
// nginx behind. Started as a plain child, the gateway outlived it: master and worker kept
// listening on their ports for good.
func TestGatewayStopsWhenTheCommandDies(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			launcher := exec.Command(os.Args[0], "-test.run=^$")
			launcher.Env = append(os.Environ(), "CONFORMANCE_TEST_LAUNCHER=1")
			nginxtest.LauncherLeavesNoNginx(t, launcher, sig)
		})
	}
}
