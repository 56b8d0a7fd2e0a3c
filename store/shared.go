package store

import (
	"context"
	"errors"
	"time"

	"github.com/das-ask/ask"
)

// Shared is a Store that several replicas of the service share (package store/redis). Any
// replica serves any ticket: the handlers need nothing more than Store for that. What a shared
// store adds is for the runs themselves, which execute on exactly one replica:
//
//   - A lease. CreateTicket makes the creating store instance the ticket's runner and starts a
//     lease of Lease(); the runner renews it (Renew) while the run lasts. Only the runner may
//     Append or Finish; any other caller is refused with ErrFinished, as is the runner once the
//     ticket was ended elsewhere (fencing).
//   - Ending a run from elsewhere. End finishes a running ticket from any replica, atomically
//     with the checks it names: a cancel that reaches a replica other than the runner ends the
//     log at once; a lapsed lease (the runner died or lost the store) is ended by whichever
//     replica notices first, with error{interrupted} and done. Of any number of concurrent
//     End and Finish calls on one ticket exactly one succeeds; the others fail with
//     ErrFinished. The runner learns it lost the ticket from Renew, Append or Finish failing
//     with ErrFinished, or from Read reporting the ticket finished.
//
// All methods are safe for concurrent use.
type Shared interface {
	Store
	// Question is the question the ticket was created with (NewTicket.Question): what the
	// conversation's turn records when a replica ends the run elsewhere. ErrNotFound when the
	// ticket is gone.
	Question(ctx context.Context, ticket string) (string, error)
	// Lease is how long a running ticket's lease lasts without renewal.
	Lease() time.Duration
	// Renew extends the lease of a ticket this instance runs and records the run's usage so
	// far (model calls and tokens: what a successor needs to write done). It fails with
	// ErrFinished once the ticket is finished, by anyone, and with ErrNotFound if it is gone.
	Renew(ctx context.Context, ticket string, u Usage) error
	// Lapsed returns running tickets whose lease has lapsed, on the shared engine's clock,
	// at most limit of them. A store spread over several servers that could list some of its
	// parts and not others returns what it listed with the error: the caller ends those.
	Lapsed(ctx context.Context, limit int) ([]string, error)
	// Usage returns what the log and the last renewal know of a running ticket's usage:
	// steps appended (evicted or not), and model calls and tokens as last renewed.
	Usage(ctx context.Context, ticket string) (Usage, error)
	// End finishes a running ticket from any replica, exactly as Finish would, if its last
	// seq (or its Floor, when that is beyond it: a Floored store) is still the one tail
	// continues and, when lapsedOnly, its lease has lapsed
	// (ErrLeaseHeld otherwise). It fails with ErrFinished if the ticket is already finished.
	// When the runner appended meanwhile it fails with ErrSeq, but stops the log from moving:
	// from then on the runner's Append, Renew and Finish fail with ErrFinished, so a retry
	// with the ticket read again succeeds however busy the runner was.
	End(ctx context.Context, ticket string, tail []Event, turn ask.Turn, lapsedOnly bool) error
	// Restore is the runner's answer to a store that lost part or all of a running ticket's
	// log (a restart that lost its last writes: Append or Finish answered ErrSeq or
	// ErrNotFound). It re-creates the ticket from nt if it is gone (accepted and nt.Then, as
	// CreateTicket wrote them), so it never vanishes, then ends it with tail, whose seqs come
	// after every seq the runner assigned: the events the store lost leave a gap before the
	// end, and the end (error{interrupted}) says so. Only the
	// ticket's runner may restore it: anyone else, or anyone once the ticket is finished, is
	// refused with ErrFinished. Re-run after a lost reply it answers ok.
	Restore(ctx context.Context, nt NewTicket, tail []Event, turn ask.Turn) error
	// ConversationDropper: a shared store's drop is also the answer to a creation whose
	// outcome the caller does not know (its reply lost, or its caller gone before it), which
	// the caller answered as not made: after it, a CreateConversation of c still on its way
	// makes nothing, whichever reaches the store first.
	ConversationDropper
}

// ConversationDropper is a store that removes a conversation nobody was answered: one whose
// creation went unanswered (a shared store), or a keyed create's that a retry took over.
type ConversationDropper interface {
	// DropConversation removes c, as CreateConversation registered it (the same id, owner
	// and creation time), if no ask runs in it and it holds no turn, releasing its place under
	// the caps; it reports whether it removed it. A conversation in use is left as it is, with
	// ErrConflict. Re-run after a lost reply it answers ok (false).
	DropConversation(ctx context.Context, c Conversation) (bool, error)
}

// Generational is a store that can lose everything it holds at once: a shared store whose
// engine restarts without persistence (Redis in the memory-only mode). Its generation names
// what it holds now and changes when it has lost everything, so an id minted with the
// generation it was created in tells, later, that what it names was lost rather than never
// there. A store that is not generational answers errors.ErrUnsupported.
type Generational interface {
	Generation(ctx context.Context) (string, error)
}

// Floored is a shared store that can be told of a seq a reader was given which the ticket's log
// may no longer hold (Ticket.Floor). RaiseFloor records seq as the running ticket's floor if it
// is beyond both the log's last seq and the floor already recorded, and does nothing otherwise;
// it fails with ErrFinished once the ticket is finished and ErrNotFound when it is gone.
type Floored interface {
	RaiseFloor(ctx context.Context, ticket string, seq int64) error
}

// ErrLeaseHeld is End's answer when lapsedOnly is set and the runner's lease is still live.
var ErrLeaseHeld = errors.New("store: the ticket's runner still holds its lease")

// Usage is what a run has cost so far, for its done event.
type Usage struct {
	Steps        int64
	ModelCalls   int64
	InputTokens  int64
	OutputTokens int64
}
