package agent

import (
	"encoding/json"
	"strings"
	"testing"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent/source"
)

// TestDefinitionQuotingTheQuestionIsWithheld: a catalog's define tool may answer the term it
// was asked for by quoting it back (a fuzzy catalog: "no exact entry for …; closest: …"), and a
// model may ask it for the question verbatim. The SQL, a result's columns and values, the prose
// and a step's args all stand as "[the question]" then; the answer's provenance and caveats,
// built from the definition, must too, or the answer event carries the question past them (to
// a webhook, and to disk with a durable store, which seals only the accepted event and the
// turns). Found by an outside audit: a sentinel in the question reached the answer event.
func TestDefinitionQuotingTheQuestionIsWithheld(t *testing.T) {
	const q = "what does the blast radius of checkout mean"
	l := newLedger(ask.Request{Question: q})
	def := map[string]any{
		"term":       q,
		"definition": "No entry for '" + q + "'; closest: blast radius.",
		"source":     "Catalog (asked: " + q + ")",
		"caveats":    []string{"Asked for " + strings.ToUpper(q) + ", answered for blast radius.", "Counts services."},
	}
	data, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	l.record(source.Tool{Name: "define_term", Source: "demo", Role: source.RoleCatalogDefine},
		source.Result{Outcome: source.OK, Data: data})
	out := l.outcome("It is how far a failure spreads.")
	if out.Answer == nil || len(out.Answer.Provenance) != 1 || len(out.Answer.Caveats) != 2 {
		t.Fatalf("outcome = %+v, want an answer with one definition and its two caveats", out)
	}
	b, err := json.Marshal(out.Answer)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(b)), q) {
		t.Errorf("the answer carries the question: %s", b)
	}
	if c := out.Answer.Caveats[1]; c.Text != "Counts services." {
		t.Errorf("caveat = %+v, want a caveat that holds no question kept as it is", c)
	}
}
