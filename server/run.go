package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// Causes a run's context is cancelled with; endCause maps them to the error event's kind.
var (
	errCancelled = errors.New("ask cancelled by its caller")
	errTimeout   = errors.New("ask deadline passed")
	errShutdown  = errors.New("ask service shutting down")
	errReturned  = errors.New("runner returned")
	// errEndedElsewhere: another replica ended the log (a cancel it received, or it found
	// this replica's lease lapsed); the shared store refuses this replica's appends.
	errEndedElsewhere = errors.New("ask ended by another replica")
)

// supervisorBranch is the one branch the service opens and closes around every run.
const supervisorBranch = "b1"

// tailEvents is how many events end a log: branch close, terminal, done.
const tailEvents = 3

// run is one ticket's run: it owns the ticket's seq and appends every event of its log. The
// log ends exactly once (end), whichever comes first: the runner returning, cancel, the
// deadline or shutdown; after that every Emitter call is ignored.
type run struct {
	store     store.Store
	log       *slog.Logger
	ticket    string
	conv      string
	question  string
	maxEvents int
	started   time.Time
	onEnd     func(*run)

	cancel context.CancelCauseFunc // set before the run starts
	// ctx is the run's context: once it is done the Emitter ignores everything, even before
	// end has run (a runner that saw ctx.Done must not get an event in).
	ctx context.Context

	mu         sync.Mutex
	ended      bool
	seq        int64
	opened     bool
	nonStep    int // non-step events in the log, accepted included
	dropped    int // runner events refused because the log's non-step share was full
	steps      int64
	modelCalls int64
	inTokens   int64
	outTokens  int64
}

// appendLocked encodes and appends one event; r.mu is held. It reports lost when the store
// refused the event because the log was ended elsewhere (a shared store's fencing): the caller
// then calls endedElsewhere once r.mu is released.
func (r *run) appendLocked(typ gen.EventType, body any) (lost bool) {
	if typ != gen.EventTypeStep && r.nonStep >= r.maxEvents-tailEvents {
		// Only steps may be evicted, so a runner that emits more non-step events than the
		// bound allows loses the excess here, at emission (no seq is spent on them).
		r.dropped++
		if r.dropped == 1 {
			r.log.Warn("event log full of non-step events; dropping runner events", "ticket", r.ticket, "type", string(typ))
		}
		return false
	}
	ev, err := encodeEvent(envelope{seq: r.seq + 1, ticket: r.ticket, conv: r.conv, ts: time.Now(), typ: typ}, body)
	if err != nil {
		r.log.Error("event not encodable", "ticket", r.ticket, "type", string(typ), "err", err)
		return false
	}
	if err := r.store.Append(context.Background(), r.ticket, ev); err != nil {
		if errors.Is(err, store.ErrFinished) {
			return true
		}
		if errors.Is(err, store.ErrSeq) {
			// The store's log no longer continues this run's (a shared store that lost writes
			// in a failover): give the run up; with a shared store its lease then lapses and
			// another replica ends the log with error{interrupted}.
			r.log.Error("the ticket's log no longer continues this run; giving it up", "ticket", r.ticket, "seq", ev.Seq)
			return true
		}
		r.log.Error("event not appended", "ticket", r.ticket, "type", string(typ), "err", err)
		return false
	}
	r.seq++
	if typ != gen.EventTypeStep {
		r.nonStep++
	}
	return false
}

// endedElsewhere ends this replica's part in a log another replica has ended: nothing more
// is appended, the admission slot is released and the runner's context is cancelled.
func (r *run) endedElsewhere() {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended = true
	r.mu.Unlock()
	r.log.Info("ask ended by another replica", "ticket", r.ticket, "conversation", r.conv)
	if r.onEnd != nil {
		r.onEnd(r)
	}
	r.cancel(errEndedElsewhere)
}

// usage is what the run has cost so far, for a shared store's lease renewal.
func (r *run) usage() store.Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return store.Usage{Steps: r.steps, ModelCalls: r.modelCalls, InputTokens: r.inTokens, OutputTokens: r.outTokens}
}

// open appends the supervisor branch's open, once.
func (r *run) open() {
	r.mu.Lock()
	lost := r.openLocked()
	r.mu.Unlock()
	if lost {
		r.endedElsewhere()
	}
}

func (r *run) openLocked() (lost bool) {
	if r.ended || r.opened {
		return false
	}
	r.opened = true
	return r.appendLocked(gen.EventTypeBranch, gen.BranchBody{BranchId: supervisorBranch, Role: "supervisor", State: gen.BranchBodyStateOpen})
}

// end closes the log with out: the supervisor branch's close, the terminal event and done,
// appended together. It reports whether this call ended the log; only the first call does.
func (r *run) end(out ask.Outcome) bool {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return false
	}
	if r.openLocked() { // every log has exactly one open and one close, even one ended before it started
		r.mu.Unlock()
		r.endedElsewhere()
		return false
	}
	r.ended = true
	typ, body := terminalOf(out)
	elapsed := time.Since(r.started)
	done := gen.DoneBody{
		Outcome:      gen.DoneBodyOutcome(typ),
		Steps:        r.steps,
		ModelCalls:   r.modelCalls,
		InputTokens:  r.inTokens,
		OutputTokens: r.outTokens,
		ElapsedMs:    elapsed.Milliseconds(),
	}
	now := time.Now()
	var tail []store.Event
	for _, e := range []struct {
		typ  gen.EventType
		body any
	}{
		{gen.EventTypeBranch, gen.BranchBody{BranchId: supervisorBranch, Role: "supervisor", State: gen.BranchBodyStateClose}},
		{typ, body},
		{gen.EventTypeDone, done},
	} {
		ev, err := encodeEvent(envelope{seq: r.seq + int64(len(tail)) + 1, ticket: r.ticket, conv: r.conv, ts: now, typ: e.typ}, e.body)
		if err != nil {
			// A terminal body the runner built that will not encode: fall back to internal.
			ev, _ = encodeEvent(envelope{seq: r.seq + int64(len(tail)) + 1, ticket: r.ticket, conv: r.conv, ts: now, typ: gen.EventTypeError},
				gen.ErrorBody{Kind: gen.ErrorKindInternal, Message: "internal error"})
			r.log.Error("terminal event not encodable", "ticket", r.ticket, "err", err)
		}
		tail = append(tail, ev)
	}
	turn := ask.Turn{Question: r.question, Outcome: tail[1].Type, Text: turnText(out)}
	if err := r.store.Finish(context.Background(), r.ticket, tail, turn); errors.Is(err, store.ErrFinished) {
		// Another replica ended the log first (a shared store): its end stands.
		r.mu.Unlock()
		r.log.Info("ask ended by another replica", "ticket", r.ticket, "conversation", r.conv)
		if r.onEnd != nil {
			r.onEnd(r)
		}
		return false
	} else if err != nil {
		r.log.Error("ticket not finished", "ticket", r.ticket, "err", err)
	} else {
		r.seq += int64(len(tail))
	}
	steps := r.steps
	r.mu.Unlock()

	r.log.Info("ask ended", "ticket", r.ticket, "conversation", r.conv, "outcome", string(tail[1].Type),
		"steps", steps, "elapsed_ms", elapsed.Milliseconds())
	if r.onEnd != nil {
		r.onEnd(r)
	}
	return true
}

// stop ends the log for cause (cancel, deadline, shutdown) at once, then cancels the run's
// context so the runner stops making model calls. It does not wait for the runner.
func (r *run) stop(cause error) {
	r.end(outcomeFor(cause))
	r.cancel(cause)
}

// execute runs the runner to its end; the caller runs it on its own goroutine.
func (r *run) execute(ctx context.Context, runner ask.Runner, req ask.Request) {
	stopAfter := context.AfterFunc(ctx, func() { r.end(outcomeFor(context.Cause(ctx))) })
	defer func() {
		stopAfter()
		r.cancel(errReturned)
	}()
	r.open()
	out := r.invoke(ctx, runner, req)
	if ctx.Err() != nil {
		// The service decides the outcome of a cancelled, timed-out or shut-down run.
		out = outcomeFor(context.Cause(ctx))
	}
	r.end(out)
}

// invoke calls the runner, turning a panic into error{internal}.
func (r *run) invoke(ctx context.Context, runner ask.Runner, req ask.Request) (out ask.Outcome) {
	defer func() {
		if v := recover(); v != nil {
			// The panic value is not logged: it could hold anything the runner held, the
			// question included.
			r.log.Error("runner panicked", "ticket", r.ticket, "panic_type", fmt.Sprintf("%T", v), "stack", string(debug.Stack()))
			out = ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindInternal, Message: "internal error"}}
		}
	}()
	return runner.Run(ctx, req, emitter{r})
}

// outcomeFor is the error outcome the service appends when it ends a run for cause.
func outcomeFor(cause error) ask.Outcome {
	switch {
	case errors.Is(cause, errCancelled):
		return errOutcome(gen.ErrorKindCancelled, "the ask was cancelled")
	case errors.Is(cause, errTimeout), errors.Is(cause, context.DeadlineExceeded):
		return errOutcome(gen.ErrorKindTimeout, "the ask did not finish before its deadline")
	case errors.Is(cause, errShutdown):
		return errOutcome(gen.ErrorKindShutdown, "the service stopped before the ask finished")
	}
	return errOutcome(gen.ErrorKindInternal, "internal error")
}

func errOutcome(kind gen.ErrorKind, msg string) ask.Outcome {
	return ask.Outcome{Error: &gen.ErrorBody{Kind: kind, Message: msg}}
}

// terminalOf returns the terminal event of out. An outcome with no field set, or more than
// one, is error{internal}.
func terminalOf(out ask.Outcome) (gen.EventType, any) {
	n := 0
	var typ gen.EventType
	var body any
	if out.Answer != nil {
		n, typ, body = n+1, gen.EventTypeAnswer, out.Answer
	}
	if out.Abstention != nil {
		n, typ, body = n+1, gen.EventTypeAbstention, out.Abstention
	}
	if out.Refusal != nil {
		n, typ, body = n+1, gen.EventTypeRefusal, out.Refusal
	}
	if out.Error != nil {
		n, typ, body = n+1, gen.EventTypeError, out.Error
	}
	if n != 1 {
		return gen.EventTypeError, gen.ErrorBody{Kind: gen.ErrorKindInternal, Message: "internal error"}
	}
	return typ, body
}

// turnText is what a conversation remembers of a run's outcome.
func turnText(out ask.Outcome) string {
	typ, body := terminalOf(out)
	switch b := body.(type) {
	case *gen.AnswerBody:
		return b.Text
	case *gen.AbstentionBody:
		// The model's own words (a clarifying question) are what the next turn answers.
		if b.Text != nil && *b.Text != "" {
			return *b.Text
		}
		if len(b.Terms) == 0 && (b.Sources == nil || len(*b.Sources) == 0) {
			return "abstained: nothing was looked up"
		}
		if len(b.Terms) == 0 {
			return "abstained: nothing found to answer from"
		}
		return "abstained: the catalog had nothing for " + strings.Join(b.Terms, ", ")
	case *gen.RefusalBody:
		return "refused: " + b.Tool + " on " + b.Source + " refused (" + b.Reason + ")"
	case *gen.ErrorBody:
		return "error (" + string(b.Kind) + "): " + b.Message
	case gen.ErrorBody:
		return "error (" + string(b.Kind) + "): " + b.Message
	}
	return string(typ)
}

// emitter is the ask.Emitter a runner reports through.
type emitter struct{ r *run }

// closedLocked reports whether the run takes no more events; r.mu is held.
func (r *run) closedLocked() bool { return r.ended || r.ctx.Err() != nil }

var _ ask.Emitter = emitter{}

func (e emitter) Branch(b gen.BranchBody) {
	if b.BranchId == supervisorBranch {
		return // the service opens and closes the supervisor branch itself
	}
	e.emit(gen.EventTypeBranch, b)
}

func (e emitter) Step(s gen.StepBody) { e.emit(gen.EventTypeStep, s) }

func (e emitter) Milestone(m gen.MilestoneBody) { e.emit(gen.EventTypeMilestone, m) }

// emit appends one event the runner reported, unless the run has ended. A step counts towards
// done.steps whether or not its event is later evicted. If the append finds that another replica
// ended the run, the run stops here too.
func (e emitter) emit(typ gen.EventType, body any) {
	e.r.mu.Lock()
	if e.r.closedLocked() {
		e.r.mu.Unlock()
		return
	}
	if typ == gen.EventTypeStep {
		e.r.steps++
	}
	lost := e.r.appendLocked(typ, body)
	e.r.mu.Unlock()
	if lost {
		e.r.endedElsewhere()
	}
}

func (e emitter) ModelCall(u ask.Usage) {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	if e.r.closedLocked() {
		return
	}
	e.r.modelCalls++
	e.r.inTokens += u.InputTokens
	e.r.outTokens += u.OutputTokens
}
