package webhook

import (
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
)

// TestPlainHTTPOnlyToLoopbackAtConnect: a plain http delivery connects only to a loopback
// address, whatever its name resolved to and whatever ranges the operator allows. CheckURL
// admits http by the host's name ("localhost", a name under .localhost), and Go's resolver
// asks DNS for a name under .localhost: found by the webhook audit, a plain http POST went to
// this machine's non-loopback address, signed but readable on the network.
func TestPlainHTTPOnlyToLoopbackAtConnect(t *testing.T) {
	addr, ok := nonLoopbackAddr(t)
	if !ok {
		t.Skip("this machine has no non-loopback address to listen on")
	}
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	var got atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })

	// The operator allows the address itself: only the plain-http rule stands in the way.
	cfg := Config{Secrets: []string{testSecret}, AllowAddrs: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())}}.withDefaults()
	s, err := newSender(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := s.send(t.Context(), "http://"+l.Addr().String()+"/hook", "msg_1", []byte(vecBody))
	if r.Err != "refused_address" || got.Load() != 0 {
		t.Fatalf("plain http to %s: %+v, the receiver got %d requests; want refused_address and none", l.Addr(), r, got.Load())
	}
	if classify(r) != outRejected {
		t.Errorf("classified %q, want rejected (the policy, not a passing fault)", classify(r))
	}
}

// nonLoopbackAddr is one of this machine's unicast addresses that is not loopback.
func nonLoopbackAddr(t *testing.T) (netip.Addr, bool) {
	t.Helper()
	as, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if ip = ip.Unmap(); ok && ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}
