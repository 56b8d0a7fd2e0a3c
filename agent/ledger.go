package agent

import (
	"bytes"
	"encoding/json"
	"html"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/das-ask/ask/internal/clip"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent/source"
)

// ledger is what a run's tools have returned so far: the facts the outcome is assembled from.
// It is owned by one run.
type ledger struct {
	// questions are the texts no event of the run may carry, normalized: its question and the
	// conversation's earlier ones (each is in its own accepted event and in the conversation's
	// memory only; a model may search for any of them verbatim). Only distinctive ones are kept
	// (see distinctive).
	questions []string
	// short are the other questions, normalized ("and Q3?", "Why?"): withheld only where a
	// text is one of them whole (a search for the question verbatim), since their words are
	// the answer's own vocabulary.
	short []string
	// prosePatterns match the questions in prose, as prose compares (built once, by prose).
	prosePatterns []*regexp.Regexp
	consulted     []string // sources called, in order of first call
	termsTried    []string // search queries and define terms, in order, deduplicated
	definitions   []definition
	statements    []statement
}

type definition struct {
	Term       string   `json:"term"`
	Definition string   `json:"definition"`
	Source     string   `json:"source"`
	Kind       string   `json:"kind"`
	Caveats    []string `json:"caveats"`
	// Tables are the tables that hold the term's data, when the catalog says (divergence names
	// the definitions whose tables the catalog-withheld answer read).
	Tables []string `json:"tables"`
}

type statement struct {
	SQL       string          `json:"sql"`
	Columns   []string        `json:"columns"`
	Rows      [][]interface{} `json:"rows"`
	Truncated bool            `json:"truncated"`
	source    string
	// informed: a definition had been retrieved, in the same loop, when the statement ran (a
	// phase-2 branch's statements are ordered by it; see reconcileOrder).
	informed bool
}

// decode reads a tool's JSON result keeping numbers exactly as the source wrote them.
func decode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}

// tried notes what a call looked for, whatever its outcome.
func (l *ledger) tried(t source.Tool, args map[string]any) {
	if !slices.Contains(l.consulted, t.Source) {
		l.consulted = append(l.consulted, t.Source)
	}
	var term string
	switch t.Role {
	case source.RoleCatalogSearch:
		term = firstString(args, "query", "q", "term")
	case source.RoleCatalogDefine:
		term = firstString(args, "term", "name")
	default:
		return
	}
	term = strings.TrimSpace(term)
	if term == "" || l.isQuestion(term) || slices.Contains(l.termsTried, term) {
		return
	}
	l.termsTried = append(l.termsTried, term)
}

// record keeps the facts of a successful call, by the tool's role.
func (l *ledger) record(t source.Tool, r source.Result) {
	switch t.Role {
	case source.RoleCatalogDefine:
		var d definition
		if decode(r.Data, &d) != nil || d.Term == "" || d.Definition == "" {
			return
		}
		if d.Source == "" {
			d.Source = t.Source
		}
		if d.Kind == "" {
			d.Kind = "glossary_term"
		}
		for _, have := range l.definitions {
			if have.Term == d.Term && have.Source == d.Source {
				return
			}
		}
		l.definitions = append(l.definitions, d)
	case source.RoleQuery:
		var s statement
		if decode(r.Data, &s) != nil {
			return
		}
		if s.SQL == "" {
			s.SQL = firstString(r.Args, "sql", "query")
		}
		if s.Columns == nil {
			s.Columns = []string{}
		}
		if s.Rows == nil {
			s.Rows = [][]interface{}{}
		}
		s.source = t.Source
		s.informed = len(l.definitions) > 0
		l.statements = append(l.statements, s)
	}
}

// queriedSources are the sources on which at least one statement ran.
func (l *ledger) queriedSources() []string {
	var out []string
	for _, s := range l.statements {
		if !slices.Contains(out, s.source) {
			out = append(out, s.source)
		}
	}
	return out
}

// newLedger is the ledger of a run of req: it keeps req's question and the earlier turns' out
// of the events.
func newLedger(req ask.Request) *ledger {
	l := &ledger{}
	for _, q := range append([]string{req.Question}, questionsOf(req.History)...) {
		switch n := normalize(q); {
		case n == "" || slices.Contains(l.questions, n) || slices.Contains(l.short, n):
		case distinctive(n):
			l.questions = append(l.questions, n)
		default:
			l.short = append(l.short, n)
		}
	}
	return l
}

func questionsOf(history []ask.Turn) []string {
	out := make([]string, 0, len(history))
	for _, t := range history {
		out = append(out, t.Question)
	}
	return out
}

// distinctive reports whether the normalized question n is one that only a restatement would
// repeat: three words or more, or a long one. A follow-up such as "and Q3?" or "Why?" is not:
// its words are the answer's own (the SQL filters on 2026-Q3, the prose says why), and taking
// them for the question would withhold every statement and sentence that uses them.
func distinctive(n string) bool {
	return strings.Count(n, " ") >= 2 || len([]rune(n)) >= 24
}

// isQuestion reports whether s is the question text, or an earlier turn's, or holds a
// distinctive one as whole words, ignoring case, punctuation and spacing: no event but accepted
// may carry a question. It is also found escaped, as a source's message may quote it (see
// unescape): a service that escapes every character outside ASCII, as Python's json.dumps does
// by default, quotes "ключ" as "\u043a\u043b\u044e\u0447", which normalize reads as other words.
func (l *ledger) isQuestion(s string) bool {
	if len(l.questions) == 0 && len(l.short) == 0 {
		return false
	}
	if l.holdsQuestion(s) {
		return true
	}
	if u := unescape(s); u != s {
		return l.holdsQuestion(u)
	}
	return false
}

// holdsQuestion is isQuestion for s as written.
func (l *ledger) holdsQuestion(s string) bool {
	n := normalize(s)
	if slices.Contains(l.short, n) {
		return true
	}
	n = " " + n + " "
	for _, q := range l.questions {
		if strings.Contains(n, " "+q+" ") {
			return true
		}
	}
	return false
}

// unescape is s with the escapes a quoted text may carry decoded: HTML's character references
// (html.UnescapeString: &#1082;, &#x43a;, &amp;), JSON's \uXXXX (surrogate pairs joined) and
// Go's \UXXXXXXXX, behind any number of backslashes (a quote within a quote), and a URL's
// percent-encoding of UTF-8 (%D0%BA). What does not decode to a character is left as it is
// (url.PathUnescape would refuse the whole text for one stray %, so the last two are read here).
func unescape(s string) string {
	if !strings.ContainsAny(s, `\%&`) {
		return s
	}
	s = html.UnescapeString(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		if d, n := escapeAt(s, i); n > 0 {
			b.WriteString(d)
			i += n
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// escapeAt decodes the backslash or percent escape starting at s[i], if one does: its text and
// length.
func escapeAt(s string, i int) (string, int) {
	switch s[i] {
	case '\\':
		r, n := uEscape(s[i:])
		if n == 0 {
			return "", 0
		}
		if utf16.IsSurrogate(r) {
			r2, n2 := uEscape(s[i+n:])
			if n2 == 0 {
				return "", 0
			}
			if r = utf16.DecodeRune(r, r2); r == unicode.ReplacementChar {
				return "", 0
			}
			n += n2
		}
		return string(r), n
	case '%':
		var b []byte
		n := 0
		for i+n+3 <= len(s) && s[i+n] == '%' {
			v, err := strconv.ParseUint(s[i+n+1:i+n+3], 16, 8)
			if err != nil {
				break
			}
			b = append(b, byte(v))
			n += 3
		}
		if n == 0 || !utf8.Valid(b) {
			return "", 0
		}
		return string(b), n
	}
	return "", 0
}

// uEscape reads one \uXXXX or \UXXXXXXXX at the start of s, after any number of backslashes:
// the rune and the length read, or 0.
func uEscape(s string) (rune, int) {
	k := 0
	for k < len(s) && s[k] == '\\' {
		k++
	}
	if k == 0 || k == len(s) {
		return 0, 0
	}
	digits := map[byte]int{'u': 4, 'U': 8}[s[k]]
	if digits == 0 || k+1+digits > len(s) {
		return 0, 0
	}
	v, err := strconv.ParseUint(s[k+1:k+1+digits], 16, 32)
	if err != nil || v > unicode.MaxRune {
		return 0, 0
	}
	return rune(v), k + 1 + digits
}

// normalize lower-cases s and keeps only its words, one space apart.
func normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}

// redacted stands in, in a step's args, for an argument that holds the question text.
const redacted = "[the question]"

// toolName is a tool's name as an event (a step, a refusal), a log line, a trace or a metric
// may carry it: redacted when it holds a question. A name is the source's own text, and a
// source may list a tool named after what it was sent (a "saved search" named with an earlier
// question, which the model may call); the call is made under the real name all the same.
func (l *ledger) toolName(name string) string {
	if l.isQuestion(name) {
		return redacted
	}
	return name
}

// withheld stands in, in a step's error and a refusal's reason, for a source's message that
// quotes a question (a source's error may repeat the argument it could not use).
const withheld = "[the source's message quoted the question; it is not shown]"

// redact returns args for a step event: any string holding a question (a model may search for
// the question verbatim), at any depth of the arguments, and any member name holding one, is
// replaced, since no event but accepted carries it.
func (l *ledger) redact(args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		if l.isQuestion(k) {
			k = redacted
		}
		out[k] = l.redactValue(v)
	}
	return out
}

func (l *ledger) redactValue(v any) any {
	switch v := v.(type) {
	case string:
		if l.isQuestion(v) {
			return redacted
		}
	case map[string]any:
		return l.redact(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = l.redactValue(e)
		}
		return out
	}
	return v
}

// prose is the model's prose (answer.text, divergence.text) as an event may carry it: every
// place it restates a question — compared as isQuestion compares, ignoring case, punctuation and
// spacing — stands as redacted, and the model's other words are kept. A model may well open
// with "You asked: …"; no event but accepted carries the question.
func (l *ledger) prose(text string) string {
	if l.prosePatterns == nil {
		for _, q := range l.questions {
			words := strings.Fields(q) // normalized: letters and digits, one space apart
			for i, w := range words {
				words[i] = regexp.QuoteMeta(w)
			}
			// whole words only: the question's last word is not the start of a longer one
			l.prosePatterns = append(l.prosePatterns, regexp.MustCompile(`(?i)(^|[^\p{L}\p{N}])`+
				strings.Join(words, `[^\p{L}\p{N}]+`)+`($|[^\p{L}\p{N}])`))
		}
	}
	for _, re := range l.prosePatterns {
		text = re.ReplaceAllString(text, "${1}"+redacted+"${2}")
	}
	if l.isQuestion(text) { // what a case fold could not match
		return redacted
	}
	return text
}

// MaxShownBytes bounds a source's message as an event carries it (a step's error, a refusal's
// reason): a paragraph a person reads. A refusal's reason is also its conversation's turn, resent
// to the model with every later ask, so a source's 4 MiB would otherwise be resent up to
// DAS_ASK_MAX_TURNS_PER_CONVERSATION times an ask.
const MaxShownBytes = 2048

// shown is a source's message (a tool's error, a refusal's reason) as an event may carry it:
// withheld when it quotes a question (judged whole, before the cut, so that no part of a
// question is left), and cut to MaxShownBytes. The model still reads it whole.
func (l *ledger) shown(msg string) string {
	if l.isQuestion(msg) {
		return withheld
	}
	return clip.Bytes(msg, MaxShownBytes)
}

func firstString(args map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := args[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}
