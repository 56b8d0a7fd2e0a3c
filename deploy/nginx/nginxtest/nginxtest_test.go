package nginxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/das-ask/ask/deploy/nginx"
)

// TestHelperNginx is not a test: run by TestNginxStopsWhenTheTestBinaryDies as a test binary of
// its own, it starts nginx with Start, says "nginx PID ADDR DIR" on stdout (DIR: its
// t.TempDir's parent, which the killed binary cannot remove), and waits to be killed.
func TestHelperNginx(t *testing.T) {
	if os.Getenv("NGINXTEST_HELPER") != "1" {
		t.Skip("the test binary TestNginxStopsWhenTheTestBinaryDies kills")
	}
	addr, dir := StartIn(t, "127.0.0.1:1")
	pid, err := os.ReadFile(filepath.Join(dir, nginx.PIDFile))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("nginx %s %s %s\n", strings.TrimSpace(string(pid)), addr, filepath.Dir(dir))
	select {}
}

// TestNginxStopsWhenTheTestBinaryDies: a test binary that dies without its cleanups (go test's
// -timeout panics and exits; SIGKILL) leaves no nginx behind. Started as a plain child, nginx
// outlived it: master and worker kept listening, for good.
func TestNginxStopsWhenTheTestBinaryDies(t *testing.T) {
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperNginx$")
	helper.Env = append(os.Environ(), "NGINXTEST_HELPER=1")
	LauncherLeavesNoNginx(t, helper, syscall.SIGKILL)
}
