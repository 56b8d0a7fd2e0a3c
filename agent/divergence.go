package agent

import (
	"encoding/json"
	"math/big"
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

// sameRows reports whether two results hold the same figures, row for row. A number is
// compared by its value, not by how the source wrote it (decode keeps the source's spelling: a
// COUNT's 10 and a SUM's 10.0 are one figure); anything else by its JSON.
func sameRows(a, b [][]any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if !sameValue(a[i][j], b[i][j]) {
				return false
			}
		}
	}
	return true
}

// figurePrec is the precision numbers are compared at: far beyond any figure a table holds, and
// bounded, so that a source's 1e999999999 costs no more than any other number.
const figurePrec = 256

func sameValue(x, y any) bool {
	nx, okx := x.(json.Number)
	ny, oky := y.(json.Number)
	if okx && oky {
		fx, _, errx := big.ParseFloat(string(nx), 10, figurePrec, big.ToNearestEven)
		fy, _, erry := big.ParseFloat(string(ny), 10, figurePrec, big.ToNearestEven)
		if errx == nil && erry == nil {
			return fx.Cmp(fy) == 0
		}
	}
	jx, err1 := json.Marshal(x)
	jy, err2 := json.Marshal(y)
	return err1 == nil && err2 == nil && string(jx) == string(jy)
}
