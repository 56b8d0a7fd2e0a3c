package server

import (
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// endOf is the End a log ended with tail (as finalEvents built it for out) reports.
func endOf(tail []store.Event, out ask.Outcome, u store.Usage, elapsed time.Duration, evicted int) End {
	typ := tail[len(tail)-2].Type
	e := End{Outcome: typ, Evicted: evicted, Elapsed: elapsed, Done: gen.DoneBody{
		Outcome: gen.DoneBodyOutcome(typ), Steps: u.Steps, ModelCalls: u.ModelCalls,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ElapsedMs: elapsed.Milliseconds(),
	}}
	for _, ev := range tail {
		e.Tail = append(e.Tail, ev.Type)
	}
	if typ == gen.EventTypeError {
		e.Error = &gen.ErrorBody{Kind: gen.ErrorKindInternal, Message: "internal error"}
		if _, body := out.Event(); body != nil {
			if b, ok := body.(*gen.ErrorBody); ok {
				e.Error = b
			}
		}
	}
	return e
}

// finalEvents is the one builder of a log's last events (endOfLog's list: the close of every
// branch still open, the supervisor branch's close, the terminal event out stands for, and done
// with usage), numbered from after (the log's last seq) on, all stamped now. The run's own end
// (run.end) and another replica's end of a run it does not hold (endRemote) both append what
// it returns, so a log ends the same way whoever ends it. A terminal body that will not encode
// (a runner's answer with a NaN among its rows) makes the whole end error{internal}, done's
// outcome included (internalOutcome); bad reports it (for the caller's log line, and so that
// the caller records the turn of that outcome too). typ is the terminal event's type.
func finalEvents(env envelope, after int64, closes []gen.BranchBody, out ask.Outcome, u store.Usage, elapsed time.Duration) (tail []store.Event, typ gen.EventType, bad error) {
	typ, body := out.Event()
	done := gen.DoneBody{
		Outcome: gen.DoneBodyOutcome(typ), Steps: u.Steps, ModelCalls: u.ModelCalls,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ElapsedMs: elapsed.Milliseconds(),
	}
	for i, e := range endOfLog(closes, typ, body, done) {
		env.seq, env.typ = after+int64(i)+1, e.typ
		ev, err := encodeEvent(env, e.body)
		if err != nil {
			// Only a runner-built terminal body can fail to encode: the end is internal's, done
			// and all, which always encodes.
			tail, _, _ = finalEvents(env, after, closes, internalOutcome, u, elapsed)
			return tail, gen.EventTypeError, err
		}
		tail = append(tail, ev)
	}
	return tail, tail[len(tail)-2].Type, nil
}

// internalOutcome is the end of a run whose own terminal body would not encode (finalEvents).
var internalOutcome = errOutcome(gen.ErrorKindInternal, "internal error")
