package faultproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/internal/loopback"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lineServer answers each line it reads with "ok <line>" and records the lines, so a test
// can tell a request reached the server even when its reply was lost.
type lineServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  []string
	cmux sync.Mutex
	cs   []net.Conn
}

func newLineServer(t *testing.T) *lineServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lineServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.cmux.Lock()
			s.cs = append(s.cs, c)
			s.cmux.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					line = strings.TrimSpace(line)
					s.mu.Lock()
					s.got = append(s.got, line)
					s.mu.Unlock()
					if _, err := io.WriteString(c, "ok "+line+"\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.cmux.Lock()
		for _, c := range s.cs {
			_ = c.Close()
		}
		s.cmux.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *lineServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *faultproxy.Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// ask sends line and returns the reply, or the error reading it within wait.
func (c *client) ask(line string, wait time.Duration) (string, error) {
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", err
	}
	_ = c.c.SetReadDeadline(time.Now().Add(wait))
	s, err := c.r.ReadString('\n')
	return strings.TrimSpace(s), err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestPassForwardsBothWays(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	for _, q := range []string{"a", "b", "c"} {
		got, err := c.ask(q, 5*time.Second)
		if err != nil || got != "ok "+q {
			t.Fatalf("ask %q = %q, %v; want %q", q, got, err, "ok "+q)
		}
	}
	if st := p.Stats(); st.Accepted != 1 || st.RepliesDropped != 0 || st.Resets != 0 {
		t.Errorf("stats %+v, want one connection and no faults", st)
	}
}

func TestDropReplyThenClose(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	p.DropReplies(1, "", faultproxy.Close)
	c := dial(t, p)
	got, err := c.ask("write-1", 5*time.Second)
	if !errors.Is(err, io.EOF) || got != "" {
		t.Fatalf("a dropped reply read %q, %v; want nothing then EOF", got, err)
	}
	if r := s.received(); len(r) != 1 || r[0] != "write-1" {
		t.Fatalf("the server received %q, want the request (the reply is lost, not the request)", r)
	}
	// The drop is spent: a new connection passes.
	c2 := dial(t, p)
	if got, err := c2.ask("write-2", 5*time.Second); err != nil || got != "ok write-2" {
		t.Fatalf("after the drop: %q, %v", got, err)
	}
	if st := p.Stats(); st.RepliesDropped != 1 || st.Accepted != 2 {
		t.Errorf("stats %+v, want 1 reply dropped over 2 connections", st)
	}
}

func TestDropReplyThenStall(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	p.DropReplies(1, "", faultproxy.Stall)
	c := dial(t, p)
	if _, err := c.ask("write-1", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a stalled reply: %v, want the client's own timeout", err)
	}
	// Every later reply on that connection is lost too, though the server gets the requests.
	if _, err := c.ask("write-2", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a later reply on the stalled connection: %v, want a timeout", err)
	}
	if r := s.received(); strings.Join(r, ",") != "write-1,write-2" {
		t.Fatalf("the server received %q", r)
	}
}

func TestDropReplyMatches(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	p.DropReplies(2, "APPEND", faultproxy.Close)
	c := dial(t, p)
	if got, err := c.ask("GET x", 5*time.Second); err != nil || got != "ok GET x" {
		t.Fatalf("a request that does not match: %q, %v", got, err)
	}
	if _, err := c.ask("APPEND x", 5*time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("a matching request: %v, want its reply lost", err)
	}
	c = dial(t, p)
	if _, err := c.ask("APPEND y", 5*time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("the second matching request: %v, want its reply lost", err)
	}
	c = dial(t, p)
	if got, err := c.ask("APPEND z", 5*time.Second); err != nil || got != "ok APPEND z" {
		t.Fatalf("after n drops: %q, %v; want it passed", got, err)
	}
	p.DropReplies(1, "NEVER", faultproxy.Close)
	p.Disarm()
	if got, err := c.ask("NEVER", 5*time.Second); err != nil || got != "ok NEVER" {
		t.Fatalf("a disarmed drop fired: %q, %v", got, err)
	}
}

func TestDelayHoldsEachDirection(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	const d = 60 * time.Millisecond
	p.Delay(d)
	c := dial(t, p)
	start := time.Now()
	got, err := c.ask("slow", 5*time.Second)
	if err != nil || got != "ok slow" {
		t.Fatalf("delayed ask: %q, %v", got, err)
	}
	if el := time.Since(start); el < 2*d {
		t.Errorf("a round trip took %v, want at least %v (the request and the reply each held %v)", el, 2*d, d)
	}
	p.Pass()
	if st := p.Stats(); st.Held < 2 {
		t.Errorf("stats %+v, want both chunks counted as held", st)
	}
}

func TestStallHoldsUntilPass(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	if _, err := c.ask("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	if _, err := c.ask("held", 150*time.Millisecond); !isTimeout(err) {
		t.Fatalf("during a stall: %v, want a timeout", err)
	}
	if r := s.received(); len(r) != 1 {
		t.Fatalf("the server received %q during the stall, want only the first request", r)
	}
	p.Pass()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := c.r.ReadString('\n')
	if err != nil || strings.TrimSpace(got) != "ok held" {
		t.Fatalf("after Pass: %q, %v; want the held request answered", got, err)
	}
}

func TestResetAllAndRefuse(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	if _, err := c.ask("a", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadString('\n'); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after ResetAll: %v, want ECONNRESET", err)
	}
	// New connections pass after a one-shot reset.
	if got, err := dial(t, p).ask("b", 5*time.Second); err != nil || got != "ok b" {
		t.Fatalf("a new connection after ResetAll: %q, %v", got, err)
	}
	p.Refuse()
	// The reset may come while connecting or at the first read: either way, no answer.
	if nc, err := net.Dial("tcp", p.Addr()); err == nil {
		c = &client{c: nc, r: bufio.NewReader(nc)}
		if _, err := c.ask("c", 5*time.Second); err == nil || isTimeout(err) {
			t.Fatalf("a connection while refusing: %v, want it reset", err)
		}
		_ = nc.Close()
	}
	p.Pass()
	if got, err := dial(t, p).ask("d", 5*time.Second); err != nil || got != "ok d" {
		t.Fatalf("after Pass: %q, %v", got, err)
	}
	if st := p.Stats(); st.Resets < 2 {
		t.Errorf("stats %+v, want at least two resets", st)
	}
}

func TestTargetDown(t *testing.T) {
	p := newProxy(t, loopback.Refused(t))
	if _, err := dial(t, p).ask("x", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("with the target down: %v, want the connection ended", err)
	}
}

func TestCloseEndsOpenConnections(t *testing.T) {
	s := newLineServer(t)
	p, err := faultproxy.New(s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	p.Stall()
	if _, err := io.WriteString(c.c, "held\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("after Close: %v, want the connection ended", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestHandler(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	api := httptest.NewServer(p.Handler())
	defer api.Close()
	post := func(path string) int {
		t.Helper()
		res, err := http.Post(api.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	for _, bad := range []string{"/delay?d=soon", "/drop?n=0", "/drop?then=later"} {
		if got := post(bad); got != http.StatusBadRequest {
			t.Errorf("POST %s = %d, want 400", bad, got)
		}
	}
	if got := post("/drop?n=1&match=lose&then=close"); got != http.StatusNoContent {
		t.Fatalf("POST /drop = %d", got)
	}
	c := dial(t, p)
	if got, err := c.ask("keep", 5*time.Second); err != nil || got != "ok keep" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := c.ask("lose", 5*time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("the drop armed over HTTP: %v, want the reply lost", err)
	}
	if got := post("/delay?d=1ms"); got != http.StatusNoContent {
		t.Fatalf("POST /delay = %d", got)
	}
	for _, path := range []string{"/pass", "/stall", "/pass", "/reset", "/refuse", "/pass", "/disarm"} {
		if got := post(path); got != http.StatusNoContent {
			t.Errorf("POST %s = %d, want 204", path, got)
		}
	}
	res, err := http.Get(api.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st faultproxy.Stats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.RepliesDropped != 1 || st.Accepted != 1 {
		t.Errorf("GET /stats = %+v, want 1 connection and 1 reply dropped", st)
	}
	api.CloseClientConnections()
}

// WaitStats returns once the awaited count is reached, woken by the count itself, and returns
// the context's error when it never is.
func TestWaitStats(t *testing.T) {
	s := newLineServer(t)
	p := newProxy(t, s.ln.Addr().String())
	got := make(chan error, 1)
	go func() {
		got <- p.WaitStats(t.Context(), func(st faultproxy.Stats) bool { return st.Accepted >= 2 })
	}()
	for range 2 {
		c := dial(t, p)
		if _, err := c.ask("hello", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("WaitStats: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitStats did not return after two connections")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.WaitStats(ctx, func(st faultproxy.Stats) bool { return st.Accepted >= 100 }); err != context.Canceled {
		t.Errorf("WaitStats on a cancelled context = %v, want context.Canceled", err)
	}
}
