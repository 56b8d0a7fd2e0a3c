package conformance_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/das-ask/ask/conformance"
)

func TestTheServiceConforms(t *testing.T) {
	st := startStack(t)
	rep, err := conformance.Run(t.Context(), st.config(st.main.AskURL, st.small.AskURL, st.limits.AskURL))
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

// With fixed tokens and no audit log, what needs minting or the audit log is skipped with the
// reason, never passed.
func TestWhatCannotBeDoneIsSkipped(t *testing.T) {
	st := startStack(t)
	ctx := t.Context()
	mint := conformance.IdPTokens{URL: st.main.IdPURL}
	a, err := mint.Token(ctx, conformance.A, conformance.Valid)
	if err != nil {
		t.Fatal(err)
	}
	b, err := mint.Token(ctx, conformance.B, conformance.Valid)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.config(st.main.AskURL, "", "")
	cfg.Tokens, cfg.AuditURL = conformance.FixedTokens{TokenA: a, TokenB: b}, ""
	cfg.Only = regexp.MustCompile(`^(auth\.expired-bearer|auth\.wrong-audience|audit\.step-ms|audit\.every-call-streamed|auth\.forged-bearer|overflow\.only-steps-evicted|limits\..*|run\.deadline-timeout|ticket\.ttl-expiry|ownership\.tenant)$`)
	rep, err := conformance.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]conformance.Status{
		"auth.forged-bearer":          conformance.Pass,
		"auth.expired-bearer":         conformance.Skip,
		"auth.wrong-audience":         conformance.Skip,
		"audit.step-ms":               conformance.Skip,
		"overflow.only-steps-evicted": conformance.Skip,
		"audit.every-call-streamed":   conformance.Skip,
		"limits.body-413":             conformance.Skip,
		"limits.inflight-429":         conformance.Skip,
		"limits.capacity-503":         conformance.Skip,
		"run.deadline-timeout":        conformance.Skip,
		"ticket.ttl-expiry":           conformance.Skip,
		"ownership.tenant":            conformance.Skip,
	}
	for name, status := range want {
		res, ok := rep.Result(name)
		if !ok || res.Status != status || (status == conformance.Skip && res.Detail == "") {
			t.Errorf("%s: %s %q, want %s with a reason", name, res.Status, res.Detail, status)
		}
	}
}
