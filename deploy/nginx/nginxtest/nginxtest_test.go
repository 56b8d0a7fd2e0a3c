package nginxtest

import (
	"bufio"
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
)

// TestHelperNginx is not a test: run by TestNginxStopsWhenTheTestBinaryDies as a test binary of
// its own, it starts nginx with Start, says "nginx PID ADDR DIR" on stdout, and waits to be
// killed.
func TestHelperNginx(t *testing.T) {
	if os.Getenv("NGINXTEST_HELPER") != "1" {
		t.Skip("the test binary TestNginxStopsWhenTheTestBinaryDies kills")
	}
	addr, dir := StartIn(t, "127.0.0.1:1")
	pid, err := os.ReadFile(filepath.Join(dir, "nginx.pid"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("nginx %s %s %s\n", strings.TrimSpace(string(pid)), addr, dir)
	select {}
}

// TestNginxStopsWhenTheTestBinaryDies: a test binary that dies without its cleanups (go test's
// -timeout panics and exits; SIGKILL) leaves no nginx behind. Started as a plain child, nginx
// outlived it: master and worker kept listening, for good.
func TestNginxStopsWhenTheTestBinaryDies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a child dies with its parent on Linux only (Pdeathsig)")
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperNginx$")
	helper.Env = append(os.Environ(), "NGINXTEST_HELPER=1")
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the helper did not start nginx: %v", err)
	}
	f := strings.Fields(line) // nginx PID ADDR DIR
	if len(f) != 4 || f[0] != "nginx" {
		t.Fatalf("the helper said %q", line)
	}
	master, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	addr, dir := f[2], f[3]
	// Whatever happens, nothing of this nginx outlives the test, nor its directory (the
	// helper's t.TempDir, under one of its own), which the killed helper could not remove.
	defer os.RemoveAll(filepath.Dir(dir))
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
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
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
			t.Fatalf("nginx at %s still accepts connections 10 s after the test binary was killed: it was left behind", addr)
		}
		<-tick.C
	}
}
