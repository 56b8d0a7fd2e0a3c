package conformance_test

import (
	"strings"
	"testing"

	"github.com/das-ask/ask/conformance"
)

func TestReportText(t *testing.T) {
	rep := conformance.Report{Results: []conformance.Result{
		{Name: "a", Status: conformance.Pass, Detail: "fine"},
		{Name: "b", Status: conformance.Fail, Detail: "expected x; saw y"},
		{Name: "c", Status: conformance.Skip, Detail: "no audit log"},
		{Name: "d", Status: conformance.Pass},
	}}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "PASS a — fine\nFAIL b — expected x; saw y\nSKIP c — no audit log\nPASS d\n2 passed, 1 failed, 1 skipped\n"
	if got := b.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if !rep.Failed() {
		t.Error("Failed() = false with a failure")
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, cfg := range []conformance.Config{
		{},
		{BaseURL: "127.0.0.1:8080/ask", Tokens: conformance.FixedTokens{}},
		{BaseURL: "http://127.0.0.1:8080/ask"},
	} {
		if _, err := conformance.Run(t.Context(), cfg); err == nil {
			t.Errorf("Run(%+v) made no error", cfg)
		}
	}
}

func TestNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range conformance.Names() {
		if seen[n] {
			t.Errorf("check %s twice", n)
		}
		seen[n] = true
	}
	if len(seen) < 28 {
		t.Errorf("%d checks, want at least 28", len(seen))
	}
}
