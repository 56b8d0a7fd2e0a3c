// Package redact shows a URL without the secrets it may hold: the password of its userinfo and
// the values of its query.
package redact

import (
	"net/url"
	"strings"
)

// hidden stands for what was taken out.
const hidden = "xxxxx"

// URL is s with the password of its userinfo (scheme://user:password@host) replaced by "xxxxx",
// as url.URL.Redacted does, and the value of each query parameter too (?key=xxxxx: a JWKS or an
// MCP endpoint may be given a token or an API key that way, ?access_token=…); s unchanged when it
// holds neither. A string url.Parse refuses (a bad percent-escape or port, a space or a
// / ? # in the password) is redacted all the same: it is what a usage error quotes, and it may hold a secret
// as much as a good one.
func URL(s string) string {
	if u, err := url.Parse(s); err == nil {
		_, password := u.User.Password()
		if !password && u.RawQuery == "" {
			return s
		}
		if password {
			u.User = url.UserPassword(u.User.Username(), hidden)
		}
		u.RawQuery = query(u.RawQuery)
		return u.String()
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
	out := s
	// The userinfo ends at the last "@" of the whole string, not of the authority as cut at
	// its first / ? or #: a password may hold one of those not percent-encoded (a base64 one
	// holds /), which is often why url.Parse refused the string. A malformed URL is shown
	// with too much hidden, never too little.
	if strings.ContainsAny(authority, ":@") {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				out = s[:start+colon+1] + hidden + s[start+at:]
			}
		}
	}
	// The query of a string url.Parse refused: each value hidden, cut at its separators.
	if q := strings.Index(out, "?"); q >= 0 {
		end := len(out)
		if h := strings.Index(out[q:], "#"); h >= 0 {
			end = q + h
		}
		out = out[:q+1] + query(out[q+1:end]) + out[end:]
	}
	return out
}

// query is a raw query with each parameter's value hidden: "a=1&b=2&c" → "a=xxxxx&b=xxxxx&c".
// The names stay as written, so a log still says which parameters a URL had.
func query(raw string) string {
	if raw == "" {
		return raw
	}
	parts := strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range parts {
		if k, _, ok := strings.Cut(p, "="); ok {
			parts[i] = k + "=" + hidden
		}
	}
	return strings.Join(parts, "&")
}

// In is msg with each secret of the URL raw that URL hides (its password, its query's values)
// hidden wherever msg quotes it: for an error that quotes the URL it was about, as net/http's
// do ("Get \"https://u:***@idp/jwks?key=…\": …", the password hidden but the query as sent).
// msg is unchanged when raw holds neither, or is not a URL.
func In(msg, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return msg
	}
	if p, ok := u.User.Password(); ok && p != "" {
		written := u.User.String() // user:password as escaped in a URL
		written = written[strings.Index(written, ":")+1:]
		for _, form := range []string{p, written} {
			msg = strings.ReplaceAll(msg, ":"+form+"@", ":"+hidden+"@")
		}
	}
	if u.RawQuery != "" {
		msg = strings.ReplaceAll(msg, "?"+u.RawQuery, "?"+query(u.RawQuery))
	}
	return msg
}
