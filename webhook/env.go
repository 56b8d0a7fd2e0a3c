package webhook

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// LookupConfig reads Config through lookup (os.LookupEnv in production):
//
//	DAS_ASK_WEBHOOK_ALLOW         allowed URL prefixes, comma-separated; unset: webhooks off
//	DAS_ASK_WEBHOOK_SECRETS       signing secrets whsec_<base64>, comma-separated (all sign)
//	DAS_ASK_WEBHOOK_ALLOW_ADDRS   private/loopback/link-local CIDRs a destination may resolve to
//	DAS_ASK_WEBHOOK_MAX_ATTEMPTS  attempts per delivery (default 8, at most 50)
//	DAS_ASK_WEBHOOK_TIMEOUT_S     one attempt's timeout (default 10)
//
// An unset or blank variable means its default; every invalid value is reported together,
// naming its variable, and no message holds a secret.
func LookupConfig(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	list := func(name string) []string {
		v, ok := get(name)
		if !ok {
			return nil
		}
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	var errs []error
	c := Config{Allow: list("DAS_ASK_WEBHOOK_ALLOW"), Secrets: list("DAS_ASK_WEBHOOK_SECRETS")}
	for _, s := range list("DAS_ASK_WEBHOOK_ALLOW_ADDRS") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_ALLOW_ADDRS: %q: want a CIDR such as 10.1.0.0/16", s))
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.AllowAddrs = append(c.AllowAddrs, p.Masked())
	}
	if v, ok := get("DAS_ASK_WEBHOOK_MAX_ATTEMPTS"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAttemptsEdge {
			errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_MAX_ATTEMPTS=%q: want a whole number from 1 to %d", v, maxAttemptsEdge))
		} else {
			c.MaxAttempts = n
		}
	}
	if v, ok := get("DAS_ASK_WEBHOOK_TIMEOUT_S"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 300 {
			errs = append(errs, fmt.Errorf("DAS_ASK_WEBHOOK_TIMEOUT_S=%q: want a whole number of seconds from 1 to 300", v))
		} else {
			c.Timeout = time.Duration(n) * time.Second
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("webhook configuration: %w", err)
	}
	return c, nil
}
