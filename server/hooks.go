package server

import (
	"context"
	"time"

	"github.com/das-ask/ask/gen"
)

// Hooks are the service's lifecycle reports, for observability (package obs attaches through
// them, so it never wraps the store or the runner nor re-reads the events the service
// encoded). Each is called synchronously where the service learns what it reports, must return
// quickly and must not call back into the Server; a nil hook is skipped. No report carries the
// question or a token.
type Hooks struct {
	// Admitted: this instance created a ticket (the store took its accepted event). ctx is the
	// creating request's (its request id, the caller's trace context). A panic in it is logged
	// and the ask goes on: the ticket exists by then.
	Admitted func(ctx context.Context, a Admission)
	// Running: the run of an admitted ticket is about to start; the context it returns (ctx
	// with values added, such as the ask's span) is the one the runner gets.
	Running func(ctx context.Context, ticket string) context.Context
	// Appended: the store took one event of a run this instance holds, with its body as the
	// service encoded it (a gen.*Body). Evicted is how many step events the store's bound
	// dropped to make room, as the store reported it (store.Store.AppendBatch); the events the
	// store took in one call report the call's evictions with the last of them.
	Appended func(ticket string, typ gen.EventType, body any, evicted int)
	// Ended: this instance ended a log once the store took its end (its own run's, written
	// again while the store is unavailable; with Restored, one the store lost part of; with
	// Remote, one whose replica is gone or that another replica cancelled), or learnt that its
	// run's log will not end here (End.Outcome empty, End.Reason says why).
	Ended func(ticket string, e End)
	// Refused: the service refused a request for a reason its status does not tell apart from
	// others of the same status (one of the Refused* reasons), just before it answers it. ctx
	// is the request's.
	Refused func(ctx context.Context, reason string)
}

// The reasons Hooks.Refused reports.
const (
	// RefusedTooManyInFlight: a 429, the identity has as many asks running as it may.
	RefusedTooManyInFlight = "too_many_in_flight"
	// RefusedTooManyHeld: a 429, the identity holds as many conversations, or tickets (running
	// or finished within their TTL), as it may.
	RefusedTooManyHeld = "too_many_held"
	// RefusedConversationFull: a 409, the conversation holds as many turns as it may.
	RefusedConversationFull = "conversation_full"
	// RefusedFull: a 503, the service holds as many conversations, or tickets, as it may
	// (Options.MaxTickets).
	RefusedFull = "full"
	// RefusedShuttingDown: a 503, the service is shutting down.
	RefusedShuttingDown = "shutting_down"
)

// Admission is an admitted ticket, as Hooks.Admitted reports it.
type Admission struct {
	Ticket, Conversation, OID string
	CreatedAt                 time.Time
}

// End is how a log ended, as Hooks.Ended reports it.
type End struct {
	// Outcome is the terminal event's type, and Error its body when Outcome is error; Outcome
	// is "" when this instance did not end the log.
	Outcome gen.EventType
	Error   *gen.ErrorBody
	// Done is the done event appended.
	Done gen.DoneBody
	// Elapsed is the time from admission to the end at full precision: Done.ElapsedMs is it in
	// whole milliseconds, as the contract carries it.
	Elapsed time.Duration
	// Tail is the types of the last events appended (branch closes, terminal, done).
	Tail []gen.EventType
	// Evicted is how many step events the last events' appending evicted, as the store reported
	// it (store.Store.FinishCounted; 0 when the store took the end from another replica).
	Evicted int
	// Remote: this instance ended a run it did not hold (endRemote).
	Remote bool
	// Restored: the store lost part of the run's log (a restart) and this instance ended it
	// with error{interrupted} after every seq the run assigned, re-creating the ticket if it
	// was gone (store.Shared.Restore).
	Restored bool
	// Reason, when Outcome is "": ended_elsewhere (another replica ended the log) or
	// store_error (the store refused the run's writes for good, or stayed away past the lease).
	Reason string
}
