package server_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
)

// TestContractThroughGateway sends TestContract's requests through the reference gateway
// (deploy/nginx/ask.conf) and holds every response to the document in the same way, but for
// the one exception the document gives a gateway: a header block too large for it, which nginx
// answers with its own 400 HTML page. Requests with a declared length their body does not
// have are left out (nginx waits for the rest), and so are paths outside the mount point,
// which are the gateway's, not the service's.
func TestContractThroughGateway(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	c := newConformer(t)
	c.gateway = startGateway(t, bin, c.ts.Listener.Addr().String())
	var ps []probe
	for _, p := range c.probes() {
		if slices.Contains(p.hdr, "Content-Length") || !strings.HasPrefix(p.target, "/ask/") {
			continue
		}
		ps = append(ps, p)
	}
	c.run(ps)
}

// startGateway runs nginx on the checked-in config with upstream as its one server, and
// returns its address.
func startGateway(t *testing.T, bin, upstream string) string {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	_ = l.Close()
	conf, err := nginx.Render(nginx.Conf, "e", []string{upstream}, listen, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	inc, main := filepath.Join(dir, "ask.conf"), filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(inc, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(nginx.Main(dir, 64, inc)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", main, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // the master stops its workers, then itself
		<-exited
	})
	// nginx says nothing when it listens: ask its listener until it answers.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			_ = conn.Close()
			return listen
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v: %s", err, b)
		case <-tick.C:
		}
	}
}
