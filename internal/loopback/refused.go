//go:build unix

package loopback

import (
	"strconv"
	"syscall"
	"testing"
)

// Refused returns a loopback address ("127.0.0.1:port") where a connection is refused for as
// long as tb runs: a socket bound to the port and never listening, closed at tb's end. A port
// picked with net.Listen and closed at once to stand for "nothing listens there" may be the
// kernel's next pick for any listener started meanwhile (this test's own httptest servers and
// stacks, or another package's test binary), which then answers where the test wanted a
// refusal. A bound socket keeps the port out of every other bind, the kernel's picks included.
func Refused(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatalf("loopback: %v", err)
	}
	syscall.CloseOnExec(fd)
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("loopback: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("loopback: %v", err)
	}
	return "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
}
