// Package store is the run registry behind the ask service's handlers: tickets, their event
// logs and the conversations they belong to. Memory is the in-process implementation; a shared
// store (Redis Streams / pub-sub) can replace it without touching the handlers.
//
// The contract every implementation keeps, modelled on the MCP Go SDK's EventStore:
//
//   - A ticket's log is append-only. Seq starts at 1 and grows by one per appended event; the
//     store refuses any other seq, so there is no gap at emission.
//   - Read returns every retained event after a cursor and a channel that is closed as soon as
//     the log changes after that read. Reading again from the last seq seen therefore yields
//     replay then live delivery with neither a gap nor a duplicate, and without polling.
//     Readers never block writers: a slow or stalled reader costs the run nothing.
//   - At most MaxEvents events are retained per ticket. Past that, only step events are evicted,
//     oldest first; every other type is kept. A replay may therefore skip seq values that
//     belonged to steps, and nothing else. An append says how many steps it evicted.
//   - Finish appends a ticket's last events (branch close, terminal, done) atomically, records
//     the conversation's turn and releases the ticket's admission slots. It succeeds once.
//   - Finished tickets are retained TTL after Finish; conversations TTL after their last
//     activity (creation or the end of their last ask), and never while an ask runs in them.
//     Then they are gone: every call answers ErrNotFound.
//   - Every write is idempotent under a retry with the same arguments: a call re-run after
//     its reply was lost answers as the first run did (the same events at the same seqs are ok,
//     the ticket just created is ok, the end just written is ok), never a conflict. A store
//     that cannot tell whether a write happened answers ErrUnavailable, never a guess.
//
// All methods are safe for concurrent use. The question text lives only in the accepted event,
// the ticket's own metadata (NewTicket.Question, sealed at rest as the accepted event is) and
// conversation turns; a store never logs any of them.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
)

// Store is the registry of conversations, tickets and their event logs.
type Store interface {
	// CreateConversation registers c. It fails, creating nothing, with ErrOwnerFull when c's
	// owner already holds limits.MaxConversationsPerOwner conversations, and with ErrFull when
	// the store already holds limits.MaxTickets conversations.
	CreateConversation(ctx context.Context, c Conversation, limits Limits) error
	// Conversation returns the conversation and a copy of its finished turns, oldest first.
	Conversation(ctx context.Context, id string) (Conversation, []ask.Turn, error)
	// CreateTicket registers a ticket whose log holds t.Accepted (seq 1) and t.Then, and marks it running
	// in its conversation, atomically. It returns the conversation's turns so far. It fails,
	// creating nothing, with the first of: ErrNotFound (no such conversation, or it belongs to
	// another owner), a *ConflictError (an ask is running in the conversation),
	// ErrConversationFull (the conversation holds limits.MaxTurns turns), ErrTooManyInFlight
	// (the owner has limits.MaxInFlightPerOwner running tickets), ErrOwnerFull (the owner
	// holds limits.MaxRetainedPerOwner tickets, running or retained) or ErrFull (the store
	// holds limits.MaxTickets tickets). A shared store whose answer does not come before ctx
	// ends fails with a *PendingError, through which the creation's eventual outcome is known.
	// Any other error means nothing was created (the service frees a keyed create's
	// Idempotency-Key on it): a shared store whose call may have taken effect without its
	// answer (a reply lost) answers a *PendingError too.
	CreateTicket(ctx context.Context, t NewTicket, limits Limits) ([]ask.Turn, error)
	// Ticket returns a snapshot of the ticket's metadata.
	Ticket(ctx context.Context, id string) (Ticket, error)
	// Append adds ev to a running ticket's log. ev.Seq must be the last seq plus one
	// (ErrSeq otherwise); a finished ticket refuses it with ErrFinished. It is AppendBatch of
	// one event.
	Append(ctx context.Context, ticket string, ev Event) error
	// AppendBatch adds evs, whose seqs run on by one from the last seq plus one, to a running
	// ticket's log in one step, and returns how many step events the bound evicted to make
	// room. A retry after a lost reply answers ok: when the log's last seq falls within the
	// batch and its last entry is the batch's event at that seq (the same type and data), the
	// events up to it are taken as a previous call's and only the rest are appended (all of
	// the batch again: nothing; its evictions are then not known again and count 0). Any
	// other overlap, a gap, or seqs that do not run on by one is ErrSeq, appending nothing; a
	// finished ticket refuses the rest with ErrFinished.
	AppendBatch(ctx context.Context, ticket string, evs []Event) (evicted int, err error)
	// Finish appends tail (whose seqs continue the log, and which holds the terminal event
	// and done) and ends the ticket, recording turn in its conversation; the zero ask.Turn
	// records none (an ask ended unrun after its caller was told it was not started). A
	// second call fails with ErrFinished.
	Finish(ctx context.Context, ticket string, tail []Event, turn ask.Turn) error
	// FinishCounted is Finish, answering how many step events the bound evicted for the tail
	// (0 for a retry that finds the end it wrote).
	FinishCounted(ctx context.Context, ticket string, tail []Event, turn ask.Turn) (evicted int, err error)
	// Read returns the retained events with seq > after, in order. Unless the ticket is
	// finished, Batch.Changed is closed once anything is appended after this read or the
	// ticket is evicted. A shared store's Read reflects its own instance's writes at once,
	// another instance's once their notification has arrived: a read just after a change made
	// elsewhere may not hold it yet, and its Changed is then closed, or closes on arrival.
	Read(ctx context.Context, ticket string, after int64) (Batch, error)
	// Idempotency keeps the Idempotency-Key records of the creating calls.
	Idempotency
}

// Errors a Store returns. Test with errors.Is.
var (
	ErrNotFound        = errors.New("store: not found")
	ErrFull            = errors.New("store: at capacity")
	ErrTooManyInFlight = errors.New("store: too many asks in flight for this identity")
	ErrFinished        = errors.New("store: ticket already finished")
	ErrSeq             = errors.New("store: seq does not continue the log")
	ErrConflict        = errors.New("store: an ask is running in this conversation")
	// ErrOwnerFull: the owner already holds as many conversations, or tickets, as
	// Limits allows one owner.
	ErrOwnerFull = errors.New("store: this identity holds as many as it may")
	// ErrConversationFull: the conversation already holds Limits.MaxTurns turns.
	ErrConversationFull = errors.New("store: the conversation holds as many turns as it may")
	// ErrUnavailable: the store could not be reached or could not take the write now (a
	// network fault, a restart, a paused or read-only server). The call may or may not have
	// taken effect; every write is idempotent, so the caller retries it with the same
	// arguments, or answers 503 + Retry-After.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrWouldPersist: the store refuses a write that holds a question because it would reach a
	// disk readable (a Redis that began to persist while the store does not seal). It comes with
	// ErrUnavailable: nothing was written, and the write is taken again once the store's backend
	// stops persisting, so the caller retries it, or answers 503 + Retry-After.
	ErrWouldPersist = errors.New("store: the question would be written to disk unsealed")
	// ErrNotRun: a shared store's backend refused a creation unrun (an error reply, such as a
	// Redis Cluster's TRYAGAIN while the slot migrates, CLUSTERDOWN, READONLY or OOM), or the
	// call never left: nothing was created. It comes with ErrUnavailable (CreateConversation).
	ErrNotRun = errors.New("store: refused unrun")
)

// ConflictError is returned by CreateTicket when an ask is already running in the
// conversation. It matches ErrConflict.
type ConflictError struct {
	// Ticket is the running ask.
	Ticket string
}

func (e *ConflictError) Error() string { return ErrConflict.Error() }

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// HeldError is ErrOwnerFull with when the owner next gets one back: Frees is how long, by the
// store's clock, until the first of the owner's conversations (CreateConversation) or retained
// tickets (CreateTicket) that hold the cap is due to expire. The cap may still be full then (a
// conversation whose ask started meanwhile is not due), so it is when to look again, not a
// promise. A store that cannot tell (every one is in use by a running ask, say) returns
// ErrOwnerFull alone.
type HeldError struct {
	Frees time.Duration
}

func (e *HeldError) Error() string { return ErrOwnerFull.Error() }

// Is reports whether target is ErrOwnerFull.
func (e *HeldError) Is(target error) bool { return target == ErrOwnerFull }

// PendingError is CreateTicket's answer when its context ended before the store answered and
// the creation may still take effect (a shared store that is stalled or slow: the call is on
// its way and cannot be taken back). It matches ErrUnavailable, so a caller that does not look
// further answers 503. Outcome waits for the store's own answer and returns it: nil when the
// ticket was created after all (the caller, which told its client otherwise, ends it), the
// creation's refusal, or ErrUnavailable when the store never answered (it may still have
// taken effect: a shared store's lease lapses and a sweep ends it). Outcome returns ctx's error
// if ctx ends first. A store whose creation cannot outlive its call never returns one.
type PendingError struct {
	Outcome func(ctx context.Context) error
}

func (e *PendingError) Error() string {
	return "store: the ticket's creation was not answered in time (it may yet take effect)"
}

// Is reports whether target is ErrUnavailable.
func (e *PendingError) Is(target error) bool { return target == ErrUnavailable }

// Owner is who a ticket or conversation belongs to. Ownership never crosses tenants.
type Owner struct {
	Tenant string
	OID    string
}

// Key is the owner as one comparable string.
func (o Owner) Key() string { return o.Tenant + "\x00" + o.OID }

// Limits bound admission. Zero means unlimited. The per-owner caps are what keep one identity
// from filling the shared ones (MaxTickets) for everyone.
type Limits struct {
	// MaxInFlightPerOwner caps one owner's running tickets.
	MaxInFlightPerOwner int
	// MaxTickets caps the tickets held (running, or finished within their TTL) and, separately,
	// the conversations held, over all owners.
	MaxTickets int
	// MaxConversationsPerOwner caps the conversations one owner holds (until each expires).
	MaxConversationsPerOwner int
	// MaxRetainedPerOwner caps the tickets one owner holds: running, or finished within their
	// TTL.
	MaxRetainedPerOwner int
	// MaxTurns caps the asks in one conversation: an ask in a conversation that already holds
	// MaxTurns finished turns is refused.
	MaxTurns int
}

// Event is one event of a ticket's log, already encoded.
type Event struct {
	Seq  int64
	Type gen.EventType
	// Data is the whole event as one line of JSON, envelope included. Neither the store nor
	// its callers modify it once appended.
	Data []byte
}

// Terminal reports whether the event's type ends a run (answer, abstention, refusal, error).
func (e Event) Terminal() bool {
	switch e.Type {
	case gen.EventTypeAnswer, gen.EventTypeAbstention, gen.EventTypeRefusal, gen.EventTypeError:
		return true
	}
	return false
}

// Conversation is the metadata of a conversation.
type Conversation struct {
	ID        string
	Owner     Owner
	CreatedAt time.Time
}

// NewTicket is what CreateTicket registers.
type NewTicket struct {
	ID             string
	ConversationID string
	Owner          Owner
	CreatedAt      time.Time
	// Accepted is the first event, seq 1.
	Accepted Event
	// Question is the ask's question, kept with the ticket (sealed at rest where the store
	// seals the accepted event) so that a replica ending the run elsewhere can record the
	// conversation's turn (store.Shared.Question).
	Question string
	// Then are events that follow accepted (seqs 2, 3, …; never steps), appended with it in
	// the same step: the service's supervisor branch open, so that admission, creation and the
	// log's opening cost one write.
	Then []Event
	// Turns is how many turns the conversation held when the ticket was admitted (the history
	// CreateTicket answered), for Restore; CreateTicket ignores it. A conversation the store
	// lost is re-created with a restored ticket only when it held none: then nothing of it was
	// lost. One that held turns lost them, and re-created around the restored turn alone it
	// would be asked in again with its earlier turns missing (the model answering a follow-up
	// without the context the caller gave it), so it stays gone, as a restart's others are.
	Turns int
	// Limits are the caps the ticket was admitted under, for Restore; CreateTicket ignores
	// them (it takes its own). A lost conversation is re-created only within its owner's cap
	// of conversations and the store's: the identity may have opened others meanwhile, in the
	// store the restart emptied, and one more would put it past its cap. Past them it stays
	// gone, as one that held turns does; the ticket is restored, ended, whatever the caps.
	Limits Limits
}

// Ticket is a snapshot of a ticket's metadata.
type Ticket struct {
	ID             string
	ConversationID string
	Owner          Owner
	CreatedAt      time.Time
	// LastSeq is the seq of the last event appended, evicted or not.
	LastSeq int64
	// Floor is the highest seq a reader is known to have been given that the log no longer
	// holds, or 0: a shared store that lost writes it had acknowledged (a restart that lost its
	// last second, a failover to a replica behind its primary) was told it by a replica whose
	// readers had read them, or by a reader resuming after them (Floored). An end another
	// replica writes (Shared.End) comes after max(LastSeq, Floor), so that no seq a reader saw
	// is given to another event: the lost events are a gap.
	Floor int64
	// Terminal and Done are set once the ticket is finished.
	Terminal *Event
	Done     *Event
	// Shredded reports that the ticket's question was sealed with a key no longer configured
	// (crypto-shredding): its log no longer opens (Read answers ErrNotFound), so the service
	// answers the ticket as gone, while a lapse sweep can still end its run.
	Shredded bool
}

// Finished reports whether done has been appended.
func (t Ticket) Finished() bool { return t.Done != nil }

// State is running, or the terminal event's type.
func (t Ticket) State() gen.AskState {
	if t.Terminal == nil {
		return gen.AskStateRunning
	}
	return gen.AskState(t.Terminal.Type)
}

// Batch is what Read returns.
type Batch struct {
	Events []Event
	// Finished reports that done has been appended: nothing will follow.
	Finished bool
	// Changed is closed when the log changes after this read; nil when Finished.
	Changed <-chan struct{}
}

// Homed is a store that places what an owner creates by owner (store/redis's buckets): the
// service ends the ids it mints for an owner's conversations and tickets with "-" and
// Home(owner), so that the store finds an id's place from the id alone. Home is short and
// made of [A-Za-z0-9]. Ids without it (or with another store's) stay valid: the store then
// looks them up where it keeps unplaced ids.
type Homed interface {
	Home(Owner) string
}
