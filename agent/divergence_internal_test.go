package agent

import (
	"encoding/json"
	"testing"

	"github.com/das-ask/ask/gen"
)

// TestDivergenceComparesFiguresNotTheirSpelling: a source's numbers reach the ledger as it wrote
// them (decode keeps json.Number), and two statements may write the same figure two ways — a
// COUNT as 10, a SUM over REALs as 10.0 or 1e1. The same figures agree, so divergence is null;
// it used to compare the rows' JSON text and report "the answer would have been 10" beside an
// answer of 10. Figures that differ still diverge.
func TestDivergenceComparesFiguresNotTheirSpelling(t *testing.T) {
	defs := []definition{{Term: "incident", Definition: "d", Source: "s"}}
	answer := func(rows ...[]any) *gen.AnswerBody {
		return &gen.AnswerBody{
			Result:     &gen.ResultSet{Columns: []string{"team", "n"}, Rows: rows},
			Provenance: []gen.Provenance{{Term: "incident", Statement: "d", Source: "s", Kind: "glossary_term"}},
		}
	}
	n := func(s string) json.Number { return json.Number(s) }
	for _, tc := range []struct {
		name    string
		a, w    [][]any
		diverge bool
	}{
		{"integer and decimal", [][]any{{"Data", n("10")}}, [][]any{{"Data", n("10.0")}}, false},
		{"exponent", [][]any{{"Data", n("10")}}, [][]any{{"Data", n("1e1")}}, false},
		{"trailing zeros", [][]any{{"Data", n("11.10")}}, [][]any{{"Data", n("11.1")}}, false},
		{"another figure", [][]any{{"Data", n("10")}}, [][]any{{"Data", n("10.5")}}, true},
		{"another team", [][]any{{"Mobile", n("14")}}, [][]any{{"Data", n("14")}}, true},
		{"a number and its text", [][]any{{"Data", n("10")}}, [][]any{{"Data", "10"}}, true},
		{"another row count", [][]any{{"Data", n("10")}}, [][]any{{"Data", n("10")}, {"Mobile", n("9")}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := divergence(answer(tc.a...), answer(tc.w...), defs)
			if got := d != nil; got != tc.diverge {
				t.Errorf("divergence %+v, want diverging %v", d, tc.diverge)
			}
		})
	}
}
