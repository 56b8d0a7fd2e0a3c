package llmstub

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		text       string
		wantFailed bool
	}{
		{`{"terms":[]}`, false},
		{`{"rows":[[1]],"error":null}`, false},
		{`{"error":false}`, false},
		{`[1,2]`, false},
		{`42`, false},
		{`Refused (forbidden): bob may not read oncall_pay`, true},
		{`SQL logic error: no such column`, true},
		{``, true},
		{`{"error":"bad sql"}`, true},
		{`{"error":{"code":"forbidden"}}`, true},
		{`{"is_error":true,"text":"x"}`, true},
		{`{"isError":true}`, true},
		{`{"is_error":false}`, false},
		{`{"a":1} trailing`, true},
	}
	for _, tt := range tests {
		if _, got := classify(tt.text); got != tt.wantFailed {
			t.Errorf("classify(%q) failed=%v, want %v", tt.text, got, tt.wantFailed)
		}
	}
}

func TestIsEmpty(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{`null`, true},
		{`""`, true},
		{`[]`, true},
		{`{}`, true},
		{`{"query":"churn","terms":[]}`, true},
		{`{"query":"churn","terms":null}`, true},
		{`{"sql":"x","columns":["n"],"rows":[],"row_count":0}`, true},
		{`{"tables":[]}`, true},
		{`{"query":"incident","terms":[{"term":"incident"}]}`, false},
		{`{"sql":"x","columns":["n"],"rows":[[0]],"row_count":1}`, false},
		{`{"term":"incident","definition":"d"}`, false},
		{`[0]`, false},
		{`0`, false},
	}
	for _, tt := range tests {
		v, failed := classify(tt.text)
		if failed {
			t.Fatalf("classify(%q) failed", tt.text)
		}
		if got := isEmpty(v); got != tt.want {
			t.Errorf("isEmpty(%s) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

func TestPieces(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("€uro ", 20), `{"sql":"SELECT COUNT(*) FROM incidents"}`} {
		ps := pieces(s)
		if got := strings.Join(ps, ""); got != s {
			t.Errorf("pieces(%q) rejoin to %q", s, got)
		}
		for _, p := range ps {
			if p == "" || !utf8.ValidString(p) || len(p) > pieceBytes+utf8.UTFMax {
				t.Errorf("pieces(%q): bad piece %q", s, p)
			}
		}
	}
}
