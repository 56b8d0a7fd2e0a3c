//go:build unix

package loopback

import (
	"errors"
	"strconv"
	"syscall"
)

// Refused returns a loopback address ("127.0.0.1:port") where a connection is refused for as
// long as tb runs: a socket bound to the port and never listening, closed at tb's end. A port
// picked with net.Listen and closed at once to stand for "nothing listens there" may be the
// kernel's next pick for any listener started meanwhile (the test's own servers and stacks, or
// another package's test binary), which then answers where the test wanted a refusal. A bound
// socket keeps the port out of every other bind, the kernel's picks included; and the port is
// none Addrs handed out (whose owner may not have bound it yet), nor will be.
func Refused(tb TB) string {
	tb.Helper()
	given.Lock()
	defer given.Unlock()
	for tries := 0; tries < 1000; tries++ {
		fd, port, err := bound()
		if err != nil {
			tb.Fatalf("loopback: %v", err)
		}
		a := "127.0.0.1:" + strconv.Itoa(port)
		if given.addrs[a] {
			// Handed out and not yet bound by its owner: keep it held until the next pick
			// is made, so that pick is another port.
			defer syscall.Close(fd)
			continue
		}
		given.addrs[a] = true
		tb.Cleanup(func() { _ = syscall.Close(fd) })
		return a
	}
	tb.Fatalf("loopback: no free port not handed out before")
	return ""
}

// bound is a TCP socket bound to a port of the kernel's pick on 127.0.0.1, not listening.
func bound() (fd, port int, err error) {
	// Under ForkLock, as package syscall's own sockets: a child forked between the socket's
	// making and its close-on-exec would inherit it and hold the port after the test.
	syscall.ForkLock.RLock()
	fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return 0, 0, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return 0, 0, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return 0, 0, err
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return 0, 0, errors.New("not an IPv4 address")
	}
	return fd, in4.Port, nil
}
