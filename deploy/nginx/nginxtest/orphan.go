package nginxtest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// LauncherLeavesNoNginx checks that a process that starts nginx leaves none behind when it dies
// without stopping it (a terminal closed, SIGKILL, a test binary killed at its timeout): started
// as a plain child, nginx outlived its launcher, master and worker listening for good. launcher,
// not yet started, is a program (most often the test binary run again) that starts nginx the way
// the code under test does and then says "nginx PID ADDR DIR" on stdout: the master's pid, the
// address it listens on, and a directory to remove afterwards ("-" for none). Once it has, it is
// sent sig, and t fails unless nothing listens at ADDR within 10 s. Whatever the outcome, nothing
// of that nginx outlives the test. It skips t where nginx is not installed or where a child does
// not die with its parent (Pdeathsig is Linux's).
func LauncherLeavesNoNginx(t *testing.T, launcher *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("a child dies with its parent on Linux only (Pdeathsig)")
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
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
	f := strings.Fields(line) // nginx PID ADDR DIR
	if len(f) != 4 || f[0] != "nginx" {
		t.Fatalf("the launcher said %q", line)
	}
	master, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	addr, dir := f[2], f[3]
	if dir != "-" {
		defer os.RemoveAll(dir) // the killed launcher could not
	}
	defer func() {
		// Its workers are listed first (once the master is gone they are init's), then the
		// master is killed, then they are: a worker killed while its master lives is replaced
		// by a new one, which the master's death then left listening.
		b, _ := exec.Command("pgrep", "-P", strconv.Itoa(master)).Output()
		_ = syscall.Kill(master, syscall.SIGKILL)
		for _, p := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
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
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // nothing listens: nginx is gone
		}
		c.Close()
		if time.Now().After(deadline) {
			ps, _ := exec.Command("pgrep", "-a", "-P", strconv.Itoa(master)).CombinedOutput()
			t.Fatalf("nginx at %s still accepts connections 10 s after its launcher got %v: it was left behind\nits workers: %s", addr, sig, ps)
		}
		<-tick.C
	}
}
