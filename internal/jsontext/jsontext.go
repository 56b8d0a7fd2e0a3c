// Package jsontext holds checks of JSON texts that Go's encoding/json does not make: it reads an
// escaped unpaired UTF-16 surrogate as U+FFFD, so two texts that spell different strings decode
// to the same one. The service's request bodies (package server) and the bearer's claims
// (package auth) are refused with one.
package jsontext

// LoneSurrogate reports whether b, a well-formed JSON text, escapes a surrogate (\uD800–\uDFFF)
// that is not the high half of a pair followed at once by its low half. Outside strings a
// backslash cannot occur in a well-formed text, so every one read here is inside a string.
func LoneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b, i+1)
		i += 4
		switch {
		case !ok || r < 0xD800 || r > 0xDFFF:
		case r >= 0xDC00: // a low half with no high half before it
			return true
		default: // a high half: its low half must follow as the next escape
			if i+2 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return true
			}
			lo, ok := hex4(b, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 is the value of the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
