package server

import (
	"strconv"
	"strings"
	"time"
)

// maxWait caps `Prefer: wait=N`.
const maxWait = 60 * time.Second

// preferWait finds the `wait` preference (RFC 7240 §4.3) in a Prefer header: preferences are
// comma-separated, their parameters follow semicolons, names are case-insensitive. A missing
// or malformed wait is ignored, as RFC 7240 asks; a wait above maxWait is capped.
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
		val = strings.Trim(strings.TrimSpace(val), `"`)
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		d := time.Duration(n) * time.Second
		if n > int64(maxWait/time.Second) {
			d = maxWait
		}
		return d, true
	}
	return 0, false
}
