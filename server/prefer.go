package server

import (
	"strconv"
	"strings"
	"time"
)

// maxWait caps `Prefer: wait=N`.
const maxWait = 60 * time.Second

// preferWait finds the `wait` preference (RFC 7240 §4.3) in a Prefer header: preferences are
// comma-separated, their parameters follow semicolons, names are case-insensitive. Its value
// is delta-seconds, bare or quoted: ASCII digits, however many (RFC 9111 §1.2.2: one too large
// to hold is the largest), so a wait above maxWait, of any length, is capped. A missing or
// malformed wait (a sign, a unit, a fraction) is ignored, as RFC 7240 asks.
func preferWait(h *string) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	for _, pref := range strings.Split(*h, ",") {
		tok, _, _ := strings.Cut(pref, ";")
		name, val, ok := strings.Cut(strings.TrimSpace(tok), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		if val == "" || strings.Trim(val, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n > int64(maxWait/time.Second) { // digits only: err is a range error
			return maxWait, true
		}
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}
