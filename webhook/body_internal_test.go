package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// bigAnswer is a finished ticket whose answer's rows, and its divergence's, are each larger
// than limit bytes.
func bigAnswer(t *testing.T, limit int) store.Ticket {
	t.Helper()
	rows := func(v string) gen.ResultSet {
		rs := gen.ResultSet{Columns: []string{"team", "n"}}
		for i := 0; i*20 < limit; i++ {
			rs.Rows = append(rs.Rows, []any{strings.Repeat(v, 12), i})
		}
		return rs
	}
	result, withheld := rows("a"), rows("b")
	ans := gen.AnswerEvent{Seq: 9, Ticket: "t1", ConversationId: "c1", Type: gen.AnswerEventTypeAnswer, Text: "42 with the catalog",
		Result: &result, Caveats: []gen.Caveat{}, Path: gen.AnswerPath{Detail: "warehouse", Speed: gen.AnswerPathSpeedFull},
		Provenance: []gen.Provenance{}, Sql: []string{"select 1"},
		Divergence: &gen.Divergence{Result: withheld, Sql: []string{"select 2"}, Without: []string{"churn"}}}
	term, err := json.Marshal(ans)
	if err != nil {
		t.Fatal(err)
	}
	return store.Ticket{ID: "t1", ConversationID: "c1", LastSeq: 10,
		Terminal: &store.Event{Seq: 9, Type: gen.EventTypeAnswer, Data: term},
		Done:     &store.Event{Seq: 10, Type: gen.EventTypeDone, Data: []byte(`{"seq":10,"type":"done","ts":"2026-01-01T00:00:00Z"}`)},
	}
}

// An answer too large to deliver whole is delivered without its rows, its divergence's among
// them: found by an audit, an answer whose divergence (the same question without the catalog,
// as many rows) alone passed MaxBodyBytes failed body_too_large, and its receiver never heard
// that the run had ended, where the page promises the end without the rows.
func TestBodyTooLargeLeavesTheRowsOut(t *testing.T) {
	const limit = 4096
	d, err := New(Options{Config: Config{Allow: []string{"https://h.example/"}, Secrets: []string{testSecret}, MaxBodyBytes: limit},
		Outbox: store.NewMemoryOutbox(), Tickets: finished{}})
	if err != nil {
		t.Fatal(err)
	}
	tk := bigAnswer(t, limit)
	b, _, err := d.body(tk)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	if len(b) > limit {
		t.Fatalf("body is %d bytes, over %d", len(b), limit)
	}
	var got gen.WebhookDelivery
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ans, err := got.Terminal.AsAnswerEvent()
	if err != nil {
		t.Fatal(err)
	}
	if ans.Result != nil {
		t.Errorf("the answer's rows were kept: %d", len(ans.Result.Rows))
	}
	if ans.Divergence == nil || len(ans.Divergence.Result.Rows) != 0 || !ans.Divergence.Result.Truncated ||
		len(ans.Divergence.Result.Columns) != 2 || ans.Divergence.Without[0] != "churn" {
		t.Errorf("divergence %+v: want its columns and what it did without, no rows, truncated", ans.Divergence)
	}
	if ans.Text != "42 with the catalog" || got.Ticket != "t1" || string(got.Done.Type) != "done" {
		t.Errorf("the rest of the end is not all there: %s", b)
	}
	// Only as much as is needed goes: a limit the answer fits without its own rows keeps the
	// divergence's.
	d.cfg.MaxBodyBytes = len(b) + 2*limit
	if b, _, err = d.body(tk); err != nil || strings.Count(string(b), `"bbbbbbbbbbbb"`) == 0 || strings.Contains(string(b), `"aaaaaaaaaaaa"`) {
		t.Errorf("with room for the divergence's rows: %v, %d bytes", err, len(b))
	}
}
