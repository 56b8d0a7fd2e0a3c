package server

import (
	"encoding/json"
	"testing"
)

// TestAppendJSONString holds the fast path to json.Marshal's output, byte for byte.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "t_01JDXYZ", "c_ABCdef0123456789", `quote"d`, `back\slash`, "<tag>&amp;",
		"tab\there", "nul\x00", "é", "\u2028", "\xff invalid", "del\x7f",
	} {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want x%s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("t_01JDXYZ")
	f.Add("<\"\\\x00é")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}
