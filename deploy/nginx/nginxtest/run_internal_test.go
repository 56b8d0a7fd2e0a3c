package nginxtest

import (
	"net"
	"os/exec"
	"testing"
)

// TestRunReportsATakenAddress: nginx on an address another process holds gives up binding it,
// and run says so (start then tries a new pick) instead of ending the test; a dial alone would
// have found the holder answering and taken it for nginx.
func TestRunReportsATakenAddress(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	errLog, taken := run(t, bin, t.TempDir(), "127.0.0.1:9", held.Addr().String(), nil)
	if !taken {
		t.Fatalf("nginx on a held address: ready, want it reported taken")
	}
	if len(errLog) == 0 {
		t.Error("no error log with the report")
	}
}
