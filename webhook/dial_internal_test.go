package webhook

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/das-ask/ask/internal/loopback"
)

// TestAllowedAddressUnreachableIsRetried: a name that resolves both to an address the policy
// refuses and to one it allows, whose receiver is down for the moment, is a connection failure
// (retried), not a refusal (final). Go's dialer tries the addresses in turn and reports the
// first one's error, so when the refused address came first in the answer the attempt said
// refused_address and the delivery failed for good, never retried, although its destination
// is allowed and was only unreachable (found by the webhook probe).
func TestAllowedAddressUnreachableIsRetried(t *testing.T) {
	allowed, refused := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	cfg := Config{AllowAddrs: []netip.Prefix{netip.PrefixFrom(allowed, 32)}}
	port := closedPort(t)
	for _, tc := range []struct {
		name    string
		answers []netip.Addr
		want    string
	}{
		{"refused first, allowed down", []netip.Addr{refused, allowed}, "connect"},
		{"allowed down, refused last", []netip.Addr{allowed, refused}, "connect"},
		{"every address refused", []netip.Addr{refused}, "refused_address"},
	} {
		d := &net.Dialer{Timeout: 5 * time.Second, Resolver: fakeResolver(t, tc.answers...)}
		for _, control := range []struct {
			name string
			dial func(context.Context, string, string) (net.Conn, error)
		}{{"https", cfg.dialer(d, cfg.control)}, {"plain", cfg.dialer(d, cfg.controlPlain)}} {
			c, err := control.dial(t.Context(), "tcp", net.JoinHostPort("hook.test", strconv.Itoa(port)))
			if err == nil {
				c.Close()
				t.Fatalf("%s, %s: connected to a closed port", tc.name, control.name)
			}
			if got := errKind(err); got != tc.want {
				t.Errorf("%s, %s: %v: kind %q, want %q", tc.name, control.name, err, got, tc.want)
			}
			if got, want := classify(Result{Err: errKind(err)}), map[string]string{"connect": outRetry, "refused_address": outRejected}[tc.want]; got != want {
				t.Errorf("%s, %s: classified %q, want %q", tc.name, control.name, got, want)
			}
		}
	}
}

// TestRefusedAddressBesideAnAllowedOneUnused: the fix keeps the refusal itself: with a
// receiver listening on the allowed address, the connection goes there, never to the refused
// one.
func TestRefusedAddressBesideAnAllowedOneUnused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{})
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
		close(accepted)
	}()
	cfg := Config{AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	d := &net.Dialer{Timeout: 5 * time.Second, Resolver: fakeResolver(t, netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1"))}
	c, err := cfg.dialer(d, cfg.control)(t.Context(), "tcp", net.JoinHostPort("hook.test", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if got := netip.MustParseAddrPort(c.RemoteAddr().String()).Addr(); got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("connected to %s, want the allowed 127.0.0.1", got)
	}
	c.Close()
	<-accepted
}

// closedPort is a port on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(loopback.Refused(t))
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// fakeResolver answers every A question with answers, in that order, and every other question
// with none: a DNS server on a loopback UDP port, so the dialer resolves as it does in
// production, through Go's own resolver.
func fakeResolver(t *testing.T, answers ...netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); serveDNS(pc, answers) }()
	t.Cleanup(func() { pc.Close(); <-done })
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// serveDNS answers the queries on pc until it is closed.
func serveDNS(pc net.PacketConn, answers []netip.Addr) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true})
		if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
			continue
		}
		if q.Type == dnsmessage.TypeA {
			for _, a := range answers {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
			}
		}
		if msg, err := b.Finish(); err == nil {
			_, _ = pc.WriteTo(msg, from)
		}
	}
}
