// Package nginxtest runs the reference gateway (deploy/nginx's checked-in config) in a test, on
// a real nginx.
package nginxtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
)

// Start runs nginx on the checked-in config, rendered with upstream as its one server (an
// address, with nginx server parameters after it if wanted), on a free loopback address, and
// returns that address once nginx answers on it. It skips the test when nginx is not
// installed, and stops nginx (its master, which stops its workers) when the test ends.
func Start(tb testing.TB, upstream string) string {
	tb.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		tb.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	dir := tb.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	listen := l.Addr().String()
	_ = l.Close()
	conf, err := nginx.Render(nginx.Conf, "e", []string{upstream}, listen, 2*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	inc, main := filepath.Join(dir, "ask.conf"), filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(inc, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(nginx.Main(dir, 64, inc)), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", main, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		// SIGTERM: the master stops its workers, then itself (a SIGKILLed master leaves its
		// workers running, listening, for good).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// nginx says nothing when it listens: ask its listener until it answers.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			_ = conn.Close()
			return listen
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			tb.Fatalf("nginx exited: %v: %s", err, b)
		case <-giveUp:
			tb.Fatalf("nginx did not listen on %s: %v", listen, err)
		case <-tick.C:
		}
	}
}
