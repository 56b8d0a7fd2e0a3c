package conformance

import (
	"strings"
	"testing"
)

func TestRedactRemovesQuestionsAndTokens(t *testing.T) {
	cfg, err := Config{BaseURL: "http://127.0.0.1:1/ask", Tokens: FixedTokens{}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := &session{cfg: cfg}
	q := cfg.Questions.Refusal
	got := s.redact("saw " + q + " and eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhIn0.c2ln in the body")
	if strings.Contains(got, q) || strings.Contains(got, "eyJ") {
		t.Errorf("redact left a question or a token: %q", got)
	}
	if want := "saw <question> and <token> in the body"; got != want {
		t.Errorf("redact = %q, want %q", got, want)
	}
}
