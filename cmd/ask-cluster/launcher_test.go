package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
	"github.com/das-ask/ask/deploy/nginx/nginxtest"
	"github.com/das-ask/ask/internal/loopback"
)

// TestMain: with ASK_CLUSTER_TEST_LAUNCHER set, the test binary is a launcher that starts nginx
// as the cluster does (launcherMain), for TestNginxStopsWhenTheLauncherDies.
func TestMain(m *testing.M) {
	if dir, ok := os.LookupEnv("ASK_CLUSTER_TEST_LAUNCHER"); ok {
		if err := launcherMain(dir, os.Getenv("ASK_CLUSTER_TEST_NGINX"), os.Getenv("ASK_CLUSTER_TEST_LISTEN")); err != nil {
			fmt.Fprintln(os.Stderr, "launcher:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// launcherMain starts nginx (master and one worker) listening on listen through startNginx, says
// "nginx PID LISTEN -" on stdout once it answers (nginxtest.LauncherLeavesNoNginx: its directory
// is the test's), and waits to be killed.
func launcherMain(dir, bin, listen string) error {
	inc := filepath.Join(dir, "ok.conf")
	if err := os.WriteFile(inc, []byte("server { listen "+listen+"; return 200 \"ok\\n\"; }\n"), 0o644); err != nil {
		return err
	}
	mainPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(nginx.Main(dir, 64, inc)), 0o644); err != nil {
		return err
	}
	p, err := startNginx(dir, bin, dir, mainPath, nil)
	if err != nil {
		return err
	}
	if err := p.waitReady(context.Background(), func() error {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("nginx %d %s -\n", p.cmd.Process.Pid, listen)
	<-p.done
	return errors.New("nginx exited")
}

// TestNginxStopsWhenTheLauncherDies: a launcher that dies (make ask-serve-cluster SIGKILLed, a
// test binary killed at its timeout) leaves no nginx behind. Every child got SIGKILL then, and a
// SIGKILLed nginx master leaves its worker running and listening for good: the gateway's address
// (127.0.0.1:8080 by default, make ask-serve's too) stayed taken, and every later start of the
// cluster failed, "nginx exited: exit status 1" (bind: address already in use). nginx's master now
// gets SIGTERM, on which it stops its workers, then itself.
func TestNginxStopsWhenTheLauncherDies(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	addrs, err := loopback.Addrs(1)
	if err != nil {
		t.Fatal(err)
	}
	launcher := exec.Command(os.Args[0], "-test.run=^$")
	launcher.Env = append(os.Environ(), "ASK_CLUSTER_TEST_LAUNCHER="+t.TempDir(), "ASK_CLUSTER_TEST_NGINX="+bin,
		"ASK_CLUSTER_TEST_LISTEN="+addrs[0])
	nginxtest.LauncherLeavesNoNginx(t, launcher, syscall.SIGKILL)
}
