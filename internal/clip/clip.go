// Package clip cuts text shown to people and kept in logs to a size, at a character boundary.
package clip

import "unicode/utf8"

// Ellipsis ends a string that was cut.
const Ellipsis = "…"

// Bytes is s when it is at most limit bytes; else its longest prefix of whole characters that,
// followed by Ellipsis, is at most limit bytes (Ellipsis alone when limit leaves no room).
func Bytes(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	end := max(limit-len(Ellipsis), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + Ellipsis
}
