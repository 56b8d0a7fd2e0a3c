package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/das-ask/ask/internal/httpurl"
)

// ErrNotAllowed is what CheckURL returns for a webhook the operator's settings do not admit; its
// message says why, for the caller's 400.
var ErrNotAllowed = errors.New("webhook not allowed")

// URLError is a webhook URL refused at createAsk. It matches ErrNotAllowed.
type URLError struct{ Reason string }

func (e *URLError) Error() string        { return "webhook url: " + e.Reason }
func (e *URLError) Is(target error) bool { return target == ErrNotAllowed }

func refuse(format string, args ...any) error { return &URLError{Reason: fmt.Sprintf(format, args...)} }

// maxURLChars is the contract's maxLength of a webhook URL (WebhookRequest.url), counted as the
// contract counts a length: in characters (code points), not bytes.
const maxURLChars = 2048

// CheckURL reports whether raw may be an ask's webhook: an absolute https URL (http only to a
// loopback host) without user info or fragment, starting with one of the allowed prefixes, and
// whose host is not a literal address the policy refuses. Names are resolved and checked again
// at every connect.
func (c Config) CheckURL(raw string) error {
	if !c.Enabled() {
		return refuse("this service accepts no webhooks (the operator allows none: DAS_ASK_WEBHOOK_ALLOW is unset)")
	}
	if utf8.RuneCountInString(raw) > maxURLChars {
		return refuse("longer than 2048 characters")
	}
	if strings.ContainsFunc(raw, notInURL) {
		return refuse("a space, a control character or one of \"<>\\^`{|} is not allowed in a webhook URL (percent-encode it)")
	}
	if _, err := url.PathUnescape(raw); err != nil {
		// url.Parse checks the path's and the host's escapes, not the query's, which the
		// request would carry as written.
		return refuse("a %% not followed by two hexadecimal digits is not allowed in a webhook URL")
	}
	u, err := httpurl.Parse(raw)
	switch {
	case errors.Is(err, httpurl.ErrPort):
		return refuse("its port is not a number") // https://h:443.evil/
	case errors.Is(err, httpurl.ErrScheme):
		return refuse("want https")
	case err != nil:
		return refuse("not an absolute URL")
	}
	if u.User != nil {
		return refuse("user info is not allowed in a webhook URL")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return refuse("a fragment is not allowed in a webhook URL")
	}
	if err := checkScheme(u); err != nil {
		return refuse("%v", err)
	}
	if dotSegments(u.Path) || dotSegments(unescapedAgain(u.Path)) {
		return refuse("a dot segment (. or ..) is not allowed in a webhook URL's path, nor one encoded twice")
	}
	if strings.ContainsFunc(u.Path, unicode.IsControl) {
		// %00 and its kind: a receiver written in C, or a proxy, may end the path there.
		return refuse("an encoded control character (such as %%00) is not allowed in a webhook URL's path")
	}
	if !c.allowed(u) {
		return refuse("not under any prefix the operator allows (DAS_ASK_WEBHOOK_ALLOW)")
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := c.checkAddr(a); err != nil {
			return refuse("%v", err)
		}
	}
	return nil
}

// notInURL reports whether r may not stand unencoded in a URL (RFC 3986 2: its characters, and
// beyond ASCII an IRI's letters, never a space or a control). url.Parse takes a space or a
// quote in a path and the request then goes to its encoding (…/slack%20 for a pasted
// "…/slack "), so the URL delivered to would not be the URL named.
func notInURL(r rune) bool {
	return r <= ' ' || r == 0x7f || strings.ContainsRune("\"<>\\^`{|}", r) || unicode.IsSpace(r) || unicode.IsControl(r)
}

// allowed reports whether u starts with an allowed prefix, comparing scheme and host without
// case and the rest as written; a prefix's host must match whole (https://a.example does not
// admit https://a.example.evil), its port with the scheme's default made explicit
// (https://a.example is https://a.example:443).
func (c Config) allowed(u *url.URL) bool {
	_, ok := c.prefixOf(u)
	return ok
}

// prefixOf is the longest prefix of Allow that u is under, as Allow writes it.
func (c Config) prefixOf(u *url.URL) (string, bool) {
	best, found := "", false
	longest := -1
	for _, p := range c.Allow {
		pu, err := url.Parse(p)
		if err != nil {
			continue
		}
		if !sameOrigin(pu, u) {
			continue
		}
		if path := pu.EscapedPath(); strings.HasPrefix(u.EscapedPath(), path) && len(path) > longest {
			best, found, longest = p, true, len(path)
		}
	}
	return best, found
}

// sameOrigin reports whether a and b name one scheme and one address (hostPort).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && hostPort(a) == hostPort(b)
}

// hostPort is u's host, lowercase, and port, the scheme's default when u names none: the
// address a request to u connects to, so that https://h/ and https://h:443/ are one destination.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// dotSegments reports whether the decoded path p holds a "." or ".." segment. The prefix
// comparison is on the path as written, but the receiver, or a proxy in front of it, resolves
// dot segments (RFC 3986 5.2.4), so https://h/ask/../admin would reach /admin under an allowed
// https://h/ask/. Decoded, so %2e%2e counts; a backslash separates too (some servers treat it as
// a slash), and a segment's ";parameters" are ignored ("..;" is ".." to some servers).
func dotSegments(p string) bool {
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// unescapedAgain is p, already decoded once, decoded a second time, as a receiver behind a
// proxy that decodes (or one that decodes twice) sees it: /ask/%252e%252e/admin is /ask/../admin
// to it. A p that does not decode again is returned as it is.
func unescapedAgain(p string) string {
	if q, err := url.PathUnescape(p); err == nil {
		return q
	}
	return p
}

// metadata are cloud metadata addresses: never reachable unless named exactly in AllowAddrs.
// The common one (AWS, GCP, Azure's IMDS, …), AWS ECS's task metadata, Alibaba's, Azure's
// platform address (168.63.129.16, the WireServer: a public address, which no range refuses),
// Oracle Cloud's legacy one, AWS's and GCP's IPv6 ones.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("169.254.170.2"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("168.63.129.16"),
	netip.MustParseAddr("192.0.0.192"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("fd20:ce::254"),
}

// checkAddr refuses private, loopback, link-local, unspecified, multicast and metadata
// addresses unless the operator allows their range.
func (c Config) checkAddr(a netip.Addr) error {
	a = a.Unmap()
	if v4, ok := embeddedIPv4(a); ok {
		// A translator delivers it to v4: judged by where it leads, unless the operator
		// allows the IPv6 range itself.
		for _, p := range c.AllowAddrs {
			if p.Contains(a) {
				return nil
			}
		}
		if err := c.checkAddr(v4); err != nil {
			return fmt.Errorf("address %s leads to %s: %w", a, v4, err)
		}
		return nil
	}
	for _, m := range metadata {
		if a == m {
			for _, p := range c.AllowAddrs {
				if p.Bits() == a.BitLen() && p.Addr() == a {
					return nil
				}
			}
			return fmt.Errorf("address %s is a metadata address", a)
		}
	}
	special := a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() || cgnat.Contains(a) ||
		(a.Is6() && !globalUnicast6.Contains(a)) || (ietfProtocol6.Contains(a) && !containsAny(globalIETF6, a)) ||
		containsAny(reserved, a)
	if !special || containsAny(c.AllowAddrs, a) {
		return nil
	}
	return fmt.Errorf("address %s is private, loopback or link-local", a)
}

// cgnat is the carrier-grade NAT range (RFC 6598), private in all but name.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// reserved are ranges no public receiver lives in, refused as the private ones are (IANA's
// special-purpose address registries, those not globally reachable): IPv4's "this network"
// (0.0.0.0/8: Linux connects 0.0.0.0 to the local host), benchmarking (198.18.0.0/15 and
// IPv6's 2001:2::/48, used for lab networks), the reserved class E with the broadcast
// (240.0.0.0/4) and the deprecated 6to4 relay anycast (192.88.99.0/24, RFC 7526); the IETF
// protocol assignments (192.0.0.0/24: DS-Lite, NAT64 discovery) and the documentation ranges
// (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20), which are not
// routed on the internet, so an address there is one of the local network's (a sandbox this
// service was audited in numbers its own network 192.0.2.0/24). IPv6 outside 2000::/3 is
// refused whole (globalUnicast6), and the IETF's 2001::/23 but for its globally reachable
// assignments (ietfProtocol6); the IPv6 ranges below lie there too, listed for the reader:
// discard-only 100::/64; NAT64's local-use prefix (64:ff9b:1::/48, RFC 8215), whose translator
// is the operator's own; IPv4-compatible IPv6 (::/96, deprecated; ::1 and :: aside, it maps to
// IPv4); IPv6 site-local (fec0::/10, RFC 3879 deprecated it, but a network that still routes
// it uses it as fc00::/7 is used, which IsPrivate alone covers).
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:2::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("3fff::/20"),
	netip.MustParsePrefix("fec0::/10"),
}

// globalUnicast6 is IPv6's global unicast space (2000::/3, IANA's IPv6 address space
// registry). The rest is the IETF's reserve (::ffff:0:0:0/96, SIIT's translated addresses;
// 100:0:0:1::/64, the dummy prefix of RFC 9780; 5f00::/16, SRv6 segment ids, RFC 9602; …) or
// has a meaning of its own (loopback, unique local, link-local, multicast): none is a public
// receiver's. The IPv6 addresses that lead to IPv4 (mapped, NAT64's 64:ff9b::/96) are judged
// by their IPv4 address before this.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// ietfProtocol6 is IPv6's IETF protocol assignments (2001::/23, RFC 2928), not globally
// reachable but for the assignments in globalIETF6 (IANA's special-purpose registry): Teredo
// (2001::/32, RFC 4380, whose relay delivers to an IPv4 address carried in the address) and
// benchmarking among those refused.
var ietfProtocol6 = netip.MustParsePrefix("2001::/23")

// globalIETF6 are the globally reachable assignments in 2001::/23: the PCP, TURN and DNS-SD
// SRP anycast addresses, AMT, AS112, ORCHIDv2 and Drone Remote ID.
var globalIETF6 = []netip.Prefix{
	netip.MustParsePrefix("2001:1::1/128"),
	netip.MustParsePrefix("2001:1::2/128"),
	netip.MustParsePrefix("2001:1::3/128"),
	netip.MustParsePrefix("2001:3::/32"),
	netip.MustParsePrefix("2001:4:112::/48"),
	netip.MustParsePrefix("2001:20::/28"),
	netip.MustParsePrefix("2001:30::/28"),
}

// containsAny reports whether one of ps holds a.
func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// The IPv6 prefixes whose addresses carry an IPv4 address a translator or relay delivers to:
// NAT64's well-known prefix (64:ff9b::/96, RFC 6052: the last 32 bits) and 6to4 (2002::/16,
// RFC 3056: the 32 bits after the prefix).
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixto4 = netip.MustParsePrefix("2002::/16")
)

// embeddedIPv4 is the IPv4 address a NAT64 or 6to4 address leads to.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case !a.Is6():
		return netip.Addr{}, false
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixto4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// control is the dialer's Control hook: it runs on the address actually being connected to,
// after resolution, so a name that resolves differently at connect time is still checked.
func (c Config) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", errRefusedAddr, err)
	}
	if err := c.checkAddr(ap.Addr()); err != nil {
		return fmt.Errorf("%w: %v", errRefusedAddr, err)
	}
	return nil
}

// controlPlain is the Control hook of plain http connections: only to a loopback address,
// whatever the name resolved to. CheckURL admits http only to a loopback host, but by its
// name: "localhost" comes from the hosts file, and a name under .localhost is asked of DNS
// (Go's resolver does not keep it to loopback), which may answer any address; the body, signed
// but not encrypted, must not cross a network.
func (c Config) controlPlain(network, address string, raw syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", errRefusedAddr, err)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("%w: plain http to %s, which is not a loopback address", errRefusedAddr, ap.Addr())
	}
	return c.control(network, address, raw)
}

// errRefusedAddr marks a connection the policy refused.
var errRefusedAddr = errors.New("refused address")
