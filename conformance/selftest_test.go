package conformance_test

import (
	"strings"
	"testing"

	"github.com/das-ask/ask/conformance"
)

func TestTheServiceConforms(t *testing.T) {
	st := startStack(t)
	rep, err := conformance.Run(t.Context(), st.config(st.main.AskURL, st.small.AskURL))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_ = rep.WriteText(&b)
	t.Log("\n" + b.String())
	p, f, s := rep.Counts()
	if f != 0 || s != 0 || p != len(conformance.Names()) {
		t.Errorf("got %s, want all %d passed", rep.Summary(), len(conformance.Names()))
	}
}
