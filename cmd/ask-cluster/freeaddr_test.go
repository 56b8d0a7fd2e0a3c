package main

import "testing"

// TestFreeAddrsDistinct: the gateways' addresses are picked together and none twice. A port
// closed at once after its pick may be the next pick's (1 in a few thousand pairs here), and
// nginx given one port in two server blocks only warns (conflicting server name) and serves
// both with the first, so that the limits checks ran against the overflow group's replicas
// (TestClusterPhase2, 2026-12-06: 5 failed). 500 picks would hold several such pairs.
func TestFreeAddrsDistinct(t *testing.T) {
	const n = 500
	addrs, err := freeAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, a := range addrs {
		if j, ok := seen[a]; ok {
			t.Fatalf("picks %d and %d are both %s", j+1, i+1, a)
		}
		seen[a] = i
	}
	if len(addrs) != n {
		t.Fatalf("%d addresses, want %d", len(addrs), n)
	}
}
