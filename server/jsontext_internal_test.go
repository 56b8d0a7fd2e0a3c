package server

import (
	"strings"
	"testing"
)

// TestRepeatedName: a name is repeated only within one object, compared as decoded (an
// escape spells the same name), at any depth; the same name in two objects, nested or side by
// side in an array, is no repeat. Past a handful of names an object's are kept in a map, so a
// body of many names costs linear time.
func TestRepeatedName(t *testing.T) {
	many := func(n int, dup bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26) + `":0`)
		}
		if dup {
			b.WriteString(`,"ka":1`)
		}
		b.WriteString("}")
		return b.String()
	}
	for _, tt := range []struct {
		name, body string
		want       bool
	}{
		{"none", `{}`, false},
		{"one", `{"question":"q"}`, false},
		{"two names", `{"question":"q","webhook":{"url":"u"}}`, false},
		{"the same name in nested objects", `{"a":{"a":{"a":1}}}`, false},
		{"the same name in sibling objects", `[{"a":1},{"a":2}]`, false},
		{"after a closed object", `{"a":{"b":1},"b":2}`, false},
		{"a name in a string value", `{"a":"\"a\":1","b":"a"}`, false},
		{"a value like a name", `{"a":"a"}`, false},
		{"escapes that differ", `{"a\n":1,"a\t":2}`, false},
		{"a scalar", `"a"`, false},
		{"strings in an array", `["a","a"]`, false},
		{"strings in an array in an object", `{"a":["a","a"],"b":["b",{"a":1},"a"]}`, false},
		{"twice", `{"a":1,"a":2}`, true},
		{"twice with space", "{ \"a\" : 1 ,\n\"a\" : 2 }", true},
		{"twice, escaped", `{"question":1,"\u0071uestion":2}`, true},
		{"twice, an escaped quote", `{"a\"":1,"a\u0022":2}`, true},
		{"twice, deep", `{"x":[1,{"y":{"a":1,"b":2,"a":3}}]}`, true},
		{"twice, after a nested object", `{"a":{"b":1},"a":2}`, true},
		{"twice in the second of an array", `[{"a":1},{"a":1,"a":2}]`, true},
		{"many, none twice", many(500, false), false},
		{"many, one twice", many(500, true), true},
	} {
		if got := repeatedName([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: repeatedName(%.60q) = %v, want %v", tt.name, tt.body, got, tt.want)
		}
	}
}
