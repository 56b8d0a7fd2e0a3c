package agent

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/das-ask/ask/gen"
)

// divergence compares the answer with the catalog-withheld answer to the same question. It is
// nil unless both are answers with a result, the answer rests on at least one definition, and
// the two results differ in their figures (the rows, compared value for value; column names may
// differ without the answers disagreeing). Without names the definitions the withheld answer
// did without: those of the answer's provenance whose tables (as the catalog states them) the
// withheld answer read, or every provenance term when none says.
func divergence(answer, withheld *gen.AnswerBody, defs []definition) *gen.Divergence {
	if answer == nil || withheld == nil || answer.Result == nil || withheld.Result == nil || len(answer.Provenance) == 0 {
		return nil
	}
	if sameRows(answer.Result.Rows, withheld.Result.Rows) {
		return nil
	}
	read := map[string]bool{}
	for _, sql := range withheld.Sql {
		for _, t := range tablesOf(sql) {
			read[t] = true
		}
	}
	var without, all []string
	for _, p := range answer.Provenance {
		if slices.Contains(all, p.Term) {
			continue
		}
		all = append(all, p.Term)
		for _, d := range defs {
			if d.Term == p.Term && slices.ContainsFunc(d.Tables, func(t string) bool { return read[strings.ToLower(t)] }) {
				without = append(without, p.Term)
				break
			}
		}
	}
	if len(without) == 0 {
		without = all
	}
	d := &gen.Divergence{Result: *withheld.Result, Headline: withheld.Headline, Sql: withheld.Sql, Without: without}
	if withheld.Text != "" {
		d.Text = &withheld.Text
	}
	return d
}

// sameRows reports whether two results hold the same figures, row for row.
func sameRows(a, b [][]any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
