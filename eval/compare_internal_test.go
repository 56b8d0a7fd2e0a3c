package eval

import "testing"

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
