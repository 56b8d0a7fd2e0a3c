package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrsDistinct: the picks of one call are held until all are made, so none is another's.
// Closed at once after its pick, a port may be the next pick's (the cluster's gateways, given
// one port in two server blocks by nginx's leave, ran the limits checks against the overflow
// group's replicas: TestClusterPhase2, 2026-12-06). 500 picks would hold several such pairs.
func TestAddrsDistinct(t *testing.T) {
	const n = 500
	addrs, err := Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != n {
		t.Fatalf("%d addresses, want %d", len(addrs), n)
	}
	seen := map[string]int{}
	for i, a := range addrs {
		if j, ok := seen[a]; ok {
			t.Fatalf("picks %d and %d are both %s", j+1, i+1, a)
		}
		seen[a] = i
	}
}

// TestAddrNeverRepeats: a cluster's pieces are started one after another, each on a pick
// closed before the piece binds it, so a pick repeated meanwhile gave two pieces one port (CI,
// 2026-12-07: the llm-stub on the demo source's, "bind: address already in use"). 500 picks
// each closed at once hold a repeat nearly always without the record of what was handed out.
func TestAddrNeverRepeats(t *testing.T) {
	seen := map[string]int{}
	for i := range 500 {
		var a string
		var err error
		if i%2 == 0 {
			a, err = Addr()
		} else {
			var p int
			p, err = Port()
			a = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		}
		if err != nil {
			t.Fatal(err)
		}
		if j, ok := seen[a]; ok {
			t.Fatalf("picks %d and %d are both %s", j+1, i+1, a)
		}
		seen[a] = i
	}
	more, err := Addrs(50)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range more {
		if j, ok := seen[a]; ok {
			t.Fatalf("Addrs handed out %s again (pick %d)", a, j+1)
		}
	}
}

// TestRefused: a connection to Refused's address is refused, and no listener gets its port.
func TestRefused(t *testing.T) {
	a := Refused(t)
	if c, err := net.Dial("tcp", a); err == nil {
		c.Close()
		t.Fatalf("dial %s: connected, want refused", a)
	}
	if ln, err := net.Listen("tcp", a); err == nil {
		ln.Close()
		t.Fatalf("listen %s: bound, want the port held", a)
	}
}

// TestRefusedNotHandedOut: Refused's port is none Addr handed out (its owner may not have bound
// it yet), and Addr never hands Refused's out later. 300 of each would meet several times on
// the kernel's picks alone.
func TestRefusedNotHandedOut(t *testing.T) {
	picked := map[string]bool{}
	for range 300 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		picked[a] = true
	}
	refused := map[string]bool{}
	for range 300 {
		a := Refused(t)
		if picked[a] {
			t.Fatalf("Refused gave %s, which Addr handed out", a)
		}
		refused[a] = true
	}
	more, err := Addrs(300)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range more {
		if refused[a] {
			t.Fatalf("Addrs handed out %s, which Refused holds", a)
		}
	}
}
