package source

import (
	"slices"
	"strings"
	"unicode"
)

// catalog is the glossary: read-only after load, safe for concurrent use.
type catalog struct {
	terms []Term
}

// termSummary is one search hit: the term and the first sentence of its definition.
type termSummary struct {
	Term    string `json:"term"`
	Summary string `json:"summary"`
}

// searchResult is the catalog.search result shape of the source tool contract.
type searchResult struct {
	Query string        `json:"query"`
	Terms []termSummary `json:"terms"`
}

// definition is the catalog.define result shape of the source tool contract.
type definition struct {
	Term       string   `json:"term"`
	Definition string   `json:"definition"`
	Source     string   `json:"source"`
	Kind       string   `json:"kind"`
	Caveats    []string `json:"caveats"`
	Tables     []string `json:"tables"`
}

// search returns the terms that match query, best first. A term matches when its name or one
// of its synonyms appears in the query as whole words ("sev1 incidents last quarter" finds
// incident and severity), or when every significant word of the query appears in the term's
// name, synonyms or definition ("failure rate" finds change failure rate). A query about
// something the catalog does not define ("customer churn rate") finds nothing: words must all
// match, so one shared word such as "rate" is not enough.
func (c *catalog) search(query string) searchResult {
	q := words(query)
	sig := significant(q)
	type hit struct {
		term  Term
		score int
	}
	var hits []hit
	for _, t := range c.terms {
		score := 0
		for _, name := range append([]string{t.Term}, t.Synonyms...) {
			if containsRun(q, words(name)) {
				score = max(score, 2+len(words(name)))
			}
		}
		if score == 0 && len(sig) > 0 {
			text := words(t.Term + " " + strings.Join(t.Synonyms, " ") + " " + t.Definition)
			if allIn(sig, text) {
				score = 1
			}
		}
		if score > 0 {
			hits = append(hits, hit{t, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
	res := searchResult{Query: query, Terms: []termSummary{}}
	for _, h := range hits {
		res.Terms = append(res.Terms, termSummary{Term: h.term.Term, Summary: firstSentence(h.term.Definition)})
	}
	return res
}

// define returns the entry whose name or synonym equals term, ignoring case, spacing and
// hyphens ("on call pay", "On-call compensation" and "oncall pay" all resolve).
func (c *catalog) define(term string) (definition, bool) {
	want := strings.Join(words(term), " ")
	for _, t := range c.terms {
		for _, name := range append([]string{t.Term}, t.Synonyms...) {
			if strings.Join(words(name), " ") == want {
				return definition{
					Term: t.Term, Definition: t.Definition, Source: t.Source, Kind: t.Kind,
					Caveats: orEmpty(t.Caveats), Tables: orEmpty(t.Tables),
				}, true
			}
		}
	}
	return definition{}, false
}

// names lists every term, for an unknown-term error the model can act on.
func (c *catalog) names() []string {
	out := make([]string, len(c.terms))
	for i, t := range c.terms {
		out[i] = t.Term
	}
	return out
}

// words lower-cases s and splits it into runs of letters and digits; "on-call" is "on call".
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// significant drops words that carry no meaning for a glossary lookup.
func significant(ws []string) []string {
	var out []string
	for _, w := range ws {
		switch w {
		case "a", "an", "the", "of", "in", "on", "for", "to", "and", "or", "by", "per", "is", "are",
			"was", "were", "what", "which", "how", "many", "much", "does", "do", "did", "we", "our",
			"us", "mean", "means", "meaning", "define", "definition", "with", "from", "at", "have", "had":
			continue
		}
		out = append(out, w)
	}
	return out
}

// containsRun reports whether run occurs in ws as consecutive words; a trailing "s" on a query
// word is ignored so that "incidents" finds "incident".
func containsRun(ws, run []string) bool {
	if len(run) == 0 {
		return false
	}
	for i := 0; i+len(run) <= len(ws); i++ {
		ok := true
		for j, r := range run {
			if !sameWord(ws[i+j], r) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func allIn(needles, hay []string) bool {
	for _, n := range needles {
		if !slices.ContainsFunc(hay, func(h string) bool { return sameWord(n, h) }) {
			return false
		}
	}
	return true
}

func sameWord(a, b string) bool {
	return a == b || strings.TrimSuffix(a, "s") == strings.TrimSuffix(b, "s")
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
