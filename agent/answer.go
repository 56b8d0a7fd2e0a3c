package agent

import (
	"slices"
	"strings"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
)

// outcome classifies a run whose model finished without a refusal: abstention when no statement
// ran and no definition was retrieved, otherwise the answer assembled from the tool results.
// text is the model's last words.
func (l *ledger) outcome(text string) ask.Outcome {
	if len(l.statements) == 0 && len(l.definitions) == 0 {
		return ask.Outcome{Abstention: l.abstention(text)}
	}
	return ask.Outcome{Answer: l.answer(text)}
}

// answer assembles the answer from the ledger; text is the model's prose.
func (l *ledger) answer(text string) *gen.AnswerBody {
	a := &gen.AnswerBody{
		Text:       l.prose(text),
		Sql:        []string{},
		Provenance: []gen.Provenance{},
		Caveats:    []gen.Caveat{},
		Path:       gen.AnswerPath{Speed: gen.AnswerPathSpeedFast, Detail: "catalog"},
	}
	for _, d := range l.definitions {
		// A catalog may quote the term it was asked for, and a model may ask for the question
		// verbatim: what quotes a question stands as redacted, as in the SQL and the result.
		term, src := l.unquoted(d.Term), l.unquoted(d.Source)
		a.Provenance = append(a.Provenance, gen.Provenance{Term: term, Statement: l.unquoted(d.Definition), Source: src, Kind: l.unquoted(d.Kind)})
		for _, c := range d.Caveats {
			a.Caveats = append(a.Caveats, gen.Caveat{Term: term, Text: l.unquoted(c), Source: src})
		}
	}
	if len(l.statements) == 0 {
		return a
	}
	for _, s := range l.statements {
		sql := s.SQL
		if l.isQuestion(sql) {
			sql = redacted // as in the step that ran it
		}
		a.Sql = append(a.Sql, sql)
	}
	a.Path.Speed = gen.AnswerPathSpeedFull
	a.Path.Detail = "warehouse"
	if len(l.queriedSources()) > 1 {
		a.Path.Detail = "multi"
	}
	last := l.statements[len(l.statements)-1]
	a.Result = l.result(last)
	if len(a.Result.Columns) == 1 && len(a.Result.Rows) == 1 && len(a.Result.Rows[0]) == 1 {
		a.Headline = &gen.Headline{Label: a.Result.Columns[0], Value: a.Result.Rows[0][0]}
	}
	return a
}

// unquoted is s as an event may carry it: redacted when it holds a question.
func (l *ledger) unquoted(s string) string {
	if l.isQuestion(s) {
		return redacted
	}
	return s
}

// result is a statement's result as the answer shows it: a column name or a value that holds a
// question stands as redacted, as the SQL that selected it does (a statement may select the
// question itself, and the source returns it). The ledger keeps the result whole: a phase-2
// supervisor reads the branches' results.
func (l *ledger) result(s statement) *gen.ResultSet {
	r := &gen.ResultSet{Columns: slices.Clone(s.Columns), Rows: slices.Clone(s.Rows), Truncated: s.Truncated}
	for i, c := range r.Columns {
		if l.isQuestion(c) {
			r.Columns[i] = redacted
		}
	}
	for i, row := range r.Rows {
		row = slices.Clone(row)
		for j, v := range row {
			if str, ok := v.(string); ok && l.isQuestion(str) {
				row[j] = redacted
			}
		}
		r.Rows[i] = row
	}
	return r
}

// abstention is what the run looked for — the catalog terms tried and the sources called, both
// empty when no tool ran — and the model's own words (a clarifying question, say), unless they
// would carry the question of this ask or of an earlier turn: no event but accepted may.
func (l *ledger) abstention(text string) *gen.AbstentionBody {
	terms := append([]string{}, l.termsTried...)
	b := &gen.AbstentionBody{Terms: terms}
	if len(l.consulted) > 0 {
		srcs := append([]string{}, l.consulted...)
		b.Sources = &srcs
	}
	text = strings.TrimSpace(text)
	if text == "" || l.isQuestion(text) {
		return b
	}
	b.Text = &text
	return b
}
