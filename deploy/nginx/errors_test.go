package nginx_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
)

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// startNginx runs nginx on the checked-in config, rendered with upstream as its one server,
// and returns the gateway's base URL.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	dir := t.TempDir()
	listen := freeAddr(t)
	conf, err := nginx.Render(nginx.Conf, "e", []string{upstream}, listen, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	inc := filepath.Join(dir, "ask.conf")
	main := filepath.Join(dir, "nginx.conf")
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
	t.Cleanup(func() {
		// SIGTERM: the master stops its workers, then itself (a SIGKILLed master leaves its
		// workers running, listening, for good).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
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
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-tick.C:
		case <-giveUp:
			t.Fatalf("nginx did not listen on %s: %v", listen, err)
		}
	}
	return "http://" + listen
}

// checkProblem checks that resp is the gateway's own problem+json with status, Retry-After and
// a detail.
func checkProblem(t *testing.T, what string, resp *http.Response, status int) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(body, &p) != nil || p.Status != status || p.Detail == "" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: %d %s %q (Retry-After %q), want %d problem+json with its status, a detail and Retry-After",
			what, resp.StatusCode, resp.Header.Get("Content-Type"), body, resp.Header.Get("Retry-After"), status)
	}
}

// TestGatewayErrorsAreProblems: what nginx answers itself — no replica reachable, none
// answering in time — is problem+json with Retry-After, like the service's refusals, for a
// GET, a POST with or without an Idempotency-Key and the event stream alike.
func TestGatewayErrorsAreProblems(t *testing.T) {
	down := startNginx(t, freeAddr(t)+" max_fails=0")
	requests := func(base string) map[string]*http.Request {
		get, _ := http.NewRequest(http.MethodGet, base+"/ask/v1/asks/tkt_x", nil)
		stream, _ := http.NewRequest(http.MethodGet, base+"/ask/v1/asks/tkt_x/events", nil)
		post, _ := http.NewRequest(http.MethodPost, base+"/ask/v1/conversations", strings.NewReader("{}"))
		keyed, _ := http.NewRequest(http.MethodPost, base+"/ask/v1/conversations", strings.NewReader("{}"))
		keyed.Header.Set("Idempotency-Key", `"k1"`)
		return map[string]*http.Request{"GET": get, "the stream": stream, "a POST": post, "a keyed POST": keyed}
	}
	for what, req := range requests(down) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		checkProblem(t, "no replica, "+what, resp, http.StatusBadGateway)
	}

	// A replica that takes the connection and never answers: nginx's read timeout (5 s for
	// every call but the stream and long polls).
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held <- c // kept open, unanswered, until the test ends
		}
	}()
	t.Cleanup(func() {
		_ = silent.Close()
		<-accepted
		close(held)
		for c := range held {
			_ = c.Close()
		}
	})
	frozen := startNginx(t, silent.Addr().String())
	resp, err := http.DefaultClient.Do(requests(frozen)["a POST"])
	if err != nil {
		t.Fatal(err)
	}
	checkProblem(t, "a frozen replica, a POST", resp, http.StatusGatewayTimeout)
}
