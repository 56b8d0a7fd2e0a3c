package webhook

import (
	"net/netip"
	"testing"
)

// TestCheckAddrEmbeddedAndReserved: an IPv6 address that a NAT64 translator or a 6to4 relay
// delivers to an IPv4 address is judged by that address, and the IPv4 ranges no public receiver
// lives in are refused as the private ones are (found by the webhook audit: 64:ff9b::7f00:1,
// 2002:7f00:1::1, 0.0.0.0/8, 198.18.0.0/15 and 240.0.0.0/4 were taken; a later one: IPv6's
// site-local fec0::/10, the private range before fc00::/7, was taken too).
func TestCheckAddrEmbeddedAndReserved(t *testing.T) {
	var c Config
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"8.8.8.8", true},
		{"2606:4700::1111", true},
		{"64:ff9b::808:808", true},    // NAT64 to 8.8.8.8
		{"2002:808:808::1", true},     // 6to4 via 8.8.8.8
		{"64:ff9b::7f00:1", false},    // NAT64 to 127.0.0.1
		{"64:ff9b::a00:1", false},     // NAT64 to 10.0.0.1
		{"64:ff9b::a9fe:a9fe", false}, // NAT64 to the metadata address
		{"2002:7f00:1::1", false},     // 6to4 via 127.0.0.1
		{"2002:c0a8:101::1", false},   // 6to4 via 192.168.1.1
		{"64:ff9b:1::808:808", false}, // NAT64 local use: the operator's own translator
		{"::7f00:1", false},           // IPv4-compatible
		{"0.1.2.3", false},
		{"198.18.0.1", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		{"fec0::1", false},      // IPv6 site-local: deprecated, but the private range it named
		{"feff:ffff::1", false}, // the end of fec0::/10
		{"ff00::1", false},      // multicast, just above
		// Not routed on the internet, so the local network's (found by a later audit: the
		// sandbox it ran in numbered its own network 192.0.2.0/24, and a receiver on
		// 192.0.2.2 took a delivery no setting allowed).
		{"192.0.0.170", false}, // NAT64 discovery, among the IETF protocol assignments
		{"192.0.2.2", false},
		{"198.51.100.1", false},
		{"203.0.113.255", false},
		{"203.0.114.1", true}, // just past the last documentation range
		{"2001:db8::1", false},
		{"100::1", false},
		{"::ffff:192.0.2.2", false}, // mapped
	} {
		err := c.checkAddr(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.ok {
			t.Errorf("checkAddr(%s) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
	// An operator who allows a translated range allows it by its IPv6 prefix.
	c.AllowAddrs = []netip.Prefix{netip.MustParsePrefix("64:ff9b::a00:0/120")}
	if err := c.checkAddr(netip.MustParseAddr("64:ff9b::a00:1")); err != nil {
		t.Errorf("an allowed NAT64 range: %v", err)
	}
}
