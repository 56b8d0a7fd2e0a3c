package server_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// TestUnencodableTerminal: a runner's terminal body that will not encode (a NaN among its
// rows) ends the log error{internal}, and everything that tells the outcome says so alike: the
// done event, the status and the conversation's turn. done.outcome read "answer" after an
// error terminal event, and the turn recorded an error whose text was the answer's.
func TestUnencodableTerminal(t *testing.T) {
	var history []ask.Turn
	h := newHarness(t, server.Options{Runner: ask.RunnerFunc(func(_ context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
		if len(req.History) > 0 {
			history = req.History
			return ask.Outcome{Answer: answer("second")}
		}
		a := answer("the figure is NaN")
		a.Result = &gen.ResultSet{Columns: []string{"v"}, Rows: [][]any{{math.NaN()}}}
		return ask.Outcome{Answer: a}
	})})
	cid := h.conv(alice)
	tk := h.ask(alice, cid, "what is the figure?")
	evs := h.events(alice, tk)
	if len(evs) < 2 {
		t.Fatalf("events: %+v", evs)
	}
	term, done := evs[len(evs)-2], evs[len(evs)-1]
	if term.Event != string(gen.EventTypeError) || done.Event != string(gen.EventTypeDone) {
		t.Fatalf("the log ends %s, %s; want error, done", term.Event, done.Event)
	}
	var d gen.DoneEvent
	if err := json.Unmarshal(done.Data, &d); err != nil {
		t.Fatal(err)
	}
	if string(d.Outcome) != string(gen.EventTypeError) {
		t.Errorf("done.outcome = %q after an error terminal event, want error", d.Outcome)
	}
	st := h.status(alice, tk)
	if st.StatusCode() != http.StatusOK || st.JSON200.State != gen.AskStateError || st.JSON200.Done == nil ||
		string(st.JSON200.Done.Outcome) != string(gen.EventTypeError) {
		t.Errorf("status: %d %s", st.StatusCode(), st.Body)
	}
	h.events(alice, h.ask(alice, cid, "and then?"))
	if len(history) != 1 || history[0].Outcome != gen.EventTypeError || history[0].Text == "the figure is NaN" {
		t.Errorf("the turn recorded: %+v; want the error the log ended with", history)
	}
}

// TestUnknownErrorKind: a runner's error outcome whose kind is not one of the contract's (a
// closed enum) ends the log error{internal}, keeping the runner's message, as any runner
// outcome that breaks the contract does; kind "quota" reached clients as it was.
func TestUnknownErrorKind(t *testing.T) {
	h := newHarness(t, server.Options{Runner: ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
		return ask.Outcome{Error: &gen.ErrorBody{Kind: "quota", Message: "the provider's quota is spent"}}
	})})
	evs := h.events(alice, h.ask(alice, h.conv(alice), "anything left?"))
	term := evs[len(evs)-2]
	var e gen.ErrorEvent
	if err := json.Unmarshal(term.Data, &e); err != nil {
		t.Fatal(err)
	}
	if term.Event != string(gen.EventTypeError) || !e.Kind.Valid() || e.Kind != gen.ErrorKindInternal || e.Message != "the provider's quota is spent" {
		t.Errorf("terminal %s %+v; want error{internal} with the runner's message", term.Event, e)
	}
}
