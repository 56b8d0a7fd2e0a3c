package client

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/das-ask/ask/gen"
)

// OutcomeKind is how a run ended. A caller switches on it instead of comparing type strings;
// the four kinds are different things and must be said differently.
type OutcomeKind int

const (
	// NotTerminal: the event does not end the run (or the run has not ended yet).
	NotTerminal OutcomeKind = iota
	// Answer: the run answered.
	Answer
	// Abstention: the run looked and could not answer; a catalog gap, not a failure.
	Abstention
	// Refusal: a source refused a call; a security event, never "no results".
	Refusal
	// Error: the run failed (cancelled, timed out, transport, model, internal…).
	Error
)

// String names the kind as the contract does: "answer", "abstention", "refusal" or "error";
// NotTerminal is "none".
func (k OutcomeKind) String() string {
	switch k {
	case Answer:
		return "answer"
	case Abstention:
		return "abstention"
	case Refusal:
		return "refusal"
	case Error:
		return "error"
	}
	return "none"
}

// Outcome is how a run ended: Kind says which of the four pointers is set.
type Outcome struct {
	// Kind is how the run ended; NotTerminal when the events ended before its terminal event
	// (Collect then returns an error).
	Kind OutcomeKind
	// Answer is the answer event when Kind is Answer, else nil.
	Answer *gen.AnswerEvent
	// Abstention is the abstention event when Kind is Abstention, else nil.
	Abstention *gen.AbstentionEvent
	// Refusal is the refusal event when Kind is Refusal, else nil.
	Refusal *gen.RefusalEvent
	// Error is the error event when Kind is Error, else nil: its Kind says why (cancelled,
	// timeout, …).
	Error *gen.ErrorEvent
	// Done is the run's usage, always present in a complete Outcome.
	Done gen.DoneEvent
	// MissedSteps is how many step events the stream could not deliver (see Event.MissedSteps).
	MissedSteps int64
}

// ErrIncomplete is returned by Collect when the events ended without a terminal event and done.
var ErrIncomplete = errors.New("client: the event stream ended before the run's outcome and done")

// Collect reads events to the end and returns the run's outcome. It returns the stream's error,
// if any, or ErrIncomplete when the events end without both a terminal event and done.
func Collect(events iter.Seq2[Event, error]) (Outcome, error) {
	var out Outcome
	sawDone := false
	for ev, err := range events {
		if err != nil {
			return out, err
		}
		out.add(ev)
		if ev.IsDone() {
			sawDone = true
		}
	}
	if !sawDone || out.Kind == NotTerminal {
		return out, ErrIncomplete
	}
	return out, nil
}

// add folds one event into the outcome.
func (o *Outcome) add(ev Event) {
	switch v := ev.Value.(type) {
	case gen.AnswerEvent:
		o.Kind, o.Answer = Answer, &v
	case gen.AbstentionEvent:
		o.Kind, o.Abstention = Abstention, &v
	case gen.RefusalEvent:
		o.Kind, o.Refusal = Refusal, &v
	case gen.ErrorEvent:
		o.Kind, o.Error = Error, &v
	case gen.DoneEvent:
		o.Done, o.MissedSteps = v, ev.MissedSteps
	}
}

// Wait follows a ticket's events to done and returns its outcome (see Collect). Leaving early
// (ctx ending) does not cancel the run; see AskAndWait for a call that does.
func (c *Client) Wait(ctx context.Context, ticket string) (Outcome, error) {
	return Collect(c.Events(ctx, ticket, EventsOptions{}))
}

// cancelTimeout bounds the cancel AskAndWait sends after its caller has gone.
const cancelTimeout = 5 * time.Second

// AskAndWait asks in a conversation and waits for the outcome. If ctx ends first, the caller
// has gone and the run is spending their quota: AskAndWait cancels the ticket (a request of its
// own, bounded by a few seconds) before it returns ctx's error. The ticket is returned whenever
// one was issued.
func (c *Client) AskAndWait(ctx context.Context, conversationID, question string) (gen.Ticket, Outcome, error) {
	tk, err := c.Ask(ctx, conversationID, question)
	if err != nil {
		return gen.Ticket{}, Outcome{}, err
	}
	out, err := c.Wait(ctx, tk.Ticket)
	if err != nil && ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		if _, cerr := c.Cancel(cctx, tk.Ticket); cerr != nil {
			c.log.Warn("cancel after the caller left failed", "ticket", tk.Ticket, "err", cerr.Error())
		}
	}
	return tk, out, err
}
