package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Oracle computes an item's expected result by running its SQL when the eval runs. The demo
// dataset (source.OpenTruth) is one; any database that can run the set's SQL is another.
type Oracle interface {
	Query(ctx context.Context, sql string) (columns []string, rows [][]any, err error)
}

// sameRows reports whether got equals want: the same number of rows, each with the same number
// of values, values equal (numbers within tol, plus a relative 1e-9 for float noise). Unless
// ordered, rows are compared as multisets. The detail says what differed, for the report.
func sameRows(got, want [][]any, ordered bool, tol float64) (bool, string) {
	if len(got) != len(want) {
		return false, fmt.Sprintf("%d rows, expected %d", len(got), len(want))
	}
	g, w := got, want
	if !ordered {
		g, w = sortedRows(got), sortedRows(want)
	}
	for i := range w {
		if ok, why := sameRow(g[i], w[i], tol); !ok {
			// Values equal within a tolerance can sort apart as text (9.999 after 10): unordered
			// rows that differ in sorted order are paired by a matching before they are called
			// different (its table is rows², so only up to maxMatchedRows); the sorted order
			// names the difference.
			if !ordered && len(got) <= maxMatchedRows && matchRows(got, want, tol) {
				return true, ""
			}
			return false, fmt.Sprintf("row %d %s", i+1, why)
		}
	}
	return true, ""
}

// maxMatchedRows bounds the rows sameRows pairs by a matching, a table of rows² comparisons:
// the service caps a result at 500 rows by default; rows past this bound (a source set to
// return more) are compared in sorted order only, where the matching took minutes.
const maxMatchedRows = 2000

func sameRow(g, w []any, tol float64) (bool, string) {
	if len(g) != len(w) {
		return false, fmt.Sprintf("has %d values, expected %d", len(g), len(w))
	}
	for j := range w {
		if !sameValue(g[j], w[j], tol) {
			return false, fmt.Sprintf("value %d is %s, expected %s", j+1, canon(g[j]), canon(w[j]))
		}
	}
	return true, ""
}

// matchRows reports whether every row of got can be paired with its own equal row of want (a
// perfect bipartite matching, by augmenting paths). got and want have the same length.
func matchRows(got, want [][]any, tol float64) bool {
	eq := make([][]bool, len(got))
	for i := range got {
		eq[i] = make([]bool, len(want))
		for j := range want {
			eq[i][j], _ = sameRow(got[i], want[j], tol)
		}
	}
	pair := make([]int, len(want)) // want row j is paired with got row pair[j]-1; 0: unpaired
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for j := range want {
			if eq[i][j] && !seen[j] {
				seen[j] = true
				if pair[j] == 0 || augment(pair[j]-1, seen) {
					pair[j] = i + 1
					return true
				}
			}
		}
		return false
	}
	for i := range got {
		if !augment(i, make([]bool, len(want))) {
			return false
		}
	}
	return true
}

func sortedRows(rows [][]any) [][]any {
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b []any) int { return strings.Compare(rowKey(a), rowKey(b)) })
	return out
}

func rowKey(r []any) string {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = canon(v)
	}
	return strings.Join(parts, "\x1f")
}

// number reads v as a number when it is one (Go numbers, json.Number).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// sameValue reports whether a and b are the same value: numbers within tol plus float noise (a
// number written as text, as some sources return decimals, against a number counts as one; two
// texts compare as text, so "007" is not "7"); a null only another null and a boolean only the
// same boolean (the text "null" or "true" is text, not them); anything else by its text.
func sameValue(a, b any, tol float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if ba, ok := a.(bool); ok {
		bb, ok := b.(bool)
		return ok && ba == bb
	}
	if _, ok := b.(bool); ok {
		return false
	}
	fa, aok := number(a)
	fb, bok := number(b)
	if aok != bok { // one number, one not: the other is one if it is a number written as text
		if aok {
			fb, bok = numeric(b)
		} else {
			fa, aok = numeric(a)
		}
	}
	if aok && bok {
		d := math.Abs(fa - fb)
		return d <= tol || d <= 1e-9*math.Max(math.Abs(fa), math.Abs(fb))
	}
	return canon(a) == canon(b)
}

// numeric reads text that is a number written plainly ("10", "10.0", "-3.5e2"; not " 10",
// "0x10", "1_000", "Inf" or "NaN").
func numeric(v any) (float64, bool) {
	s, ok := v.(string)
	if !ok || s == "" || strings.ContainsFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789+-.eE", r) }) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// canon is a value's canonical text: integers without a fraction, other numbers in the
// shortest form, null for nil, anything else as its JSON or its text.
func canon(v any) string {
	if f, ok := number(v); ok {
		if f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// covers reports which of want are missing from have, case-insensitively.
func missing(have, want []string) []string {
	var out []string
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), strings.TrimSpace(w)) }) {
			out = append(out, w)
		}
	}
	return out
}
