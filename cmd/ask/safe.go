package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// What the service sends — an answer's text, a source's refusal reason, a milestone's
// subject, a problem's detail — comes from a model and from sources, which data can steer. On a
// terminal a control character in it is an instruction, not text: ESC [2K and CR erase a line
// and write a forged one over it, ESC [8m hides what follows, ESC ]0; sets the window's title, a
// bidirectional override reorders what is read. So an abstention could be made to look like an
// answer. Everything this command prints that it did not write itself goes through one of the
// two functions below, which show such a character as its escape (\x1b, \u202e) instead.

// oneLine is s made safe for one line of a terminal: every control character, line breaks and
// tabs included, shown as its escape.
func oneLine(s string) string { return printable(s, false) }

// text is s made safe for a terminal as text: line breaks and tabs stay, every other control
// character is shown as its escape.
func text(s string) string { return printable(s, true) }

func printable(s string, lines bool) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unsafeRune(r, lines) }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			// Not UTF-8: a rune split between two writes of a textWriter (the service's
			// strings are UTF-8), written as it came.
			b.WriteByte(s[i])
		case !unsafeRune(r, lines):
			b.WriteString(s[i : i+n])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports whether r acts on a terminal rather than shows: the C0 controls (but for
// line feed and tab, when lines are allowed), DEL, the C1 controls (of which U+009B is a
// one-byte CSI on some terminals), and the Unicode controls of bidirectional text.
func unsafeRune(r rune, lines bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !lines
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return true
	}
	return false
}

// textWriter writes through text: for the outcome on stdout, whose own formatting is only line
// breaks, tabs and spaces.
type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
