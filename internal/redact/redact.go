// Package redact shows a URL without the password it may hold.
package redact

import (
	"net/url"
	"strings"
)

// URL is s with the password of its userinfo (scheme://user:password@host) replaced by "xxxxx",
// as url.URL.Redacted does, and s unchanged when it holds none. A string url.Parse refuses (a
// bad percent-escape or port, a space in the password) is redacted all the same: it is what a
// usage error quotes, and it may hold a password as much as a good one.
func URL(s string) string {
	if u, err := url.Parse(s); err == nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
		return s
	}
	_, rest, ok := strings.Cut(s, "//")
	if !ok {
		return s
	}
	start := len(s) - len(rest)
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return s
	}
	colon := strings.Index(authority[:at], ":")
	if colon < 0 {
		return s
	}
	return s[:start+colon+1] + "xxxxx" + s[start+at:]
}
