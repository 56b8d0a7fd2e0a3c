package conformance

import (
	"encoding/json"
	"net/url"
	"strings"
)

// fold is text as the privacy checks compare it: lower case, every run of white space one space.
func fold(text string) string {
	return strings.Join(strings.Fields(strings.ToLower(text)), " ")
}

// longestShared is the length in bytes of the longest run of q (folded) that text (folded)
// contains.
func longestShared(q, text string) int {
	q, text = fold(q), fold(text)
	has := func(n int) bool {
		for i := 0; i+n <= len(q); i++ {
			if strings.Contains(text, q[i:i+n]) {
				return true
			}
		}
		return false
	}
	lo, hi := 0, len(q) // has(lo) holds; find the largest n with has(n)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if has(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// minShared is the shortest run of a question that counts as carrying it: 24 characters, or
// more than half the question when that is longer. What the suite's runs legitimately share
// with their questions outside accepted and the outcome is a catalog term ("change failure
// rate", 19 characters, in milestones and search_catalog's args); the outcome's text may
// restate the question ("… had the highest change failure rate in 2026-Q3", 47), so it is
// held only to the whole question.
func minShared(q string) int {
	return max(24, len(fold(q))/2+1)
}

// carriesPart reports whether text holds a run of q of minShared(q) characters or more, and
// how long the longest run is.
func carriesPart(q, text string) (int, bool) {
	n := longestShared(q, text)
	return n, n >= minShared(q)
}

// withoutTerminal is a JSON body with its terminal member (a status's outcome event) removed.
func withoutTerminal(body []byte) string {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return string(body)
	}
	delete(m, "terminal")
	b, err := json.Marshal(m)
	if err != nil {
		return string(body)
	}
	return string(b)
}

// decoded is text with its percent-encoding undone too (a question in a URL, "How%20many" or
// "How+many", is the question): text, then, when it decodes to something else, what it
// decodes to, so that a search finds the question in either form.
func decoded(text string) string {
	if !strings.ContainsAny(text, "%+") {
		return text
	}
	d, err := url.QueryUnescape(text)
	if err != nil {
		// One stray "%" spoils the whole text: undo what decodes, piece by piece.
		var b strings.Builder
		for i, part := range strings.Split(text, "%") {
			if i == 0 {
				b.WriteString(strings.ReplaceAll(part, "+", " "))
				continue
			}
			if p, err := url.QueryUnescape("%" + part); err == nil {
				b.WriteString(p)
			} else {
				b.WriteString("%" + strings.ReplaceAll(part, "+", " "))
			}
		}
		d = b.String()
	}
	if d == text {
		return text
	}
	return text + "\n" + d
}
