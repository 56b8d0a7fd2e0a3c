package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	if runtime.GOOS != "linux" {
		t.Skip("a child dies with its parent on Linux only (Pdeathsig)")
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (apt-get install -y nginx-light); make conformance-gateway installs it")
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			launcher := exec.Command(os.Args[0], "-test.run=^$")
			launcher.Env = append(os.Environ(), "CONFORMANCE_TEST_LAUNCHER=1")
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
				t.Fatalf("the launcher did not start the gateway: %v", err)
			}
			f := strings.Fields(line) // nginx PID HOST:PORT DIR
			if len(f) != 4 || f[0] != "nginx" {
				t.Fatalf("the launcher said %q", line)
			}
			master, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			listen, dir := f[2], f[3]
			// Whatever happens, nothing of this nginx outlives the test, nor its directory, which
			// the killed launcher could not remove.
			defer os.RemoveAll(dir)
			defer func() { // the workers first: once the master is gone they are init's
				if b, err := exec.Command("pgrep", "-P", strconv.Itoa(master)).Output(); err == nil {
					for _, p := range strings.Fields(string(b)) {
						if pid, err := strconv.Atoi(p); err == nil {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				_ = syscall.Kill(master, syscall.SIGKILL)
			}()
			if err := launcher.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = launcher.Wait()
			// nginx stops its workers in milliseconds once told; left alone, it listens for good.
			deadline := time.Now().Add(10 * time.Second)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				c, err := net.DialTimeout("tcp", listen, time.Second)
				if err != nil {
					return // nothing listens: nginx is gone
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatalf("the gateway at %s still accepts connections 10 s after its command got %v: nginx was left behind", listen, sig)
				}
				<-tick.C
			}
		})
	}
}
