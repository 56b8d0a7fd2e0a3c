package eval

import (
	"fmt"
	"slices"
	"testing"
)

func TestSameRows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want [][]any
		ordered   bool
		tol       float64
		ok        bool
	}{
		{"equal", [][]any{{"a", 1.0}}, [][]any{{"a", int64(1)}}, false, 0, true},
		{"other order, unordered", [][]any{{"b", 2.0}, {"a", 1.0}}, [][]any{{"a", int64(1)}, {"b", int64(2)}}, false, 0, true},
		{"other order, ordered", [][]any{{"b", 2.0}, {"a", 1.0}}, [][]any{{"a", int64(1)}, {"b", int64(2)}}, true, 0, false},
		{"different value", [][]any{{"a", 2.0}}, [][]any{{"a", int64(1)}}, false, 0, false},
		{"within tolerance", [][]any{{13.4}}, [][]any{{13.4321}}, false, 0.05, true},
		{"beyond tolerance", [][]any{{13.3}}, [][]any{{13.4321}}, false, 0.05, false},
		{"float noise", [][]any{{0.1 + 0.2}}, [][]any{{0.3}}, false, 0, true},
		{"extra row", [][]any{{1.0}, {2.0}}, [][]any{{int64(1)}}, false, 0, false},
		{"extra column", [][]any{{"a", 1.0}}, [][]any{{int64(1)}}, false, 0, false},
		{"null", [][]any{{nil}}, [][]any{{nil}}, false, 0, true},
		{"null is not zero", [][]any{{0.0}}, [][]any{{nil}}, false, 0, false},
		{"a number as text", [][]any{{"1"}}, [][]any{{int64(1)}}, false, 0, true},
		{"a decimal as text", [][]any{{"10.0"}}, [][]any{{int64(10)}}, false, 0, true},
		{"a decimal as text, another figure", [][]any{{"10.5"}}, [][]any{{int64(10)}}, false, 0, false},
		{"texts compare as text", [][]any{{"007"}}, [][]any{{"7"}}, false, 0, false},
		{"text that is no number", [][]any{{"0x10"}}, [][]any{{int64(16)}}, false, 0, false},
		{"the text null is not null", [][]any{{"null"}}, [][]any{{nil}}, false, 0, false},
		{"null is not the text null", [][]any{{nil}}, [][]any{{"null"}}, false, 0, false},
		{"a boolean", [][]any{{true}}, [][]any{{true}}, false, 0, true},
		{"the text true is not true", [][]any{{"true"}}, [][]any{{true}}, false, 0, false},
		{"true is not the text true", [][]any{{true}}, [][]any{{"true"}}, false, 0, false},
		{"a boolean is not a number", [][]any{{true}}, [][]any{{int64(1)}}, false, 0, false},
		// 9.999 sorts after 10 as text: rows equal within the tolerance must still pair up.
		{"within tolerance, sorting apart", [][]any{{9.999, "x"}, {10.0, "y"}}, [][]any{{int64(10), "x"}, {int64(10), "y"}}, false, 0.01, true},
		{"within tolerance, sorting apart, one wrong", [][]any{{9.999, "x"}, {10.0, "z"}}, [][]any{{int64(10), "x"}, {int64(10), "y"}}, false, 0.01, false},
		{"float noise, sorting apart", [][]any{{0.1 + 0.2, "a"}, {0.3, "b"}}, [][]any{{0.3, "b"}, {0.3, "a"}}, false, 0, true},
		{"one row matching two", [][]any{{10.0}, {10.0}}, [][]any{{9.995}, {20.0}}, false, 0.01, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ok, why := sameRows(tc.got, tc.want, tc.ordered, tc.tol); ok != tc.ok {
				t.Errorf("got %v (%s), want %v", ok, why, tc.ok)
			}
		})
	}
}

// Unordered rows are compared in sorted order first, and paired by a matching (a table of rows²)
// only when that order differs, and only up to maxMatchedRows: a result a source was set to
// return by the hundred thousand was a table of 10^10 comparisons, right or wrong. Past the
// bound, rows equal within the tolerance that sort apart are compared in sorted order only.
func TestSameRowsMatchesOnlyWithinItsBound(t *testing.T) {
	rows := func(n int, first float64) (got, want [][]any) {
		for i := range n {
			label := fmt.Sprintf("r%07d", i)
			got = append(got, []any{label, float64(i)})
			want = append(want, []any{label, int64(i)})
		}
		// 9.999 sorts after 10 as text, so these two rows sort apart from their equals.
		got[0], want[0] = []any{first, "x"}, []any{int64(10), "x"}
		got[1], want[1] = []any{10.0, "y"}, []any{int64(10), "y"}
		return got, want
	}
	if got, want := rows(3, 9.999); !sameRowsOK(got, want) {
		t.Error("3 rows equal within the tolerance, sorting apart: not paired")
	}
	if got, want := rows(maxMatchedRows+1, 9.999); sameRowsOK(got, want) {
		t.Error("past the bound, rows sorting apart were paired by a matching")
	}
	got, want := rows(200_000, 10)
	slices.Reverse(got)
	if !sameRowsOK(got, want) {
		t.Error("200,000 equal rows in another order: not equal")
	}
}

func sameRowsOK(got, want [][]any) bool {
	ok, _ := sameRows(got, want, false, 0.01)
	return ok
}
