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
		// IANA's special-purpose registries, not globally reachable (found by an operations
		// probe: IPv6's benchmarking range was taken while IPv4's was refused).
		{"2001:2::1", false},            // benchmarking
		{"2001:2:0:ffff::1", false},     // the end of 2001:2::/48
		{"2001:0:4136:e378::1", false},  // Teredo, which leads to an IPv4 address through a relay
		{"2001:10::1", false},           // ORCHID, deprecated
		{"2001:1::1", true},             // PCP anycast: globally reachable
		{"2001:3::1", true},             // AMT: globally reachable
		{"2001:4860:4860::8888", true},  // just past 2001::/23
		{"3fff::1", false},              // documentation (RFC 9637)
		{"3fff:fff:ffff::1", false},     // the end of 3fff::/20
		{"3fff:1000::1", true},          // just past it
		{"5f00::1", false},              // SRv6 segment ids, outside 2000::/3
		{"100:0:0:1::1", false},         // the dummy prefix (RFC 9780)
		{"::ffff:0:7f00:1", false},      // SIIT's IPv4-translated form of 127.0.0.1
		{"4000::1", false},              // reserved by the IETF
		{"192.88.99.1", false},          // the deprecated 6to4 relay anycast
		{"168.63.129.16", false},        // Azure's platform address, a metadata one
		{"::ffff:168.63.129.16", false}, // mapped
		{"64:ff9b::a83f:8110", false},   // NAT64 to it
		{"168.63.129.17", true},         // beside it
		{"fd20:ce::254", false},         // GCP's IPv6 metadata address
		{"192.0.0.192", false},          // Oracle Cloud's legacy metadata address
		{"100.64.0.1", false},           // CGNAT
		{"64:ff9b::6440:1", false},      // NAT64 to CGNAT
		{"2002:a9fe:a9fe::1", false},    // 6to4 via the metadata address
		{"::ffff:10.0.0.1", false},      // mapped private
	} {
		err := c.checkAddr(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.ok {
			t.Errorf("checkAddr(%s) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
	// A metadata address is allowed only when named exactly: not by a range that holds it.
	for _, m := range []string{"168.63.129.16", "192.0.0.192", "fd20:ce::254"} {
		a := netip.MustParseAddr(m)
		wide := Config{AllowAddrs: []netip.Prefix{netip.PrefixFrom(a, a.BitLen()-8).Masked()}}
		if err := wide.checkAddr(a); err == nil {
			t.Errorf("%s allowed by the range %s", a, wide.AllowAddrs[0])
		}
		exact := Config{AllowAddrs: []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}}
		if err := exact.checkAddr(a); err != nil {
			t.Errorf("%s named exactly: %v", a, err)
		}
	}
	// A reserved IPv6 range is allowed as the private ones are, by a range that holds it.
	lab := Config{AllowAddrs: []netip.Prefix{netip.MustParsePrefix("2001:2::/48")}}
	if err := lab.checkAddr(netip.MustParseAddr("2001:2::1")); err != nil {
		t.Errorf("an allowed benchmarking range: %v", err)
	}
	// An operator who allows a translated range allows it by its IPv6 prefix.
	c.AllowAddrs = []netip.Prefix{netip.MustParsePrefix("64:ff9b::a00:0/120")}
	if err := c.checkAddr(netip.MustParseAddr("64:ff9b::a00:1")); err != nil {
		t.Errorf("an allowed NAT64 range: %v", err)
	}
}
