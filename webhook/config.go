package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/das-ask/ask/internal/egress"
	"github.com/das-ask/ask/internal/httpurl"
)

// Defaults for Config's zero values.
const (
	DefaultMaxAttempts  = 12
	DefaultTimeout      = 15 * time.Second // Standard Webhooks recommends 15–30 s
	DefaultBaseBackoff  = 1 * time.Second
	DefaultMaxBackoff   = 5 * time.Minute
	DefaultPoll         = 1 * time.Second
	DefaultMaxBodyBytes = 256 << 10
	// maxResponseBytes is how much of a receiver's answer is read (and discarded);
	// maxResponseHeaderBytes bounds its headers.
	maxResponseBytes       = 4 << 10
	maxResponseHeaderBytes = egress.MaxResponseHeaderBytes
	// maxAttemptsEdge bounds MaxAttempts: beyond it a value is a typo.
	maxAttemptsEdge = 50
)

// Config is the operator's webhook settings. With no Allow prefix, webhooks are off: every ask
// that names one is refused with a 400. Zero values mean the defaults above.
type Config struct {
	// Allow holds URL prefixes a webhook must start with (DAS_ASK_WEBHOOK_ALLOW, comma-separated),
	// such as "https://hooks.example.com/ask/". Each is an absolute https URL, or http to a
	// loopback host.
	Allow []string
	// Secrets sign every delivery (DAS_ASK_WEBHOOK_SECRETS, comma-separated "whsec_<base64>")
	// but those to a prefix of EndpointSecrets. Every one signs, so during a rotation receivers
	// holding either the old or the new secret verify; remove the old one once receivers have
	// moved. Required when Allow is set, unless every prefix has its own.
	Secrets []string
	// EndpointSecrets sign the deliveries to one prefix of Allow instead of Secrets, keyed by
	// the prefix as Allow writes it (DAS_ASK_WEBHOOK_ENDPOINT_SECRETS: comma-separated entries,
	// each the prefix then its secrets, space-separated). Standard Webhooks asks for a secret per
	// endpoint: a receiver holding the secret of every delivery could sign one that any other
	// receiver would accept. A delivery's prefix is the longest of Allow it is under.
	EndpointSecrets map[string][]string
	// AllowAddrs are address ranges a destination may resolve to although they are private,
	// loopback or link-local (DAS_ASK_WEBHOOK_ALLOW_ADDRS, comma-separated CIDRs), such as
	// 127.0.0.0/8 for the dev stack. Metadata addresses (169.254.169.254, fd00:ec2::254) are
	// only reachable if named here exactly.
	AllowAddrs []netip.Prefix
	// MaxAttempts bounds the POSTs of one delivery (DAS_ASK_WEBHOOK_MAX_ATTEMPTS). The default's
	// waits add up to 9–19 minutes, so a delivery is retried about as long as its ticket lives
	// with the default TTL (15 minutes), after which no attempt is made.
	MaxAttempts int
	// Timeout bounds one attempt, connect to response headers (DAS_ASK_WEBHOOK_TIMEOUT_S).
	Timeout time.Duration
	// BaseBackoff is the first retry's upper bound; each retry doubles it up to MaxBackoff,
	// which also caps a receiver's Retry-After.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// Poll is how often a deliverer looks for due deliveries another replica left.
	Poll time.Duration
	// MaxBodyBytes bounds a delivery's body; a larger one is sent without the answer's rows
	// (result, then its divergence's), which stay readable on GET /v1/asks/{ticket}.
	MaxBodyBytes int
}

// Enabled reports whether asks may name a webhook.
func (c Config) Enabled() bool { return len(c.Allow) > 0 }

// withDefaults fills zero values.
func (c Config) withDefaults() Config {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = DefaultBaseBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.BaseBackoff {
		c.MaxBackoff = c.BaseBackoff
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return c
}

// Validate reports every invalid setting at once. No message holds a secret.
func (c Config) Validate() error {
	var errs []error
	for _, p := range c.Allow {
		if err := checkPrefix(p); err != nil {
			errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_ALLOW: %s: %w", shownPrefix(p), err))
		}
	}
	if len(c.Secrets) == 0 && slices.ContainsFunc(c.Allow, func(p string) bool { return len(c.EndpointSecrets[p]) == 0 }) {
		errs = append(errs, errors.New("DAS_ASK_WEBHOOK_SECRETS: required when DAS_ASK_WEBHOOK_ALLOW is set (whsec_<base64>, comma-separated), unless DAS_ASK_WEBHOOK_ENDPOINT_SECRETS gives every prefix its own"))
	}
	for i, s := range c.Secrets {
		if _, err := newSigner(s); err != nil {
			errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_SECRETS: secret %d: %w", i+1, err))
		}
	}
	for n, p := range slices.Sorted(maps.Keys(c.EndpointSecrets)) {
		// An entry is named by its prefix only when that is one of Allow's, as written there:
		// anything else may be a secret run into the prefix ("https://h/whsec_…" is a URL).
		shown := fmt.Sprintf("entry %d (in the order of their prefixes)", n+1)
		allowed := slices.Contains(c.Allow, p)
		if allowed {
			shown = shownPrefix(p)
		}
		switch {
		case !allowed && c.Enabled():
			errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS: %s: its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes, as written there", shown))
			continue
		case allowed:
			if q := c.sameDestination(p); q != "" {
				errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS: %s: DAS_ASK_WEBHOOK_ALLOW also names it as %s, whose deliveries it would not sign: allow it once", shown, shownPrefix(q)))
			}
		}
		if len(c.EndpointSecrets[p]) == 0 {
			errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS: %s: no secret follows the prefix", shown))
		}
		for i, s := range c.EndpointSecrets[p] {
			if _, err := newSigner(s); err != nil {
				errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS: %s: secret %d: %w", shown, i+1, err))
			}
		}
	}
	if c.MaxAttempts > maxAttemptsEdge {
		errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_MAX_ATTEMPTS=%d: want at most %d", c.MaxAttempts, maxAttemptsEdge))
	}
	return errors.Join(errs...)
}

// sameDestination is another entry of Allow that names the same prefix as p in another spelling
// (the host's case, the default port written or not), or "": a URL under both is under the one
// Allow lists first, so secrets of p's own would not sign it when the other comes first.
func (c Config) sameDestination(p string) string {
	pu, err := url.Parse(p)
	if err != nil {
		return ""
	}
	for _, q := range c.Allow {
		if q == p {
			continue
		}
		qu, err := url.Parse(q)
		if err == nil && sameOrigin(pu, qu) && pu.EscapedPath() == qu.EscapedPath() {
			return q
		}
	}
	return ""
}

// shownPrefix is an allow-list entry as an error may name it: without its user info, which may
// hold a password (a prefix must not have any), or only "an entry" when it does not parse.
func shownPrefix(p string) string {
	u, err := url.Parse(p)
	if err != nil {
		return "an entry that is not a URL"
	}
	if u.User != nil {
		u.User = url.User("…")
	}
	return strconv.Quote(u.String())
}

// openPrefixes are the allow-list's prefixes whose path is not empty and does not end in a
// slash: https://h/ask admits https://h/asking/… as well as https://h/ask/…, which is seldom
// what an operator meant. Each is named by scheme, host and path only (Validate refuses user
// info, a query or a fragment in a prefix; none is shown even so).
func (c Config) openPrefixes() []string {
	var open []string
	for _, p := range c.Allow {
		u, err := url.Parse(p)
		if err != nil || u.EscapedPath() == "" || strings.HasSuffix(u.EscapedPath(), "/") {
			continue
		}
		open = append(open, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String())
	}
	return open
}

// checkPrefix accepts an absolute https URL prefix with a host, or http to a loopback host.
func checkPrefix(p string) error {
	u, err := httpurl.Parse(p)
	if errors.Is(err, httpurl.ErrScheme) {
		return errors.New("want https")
	}
	if err != nil || u.User != nil || u.Fragment != "" || u.RawQuery != "" {
		return errors.New("want an absolute URL prefix such as https://hooks.example.com/ask/")
	}
	if dotSegments(u.Path) {
		// CheckURL refuses every URL with one, so no URL could be under this prefix.
		return errors.New("a dot segment (. or ..) in a prefix admits no URL: write the path it resolves to")
	}
	return checkScheme(u)
}

func checkScheme(u *url.URL) error {
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopbackHost(u.Hostname()) {
			return nil
		}
		return errors.New("http is allowed only to a loopback host; use https")
	}
	return errors.New("want https")
}

// loopbackHost reports whether h names the local machine by address or as localhost.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") || strings.HasSuffix(strings.ToLower(h), ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// newSigner reads a whsec_ secret.
func newSigner(secret string) (*standardwebhooks.Webhook, error) {
	if !strings.HasPrefix(secret, "whsec_") {
		return nil, errors.New("want whsec_ followed by base64")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) < 24 || len(key) > 64 {
		return nil, errors.New("want whsec_ followed by the base64 of 24 to 64 random bytes")
	}
	return standardwebhooks.NewWebhookRaw(key)
}
