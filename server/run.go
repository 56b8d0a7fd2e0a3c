package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// Causes a run's context is cancelled with; endCause maps them to the error event's kind.
var (
	errCancelled = errors.New("ask cancelled by its caller")
	// errTimeout is a deadline (errors.Is context.DeadlineExceeded), so what watches the run's
	// context (obs's model and tool metrics) reads its end as one by context.Cause.
	errTimeout  = fmt.Errorf("ask deadline passed: %w", context.DeadlineExceeded)
	errShutdown = errors.New("ask service shutting down")
	errReturned = errors.New("runner returned")
	// errEndedElsewhere: another replica ended the log (a cancel it received, or it found
	// this replica's lease lapsed); the shared store refuses this replica's appends.
	errEndedElsewhere = errors.New("ask ended by another replica")
	// errStoreLost: the store stayed away past the lease, or no longer holds this run's log
	// as written (a restart that lost writes): the run stops; a replica ends the log with
	// error{interrupted} once the store takes writes again.
	errStoreLost = errors.New("ask's log lost to the store")
)

// Retrying a write the store did not take: the first wait, and the longest.
const (
	storeBackoffMin = 20 * time.Millisecond
	storeBackoffMax = time.Second
)

// supervisorBranch is the one branch the service opens and closes around every run.
const supervisorBranch = "b1"

// The outbox's bounds with a shared store: the events one AppendBatch carries at most, and the
// events an emitter may leave waiting before it waits for them to be written.
const (
	maxBatch  = 128
	maxOutbox = 256
)

// run is one ticket's run: it owns the ticket's seq and appends every event of its log. The
// log ends exactly once (end), whichever comes first: the runner returning, cancel, the
// deadline or shutdown; after that every Emitter call is ignored.
//
// No event is silently lost. Each event gets its seq once, when it is emitted, and joins the
// run's outbox; the outbox is written to the store in order, one writer at a time (wmu), every
// event queued in one call (store.AppendBatch, up to maxBatch), and a batch the store did not
// take (store.ErrUnavailable) stays at the head of the outbox and is written again, with
// backoff, until the store takes it. With a store in this process the emitting goroutine
// writes its event itself, at once. With a shared store (a round trip away) the run's writer
// goroutine writes while the runner goes on, so events emitted while a call is in flight go
// together in the next; an emitter that finds maxOutbox events waiting waits for them to be
// written, so a run whose store is away stops too, holding at most maxOutbox events. Only
// three things end the writing early, each of which ends the run
// (it is lost: the runner is cancelled and its slot released): the log was ended elsewhere,
// the store no longer holds the log as written, or nothing could be written for longer than
// the lease (the store stayed away), after which a replica that can write again ends the log
// with error{interrupted}. So done.steps, counted at emission, is always the steps carried plus
// the steps the store evicted at the bound.
type run struct {
	store     store.Store
	log       *slog.Logger
	ticket    string
	conv      string
	question  string
	maxEvents int
	started   time.Time // the ticket's creation as the clock read it, monotonic reading and all
	created   time.Time // the ticket's created_at (the accepted event's ts), wall clock only
	onEnd     func(*run)
	// recoverLost ends, once the store is back, a run lost to a store that stayed away past
	// its lease (Server.recoverLost); nil: the run only reports it.
	recoverLost func(*run)
	// restoreLater restores, once the store takes it, a run whose log the store lost and
	// whose restore the store refused for longer than the lease (Server.restoreLater); nil: the
	// run only reports it.
	restoreLater func(*run)
	hooks        Hooks
	// lease bounds how long the run waits for a store that does not take its writes.
	lease time.Duration
	// admitted is what CreateTicket registered: with a shared store that loses part of the
	// log (a restart), the runner restores the ticket from it rather than let it vanish.
	admitted store.NewTicket
	// reWebhook, when the ask named a webhook, registers its delivery again before a restore
	// (Server.reWebhook): the store that lost the ticket lost the delivery with it.
	reWebhook func(context.Context) error
	// onFinished, when set, is told of the end the run wrote (Server.runFinished), to write it
	// again if the store loses it.
	onFinished func(r *run, tail []store.Event, turn ask.Turn)
	// beforeRestore, when set, runs before the run restores a log the store lost
	// (Server.reassertFirst: the ends this replica wrote before go back first).
	beforeRestore func()
	// lastWrite is when the last write the store took was sent (UnixNano): the store's lease
	// runs from no earlier than that.
	lastWrite atomic.Int64
	released  sync.Once
	// wmu is held by the one goroutine writing the outbox (and then the tail) to the store.
	wmu sync.Mutex
	// async: the outbox is written by a writer goroutine (a shared store), not by the emitter.
	async bool
	// drainers are the writer goroutines started; the run's goroutine waits for them.
	drainers sync.WaitGroup

	cancel context.CancelCauseFunc // set before the run starts
	// ctx is the run's context: once it is done the Emitter ignores everything, even before
	// end has run (a runner that saw ctx.Done must not get an event in).
	ctx context.Context

	mu       sync.Mutex
	ended    bool
	branches openBranches
	lost     bool          // nothing more is written: the run was ended elsewhere or lost to the store
	writing  bool          // a writer goroutine is started and will write what the outbox holds
	outbox   []store.Event // emitted, seq assigned, not yet taken by the store; in seq order
	reports  []appended    // the outbox's events as emitted, for Hooks.Appended; in step with outbox
	tail     []store.Event // the log's end once sealed, until written
	turn     ask.Turn
	// unwritten is the sealed end whose write found the log lost (a restart): the store may
	// have taken it first, its reply lost, and a reader read it; a restore writes it again
	// (restoreVia), not another.
	unwritten  []store.Event
	unrun      bool  // the end records no turn (discard)
	sealed     End   // what Hooks.Ended reports once tail is written
	seq        int64 // the last seq assigned
	opened     bool
	steps      int64
	evicted    int64 // steps the store reported evicting at the bound, for the end's log line
	modelCalls int64
	inTokens   int64
	outTokens  int64
}

// now is an event's ts: the ticket's created_at plus the time since on the monotonic clock. A
// step of the wall clock during the run (NTP stepping it, a VM resumed from suspend) moves no
// event's ts: an audit stepped a replica's clock back an hour mid-run, and the run's later
// events read an hour before its created_at and before the events of lower seq, where ts never
// decreases along seq (conformance events.ts-ordered). So ts run on from created_at by the
// run's true elapsed time, and done's is created_at plus its elapsed_ms.
func (r *run) now() time.Time {
	return r.created.Add(time.Since(r.started))
}

// enqueueLocked encodes one event with the next seq and adds it to the outbox; r.mu is held.
// The caller then calls flush, once r.mu is released, to write it.
func (r *run) enqueueLocked(typ gen.EventType, body any) {
	// Every event is appended: only steps are ever evicted, and nothing is dropped at emission.
	// A log whose non-step events alone pass MaxEvents (a bound set below what one run
	// emits) holds them all; the store then has no step left to evict (see the package doc).
	ev, err := encodeEvent(envelope{seq: r.seq + 1, ticket: r.ticket, conv: r.conv, ts: r.now(), typ: typ}, body)
	if err != nil {
		r.log.Error("event not encodable", "ticket", r.ticket, "type", string(typ), "err", err)
		return
	}
	r.seq++
	if typ == gen.EventTypeStep {
		r.steps++
	}
	r.outbox = append(r.outbox, ev)
	r.reports = append(r.reports, appended{typ: typ, body: body})
}

// appended is an outbox event as the runner emitted it, for Hooks.Appended once the store
// takes it.
type appended struct {
	typ  gen.EventType
	body any
}

// flush writes the outbox to the store, in order, and returns once it is empty or the run is
// lost. Whoever holds wmu writes every event queued meanwhile too, so a goroutine that gets
// wmu after another finds its event already written.
func (r *run) flush() {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.flushLocked()
}

// emitted has the events just enqueued written (r.mu released): at once by the caller with a
// store in this process; else by a writer goroutine, started unless one is, while the caller
// goes on, and by the caller too (waiting) when the outbox holds maxOutbox events.
func (r *run) emitted() {
	if !r.async {
		r.flush()
		return
	}
	r.mu.Lock()
	full := len(r.outbox) >= maxOutbox
	start := !r.writing && !r.lost && len(r.outbox) > 0
	if start {
		r.writing = true
		r.drainers.Add(1)
	}
	r.mu.Unlock()
	if start {
		go func() {
			defer r.drainers.Done()
			r.flush()
		}()
	}
	if full {
		r.flush()
	}
}

// flushLocked is flush with wmu held. It reports false when the run is lost.
func (r *run) flushLocked() bool {
	for {
		r.mu.Lock()
		if r.lost || len(r.outbox) == 0 {
			r.writing = false
			lost := r.lost
			r.mu.Unlock()
			return !lost
		}
		batch := r.outbox[:min(len(r.outbox), maxBatch):min(len(r.outbox), maxBatch)]
		r.mu.Unlock()
		var evicted int
		if err := r.write(func(ctx context.Context) (err error) {
			evicted, err = r.store.AppendBatch(ctx, r.ticket, batch)
			return err
		}); err != nil {
			r.lose(err, batch[0].Seq)
			return false
		}
		r.mu.Lock()
		if r.lost {
			// Ended elsewhere (or the store lost the log) while this batch was being written:
			// the end dropped the outbox, so there is nothing left to trim or report.
			r.writing = false
			r.mu.Unlock()
			return false
		}
		r.evicted += int64(evicted)
		n := len(batch)
		reps := slices.Clone(r.reports[:n])
		clear(r.outbox[:n])
		clear(r.reports[:n])
		r.outbox, r.reports = r.outbox[n:], r.reports[n:]
		r.mu.Unlock()
		if h := r.hooks.Appended; h != nil {
			for i, rep := range reps {
				ev := 0
				if i == n-1 {
					ev = evicted // the store counts a batch's evictions, not each event's
				}
				h(r.ticket, rep.typ, rep.body, ev)
			}
		}
	}
}

// write runs op until the store takes it, answers for good, or has not taken a write of this
// run for longer than the lease (errStoreLost). Every store write is idempotent under a retry
// with the same arguments, so a write whose answer was lost is simply written again: the store
// answers ok if the first attempt took.
func (r *run) write(op func(context.Context) error) error {
	backoff := storeBackoffMin
	for {
		sent := time.Now()
		err := op(context.Background())
		if err == nil {
			r.wrote(sent)
			return nil
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return err
		}
		if time.Since(time.Unix(0, r.lastWrite.Load())) > r.lease {
			return fmt.Errorf("%w: %w", errStoreLost, err)
		}
		// Full jitter, so that runs retrying a store that came back do not arrive together.
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		<-t.C
		backoff = min(2*backoff, storeBackoffMax)
	}
}

// wrote records that the store took a write of this run sent at sent.
func (r *run) wrote(sent time.Time) {
	for {
		old := r.lastWrite.Load()
		if sent.UnixNano() <= old || r.lastWrite.CompareAndSwap(old, sent.UnixNano()) {
			return
		}
	}
}

// lose ends the run because a write failed for good: err says why (another replica ended the
// log, the store no longer holds it as written, the store stayed away past the lease). Nothing
// more is written; the runner is cancelled and its slot released.
func (r *run) lose(err error, seq int64) {
	r.mu.Lock()
	if r.lost {
		r.mu.Unlock()
		return
	}
	r.lost, r.ended = true, true
	r.outbox, r.reports, r.tail = nil, nil, nil
	r.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrFinished):
		r.log.Debug("ask ended by another replica", "ticket", r.ticket, "conversation", r.conv)
		r.reportEnd(End{Reason: "ended_elsewhere"})
	case errors.Is(err, errStoreLost):
		r.log.Warn("the store did not take this ask's events for longer than its lease; the run stops and ends as interrupted once the store is back",
			"ticket", r.ticket, "seq", seq, "err", err)
		if r.recoverLost != nil {
			r.recoverLost(r) // reports the end when there is one
		} else {
			r.reportEnd(End{Reason: "store_error"})
		}
	case errors.Is(err, store.ErrSeq), errors.Is(err, store.ErrNotFound):
		// The store's log no longer continues this run's (a restart that lost its last
		// writes, or everything): the run stops, and ends after every seq it assigned, the
		// ticket re-created if it is gone: with the end it sealed, or error{interrupted}.
		r.log.Warn("the store no longer holds this ask's log as written; ending it after the seqs it assigned", "ticket", r.ticket, "seq", seq, "err", err)
		if r.beforeRestore != nil {
			r.beforeRestore()
		}
		switch err := r.restoreVia(r.write); {
		case err == nil:
		case errors.Is(err, errStoreLost) && r.restoreLater != nil:
			// The store refused the restore past the lease (a Redis restarted empty that
			// persists while the service does not seal refuses the turn's question; one
			// still coming back refuses everything): given up here, the ticket would read
			// 404 for good, its 202 sent. Restored once the store takes it.
			r.restoreLater(r)
		default:
			r.reportEnd(End{Reason: "store_error"})
		}
	default:
		r.log.Error("the store refused this ask's event; giving the run up", "ticket", r.ticket, "seq", seq, "err", err)
		r.reportEnd(End{Reason: "store_error"})
	}
	r.release()
	r.cancel(errEndedElsewhere)
}

// restorer is a store that can end a log that no longer continues its runner's seqs
// (store.Shared.Restore; store.Memory has it too, for a refusal that only a fault of the
// service's own could cause).
type restorer interface {
	Restore(ctx context.Context, nt store.NewTicket, tail []store.Event, turn ask.Turn) error
}

// errInterruptedMessage is error{interrupted}'s message when the store no longer held the log
// as the run wrote it.
const errInterruptedMessage = "the service's store lost part of this ask's log (a restart, or a fault); the events it lost are not in the log"

// errNoRestore: the store cannot restore a log, or the run has no admission to restore from.
var errNoRestore = errors.New("the store cannot restore this ask")

// restoreVia ends a log the store lost part or all of after every seq this run assigned,
// re-creating the ticket if it is gone (store.Shared.Restore): with the end the run sealed if
// it was writing that end when it found the log lost (the store may have taken it first, its
// reply lost: a reader may have read that end, and must not read another), else, lost before
// its end, with error{interrupted} and done. The store's write is made through write (the
// run's retries, or one attempt); it answers why the log was not restored, nil when it was
// (Hooks.Ended then has the restored end, with Restored set). An interrupted end closes the
// supervisor branch only: the opens of the branches below it may be among what the store
// lost. A store that cannot restore leaves the ticket to its lease: if it still exists, a
// replica ends it once the lease lapses.
func (r *run) restoreVia(write func(func(context.Context) error) error) error {
	sh, ok := r.store.(restorer)
	if !ok || r.admitted.ID == "" {
		return errNoRestore
	}
	r.mu.Lock()
	after := r.seq
	u := store.Usage{Steps: r.steps, ModelCalls: r.modelCalls, InputTokens: r.inTokens, OutputTokens: r.outTokens}
	tail, turn, e := r.unwritten, r.turn, r.sealed
	r.mu.Unlock()
	elapsed := time.Since(r.started)
	kind := ""
	if tail == nil {
		out := errOutcome(gen.ErrorKindInterrupted, errInterruptedMessage)
		var typ gen.EventType
		var bad error
		tail, typ, bad = finalEvents(envelope{ticket: r.ticket, conv: r.conv, ts: r.now()}, after, nil, out, u, elapsed)
		if bad != nil {
			r.log.Error("interrupted end not encodable", "ticket", r.ticket, "err", bad)
			return bad
		}
		turn = ask.Turn{Question: r.question, Outcome: typ, Text: turnText(out)}
		e, kind = endOf(tail, out, u, elapsed, 0), string(gen.ErrorKindInterrupted)
	}
	if err := write(func(ctx context.Context) error { return sh.Restore(ctx, r.admitted, tail, turn) }); err != nil {
		r.log.Warn("ask not restored after the store lost its log", "ticket", r.ticket, "err", err)
		return err
	}
	// The delivery after the ticket, never before: a delivery of a ticket the store does not
	// hold (a restore still refused) is claimed, found without its ticket, and given up. The
	// run's release, or Server.restoreOnce for a restore made later, then makes it due.
	if r.reWebhook != nil {
		if err := write(r.reWebhook); err != nil {
			r.log.Warn("ask's webhook not registered again after the store lost it; its end is not delivered", "ticket", r.ticket, "err", err)
		}
	}
	if kind == "" && r.onFinished != nil {
		r.onFinished(r, tail, turn) // the end it meant to write, kept as one it wrote
	}
	e.Restored = true
	r.reportEnd(e)
	r.log.Debug("ask ended", "ticket", r.ticket, "conversation", r.conv, "outcome", string(tail[len(tail)-2].Type), "error_kind", kind,
		"steps", u.Steps, "restored", true, "elapsed_ms", elapsed.Milliseconds())
	return nil
}

// release gives the run's admission slot back, once.
func (r *run) release() {
	r.released.Do(func() {
		if r.onEnd != nil {
			r.onEnd(r)
		}
	})
}

// endedElsewhere ends this replica's part in a log another replica has ended: nothing more
// is appended, the admission slot is released and the runner's context is cancelled.
func (r *run) endedElsewhere() {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended, r.lost = true, true
	r.outbox, r.reports, r.tail = nil, nil, nil
	r.mu.Unlock()
	r.log.Debug("ask ended by another replica", "ticket", r.ticket, "conversation", r.conv)
	r.reportEnd(End{Reason: "ended_elsewhere"})
	r.release()
	r.cancel(errEndedElsewhere)
}

// endingHere reports whether the run sealed its own end (it writes it, or has written it).
func (r *run) endingHere() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended && !r.lost
}

// reportEnd calls the Ended hook.
func (r *run) reportEnd(e End) {
	if h := r.hooks.Ended; h != nil {
		h(r.ticket, e)
	}
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
	r.openLocked()
	r.mu.Unlock()
	r.flush()
}

func (r *run) openLocked() {
	if r.ended || r.opened {
		return
	}
	r.opened = true
	r.enqueueLocked(gen.EventTypeBranch, supervisorOpen)
}

// supervisorOpen is the supervisor branch's open.
var supervisorOpen = gen.BranchBody{BranchId: supervisorBranch, Role: "supervisor", State: gen.BranchBodyStateOpen}

// openedWith records that the store took ev, the supervisor branch's open at seq 2, with the
// ticket's creation (store.NewTicket.Then).
func (r *run) openedWith(ev store.Event) {
	r.mu.Lock()
	r.opened = true
	r.seq = ev.Seq
	r.mu.Unlock()
	if h := r.hooks.Appended; h != nil {
		h(r.ticket, gen.EventTypeBranch, supervisorOpen, 0)
	}
}

// end closes the log with out: the supervisor branch's close, the terminal event and done,
// written together after every event emitted before. It reports whether this call ended the
// log; only the first call does. It returns once the end is written (or the run is lost).
func (r *run) end(out ask.Outcome) bool {
	if !r.seal(out) {
		return false
	}
	r.finish()
	return true
}

// seal makes out the log's end: from now on the run takes no event. It reports whether this
// call sealed it; only the first call does. finish writes it.
func (r *run) seal(out ask.Outcome) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return false
	}
	r.openLocked() // every log has exactly one open and one close, even one ended before it started
	r.ended = true
	elapsed := time.Since(r.started)
	u := store.Usage{Steps: r.steps, ModelCalls: r.modelCalls, InputTokens: r.inTokens, OutputTokens: r.outTokens}
	tail, typ, bad := finalEvents(envelope{ticket: r.ticket, conv: r.conv, ts: r.now()}, r.seq, r.branches.closes(), out, u, elapsed)
	if bad != nil {
		r.log.Error("terminal event not encodable", "ticket", r.ticket, "err", bad)
		out = internalOutcome // what the log ends with, and so what the turn remembers
	}
	r.seq += int64(len(tail))
	r.tail = tail
	r.sealed = endOf(tail, out, u, elapsed, 0) // its Evicted is the store's, once the tail is written
	if !r.unrun {
		r.turn = ask.Turn{Question: r.question, Outcome: typ, Text: turnText(out)}
	}
	return true
}

// finish writes what is left of the outbox, then the sealed end, and releases the run's slot.
func (r *run) finish() {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if !r.flushLocked() {
		return // lost: lose released the slot
	}
	r.mu.Lock()
	tail, turn, steps, sealed := r.tail, r.turn, r.steps, r.sealed
	r.mu.Unlock()
	if tail == nil {
		return
	}
	if err := r.write(func(ctx context.Context) (err error) {
		sealed.Evicted, err = r.store.FinishCounted(ctx, r.ticket, tail, turn)
		return err
	}); err != nil {
		// The store may have taken this end before it lost the log (a restart), its reply
		// lost, and a reader read it: a restore writes this end, not another. (Whether it was
		// taken cannot be told: the client retries a call inside, and answers the last
		// attempt's failure, the log not found after a reply lost.)
		r.mu.Lock()
		r.unwritten = tail
		r.mu.Unlock()
		r.lose(err, tail[0].Seq)
		return
	}
	r.mu.Lock()
	r.tail = nil
	evicted := r.evicted + int64(sealed.Evicted)
	r.mu.Unlock()
	if r.onFinished != nil {
		r.onFinished(r, tail, turn)
	}
	r.reportEnd(sealed)
	r.log.Debug("ask ended", "ticket", r.ticket, "conversation", r.conv, "outcome", string(tail[len(tail)-2].Type),
		"steps", steps, "steps_dropped", evicted, "elapsed_ms", time.Since(r.started).Milliseconds())
	r.release()
}

// stop ends the log for cause (cancel, deadline, shutdown) at once, then cancels the run's
// context so the runner stops making model calls. It does not wait for the runner.
func (r *run) stop(cause error) bool {
	if !r.seal(outcomeFor(cause)) {
		r.cancel(cause)
		return false
	}
	// Cancel before the end is written: a store that is slow to take it must not let the
	// runner make another model call meanwhile.
	r.cancel(cause)
	r.finish()
	return true
}

// discard ends, before it runs, a run nobody will follow (a keyed create whose retry took the
// record over and was answered another ticket): error{cancelled} and done, as a cancel, but
// with no turn in its conversation. The retry's ask is that turn; the model should not see the
// question twice, once unanswered, nor the turn cap count it twice (as for an ask answered "not
// started", Server.endLate).
func (r *run) discard() bool {
	r.mu.Lock()
	r.unrun = true
	r.mu.Unlock()
	return r.stop(errCancelled)
}

// execute runs the runner to its end; the caller runs it on its own goroutine. Whatever
// cancels ctx ends the log first (newRun), so the end does not wait for the runner to return.
func (r *run) execute(ctx context.Context, runner ask.Runner, req ask.Request) {
	defer func() {
		r.cancel(errReturned)
		r.drainers.Wait() // no writer outlives the run
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

// turnText is what a conversation remembers of a run's outcome.
func turnText(out ask.Outcome) string {
	typ, body := out.Event()
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
	}
	return string(typ)
}

// emitter is the ask.Emitter a runner reports through.
type emitter struct{ r *run }

// closedLocked reports whether the run takes no more events; r.mu is held.
func (r *run) closedLocked() bool { return r.ended || r.ctx.Err() != nil }

var _ ask.Emitter = emitter{}

// Branch appends a branch below the supervisor's: each opens once and closes once, so a second
// open of an id, or a close of a branch not open, is ignored. Whatever is still open when the
// log ends is closed there, before the supervisor's branch. A branch with the supervisor's id
// or role is ignored: the contract's one supervisor branch is the service's. Every other branch
// runs inside the supervisor's (the contract's parent is b1 for each), whatever parent the
// runner named.
func (e emitter) Branch(b gen.BranchBody) {
	if b.BranchId == supervisorBranch || b.Role == supervisorOpen.Role {
		return // the service opens and closes the supervisor branch itself
	}
	if b.State == gen.BranchBodyStateOpen && (b.Parent == nil || *b.Parent != supervisorBranch) {
		b.Parent = &supervisorOpen.BranchId
	}
	e.r.mu.Lock()
	if e.r.closedLocked() || !e.r.branches.admits(b) {
		e.r.mu.Unlock()
		return
	}
	e.r.enqueueLocked(gen.EventTypeBranch, b)
	e.r.branches.record(b)
	e.r.mu.Unlock()
	e.r.emitted()
}

// Step appends a tool call. A negative wall time (a runner's clock arithmetic gone wrong) is 0,
// the contract's least, and a branch_id naming no open branch is dropped (the step then belongs
// to the supervisor's branch, as in phase 1): the step itself is kept, for a source's audit
// line must find it.
func (e emitter) Step(s gen.StepBody) {
	s.Ms = max(s.Ms, 0)
	e.r.mu.Lock()
	s.BranchId = e.r.openBranchLocked(s.BranchId)
	e.emitLocked(gen.EventTypeStep, s)
}

// Milestone appends progress; a branch_id naming no open branch is dropped, as a step's.
func (e emitter) Milestone(m gen.MilestoneBody) {
	e.r.mu.Lock()
	m.BranchId = e.r.openBranchLocked(m.BranchId)
	e.emitLocked(gen.EventTypeMilestone, m)
}

// openBranchLocked is id when it names an open branch (the supervisor's, open while the runner
// runs, or one the runner opened) or is nil, else nil, said in a warning: the contract's
// branch_id is "the open branch" the work was done in. r.mu is held.
func (r *run) openBranchLocked(id *string) *string {
	if id == nil || *id == supervisorBranch || r.branches.isOpen(*id) {
		return id
	}
	r.log.Warn("the runner named a branch that is not open; the event is kept without it", "ticket", r.ticket)
	return nil
}

// emitLocked appends one event the runner reported, unless the run has ended, and unlocks r.mu,
// which the caller holds: it returns once the store has taken the event, or, with a shared
// store, once the run's writer has it (see run). A step counts towards done.steps whether or not
// its event is later evicted. If the write finds that another replica ended the run, the run
// stops here too.
func (e emitter) emitLocked(typ gen.EventType, body any) {
	if e.r.closedLocked() {
		e.r.mu.Unlock()
		return
	}
	e.r.enqueueLocked(typ, body)
	e.r.mu.Unlock()
	e.r.emitted()
}

func (e emitter) ModelCall(u ask.Usage) {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	if e.r.closedLocked() {
		return
	}
	e.r.modelCalls++
	e.r.tokensLocked(u)
}

func (e emitter) Tokens(u ask.Usage) {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	if e.r.closedLocked() {
		return
	}
	e.r.tokensLocked(u)
}

// tokensLocked adds a model call's usage. A negative count (a provider's or adapter's mistake)
// adds nothing: done's usage is never below zero, the contract's least.
func (r *run) tokensLocked(u ask.Usage) {
	r.inTokens += max(u.InputTokens, 0)
	r.outTokens += max(u.OutputTokens, 0)
}
