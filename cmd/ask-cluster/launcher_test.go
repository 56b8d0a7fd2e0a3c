package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
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
// "nginx PID listening" on stdout once it answers, and waits to be killed.
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
	fmt.Printf("nginx %d listening\n", p.cmd.Process.Pid)
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
	if runtime.GOOS != "linux" {
		t.Skip("a child dies with its launcher on Linux only (Pdeathsig)")
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	addrs, err := freeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	listen := addrs[0]
	launcher := exec.Command(os.Args[0], "-test.run=^$")
	launcher.Env = append(os.Environ(), "ASK_CLUSTER_TEST_LAUNCHER="+t.TempDir(), "ASK_CLUSTER_TEST_NGINX="+bin,
		"ASK_CLUSTER_TEST_LISTEN="+listen)
	launcher.Stderr = os.Stderr
	out, err := launcher.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	defer launcher.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the launcher did not start nginx: %v", err)
	}
	f := strings.Fields(line) // nginx PID listening
	if len(f) != 3 || f[2] != "listening" {
		t.Fatalf("the launcher said %q", line)
	}
	master, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	// Whatever happens, nothing of this nginx outlives the test: the master is its process
	// group's leader (Setpgid), and its workers are in that group.
	defer syscall.Kill(-master, syscall.SIGKILL)
	if err := launcher.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = launcher.Wait()
	// nginx stops its workers in milliseconds; an orphaned worker listens for good.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err != nil {
			break // nothing listens: master and workers gone
		}
		c.Close()
		if time.Now().After(deadline) {
			ps, _ := exec.Command("pgrep", "-a", "-g", strconv.Itoa(master)).CombinedOutput()
			t.Fatalf("%s still accepts connections 10 s after the launcher was killed: nginx was left behind\n%s", listen, ps)
		}
		<-tick.C
	}
}
