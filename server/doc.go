// Package server is the ask service: the handwritten implementation of the generated Echo
// interface (gen.ServerInterface), the SSE writer beside it, and the run lifecycle around an
// ask.Runner. New builds the whole stack from Options; Handler is the *echo.Echo to serve;
// Shutdown drains it. Package app wires it (cmd/askd, the dev stack and the bench all go
// through app.Main) from package config's Config.Service and package auth.
//
// # Request path
//
// Each secured operation runs: authentication (a bearer the ask.Authenticator accepts, else
// 401 problem+json with WWW-Authenticate, and 400 for more than one Authorization header or
// one naming the Bearer scheme with no token after a space;
// auth runs before anything reads the body) →
// admission (503 while shutting down, 421 to a gateway that sends RerouteHeader;
// createConversation and createAsk only, and a create retried with its Idempotency-Key is
// answered its recorded response: admission.go) → body limit
// (413; 408 for a body not in within its bound) → for those two, the body as JSON text (415 for a charset other than UTF-8, a
// Content-Type that is not a well-formed media type or a Content-Encoding other than identity; 400 for invalid UTF-8, an escaped unpaired surrogate, or anything but one
// JSON value: jsontext.go) → validation against the embedded contract at the configured base
// path (400, 415 for a body that is not application/json) → the handler. Every error before a
// stream is admitted is application/problem+json, mapped in one place (problem.go); no problem
// ever carries the question text or a token, and validation problems name rules and places,
// never values.
//
// Before routing, a path with an empty or dot segment (`//`, a trailing `/`, `.`, `..`) is 404
// problem+json, as any path no route matches: never a redirect to the cleaned path, which is
// another resource (paths.go). HEAD is answered on every GET operation, through the same chain,
// with the GET's status and header fields (Content-Length, for content of known length) and no
// content; on the event stream it returns once the ticket and cursor are checked, opening no
// stream; a 405's Allow lists HEAD beside GET (head.go). HEAD is generic HTTP, not in the
// contract. A one-valued parameter given more than once is a 400 naming it (Prefer, a list,
// has its lines combined instead).
//
// Every request is logged at debug level (method, route template, status, duration), and a
// handler panic becomes a logged 500 problem; neither log line carries a value from the request.
//
// # Runs
//
// createAsk registers the ticket and appends `accepted` (seq 1) in one store call, writes the
// 202, and only then starts the run on its own goroutine, under a context derived from the
// server's lifetime (never the request's) and bounded by the deadline. The service opens the
// supervisor branch ("b1") before it answers the 202 (so a cancel made the moment the ticket
// arrives finds it open, and the log takes only its close after that cancel), and ends every log exactly once — runner
// returned, cancel, deadline or shutdown, whichever is first — by appending, together, the
// branch close (preceded by the close of every branch the runner opened below it and left
// open — a runner's branch opens once and closes once; a second open of an id, the close of a
// branch not open and a branch with the supervisor's id or role are ignored), the terminal event and done (steps counts every Step reported, evicted or
// not). Cancel, deadline and shutdown end the log at once without waiting for the runner;
// the Emitter ignores everything after the end. An Outcome with no field set (or more than
// one), or a runner panic, becomes error{internal}; the panic value is not logged.
//
// The log is bounded at MaxEvents: the store evicts only steps, oldest first, and nothing
// else is evicted or dropped, ever: every milestone and branch the runner reports is appended.
// A log whose non-step events alone pass the bound (a bound set below what one run reports:
// the agent emits one milestone per tool call, and its model calls are capped) holds all of
// them, and none of its steps once it has ended.
//
// # Streams
//
// GET /v1/asks/{ticket}/events writes an opening comment and `retry:`, then loops: read the
// store after the cursor, write `id:`/`event:`/`data:` frames, flush through
// http.NewResponseController, and wait for the store's change signal, a `: keepalive` tick
// (after KeepAlive of silence), the client leaving or the server closing. It closes after
// done. The cursor is Last-Event-ID, else `after`, else 0; a cursor that is not a decimal
// integer or is beyond the last seq is 400. A client disconnect never touches the run.
//
// # Ownership
//
// Tickets and conversations belong to the (tenant, oid) that created them. For anyone else
// every call answers the same 404 body as for a ticket that does not exist, after the same
// lookup and a constant-time owner comparison.
//
// # Status and cancel
//
// GET /v1/asks/{ticket} returns the state, last_seq, and the terminal event and done once they
// exist; `Prefer: wait=N` (RFC 7240, capped at 60 s, answered with Preference-Applied) waits
// for the end without polling. Cancel is 202 for any owned ticket: it ends a running log with
// error{cancelled} and done at once, and changes nothing after done.
//
// # Conversations and retention
//
// Conversations live in memory only (the process's, or a shared store's Redis run without
// persistence; see docs/scale-out.md): their turns (question, outcome, text) are handed to the
// Runner as Request.History with each ask and are forgotten TTL after the last ask ended (or
// TTL after creation if never used). One ask runs per conversation at a time (409 naming the
// running ticket). Finished tickets are kept TTL after done, then evicted (404). Eviction is
// the store's: timers in the in-memory store (no goroutine, nothing left behind), key expiry
// in Redis.
//
// # Limits
//
// Per identity: running asks (MaxInFlight), conversations held (MaxConversationsPerID) and
// tickets held, running or finished within their TTL (MaxRetainedPerID), each 429 +
// Retry-After; these are checked before, and keep any one identity from filling, the shared
// caps: tickets held and conversations held (each capped at MaxTickets; 503 + Retry-After).
// Per conversation: at most MaxTurns asks (409 "conversation is full; start a new one", with no
// ticket), which bounds its memory and what every ask in it resends to the model. Body size
// (413). Every cap is checked atomically with the create, in the store; a refused request
// creates nothing.
//
// # Shutdown
//
// Shutdown stops admitting (503 + Retry-After), lets running asks finish for ShutdownGrace,
// then ends the rest with error{shutdown} and done, which closes their streams; any stream or
// long poll still open is then closed, and Shutdown waits (bounded by its context) for the
// runners to return.
//
// # Replicas
//
// With a store.Shared (package store/redis) several replicas serve one set of tickets behind
// a plain round-robin gateway: any replica answers any call. A run executes on the replica
// that admitted it, which holds a lease on it, renewed every third of the lease, and watches
// for the log's end. A cancel that reaches another replica ends the log there at once (error
// {cancelled} and done, atomically in the store); the store's end notification reaches the
// runner's replica, which stops the model. The lease keeps no goroutine of the run's own while
// nothing is to be done (lease.go): a timer renews, and the store calls back at an end. Every replica sweeps, every quarter of a lease, for runs whose lease has
// lapsed (their replica died or lost the store) and ends them with error{interrupted} and
// done; the store's atomic end makes that happen exactly once however many replicas notice,
// and refuses anything the old replica appends should it come back. Such a done counts the
// steps in the log and the model calls and tokens of the runner's last renewal.
//
// # Configuration
//
// Config holds these; package config reads them from the environment, and invalid values fail
// with an error naming the variable. The bearer settings (DAS_JWKS_URL, DAS_ISSUER, DAS_AUDIENCE, DAS_REQUIRED_SCOPE, DAS_JWT_ALGS,
// DAS_JWT_LEEWAY_S) are package auth's.
//
//	Variable                            Default  Meaning
//	DAS_ASK_PATH                        /ask     base path the API is served under ("/" for the root)
//	DAS_ASK_TTL_S                       900      seconds a finished ticket, and an idle conversation, are kept
//	DAS_ASK_MAX_EVENTS                  1000     events retained per ticket; past it steps are evicted oldest first (min 8)
//	DAS_ASK_KEEPALIVE_S                 10       seconds of stream silence before a `: keepalive` comment
//	DAS_ASK_DEADLINE_S                  120      seconds an ask may run before error{timeout}
//	DAS_ASK_MAX_INFLIGHT_PER_ID         4        running asks per identity (429 beyond)
//	DAS_ASK_MAX_TICKETS                 10000    tickets held, and conversations held (503 beyond)
//	DAS_ASK_MAX_CONVERSATIONS_PER_ID    100      conversations one identity holds (429 beyond)
//	DAS_ASK_MAX_RETAINED_PER_ID         1000     tickets one identity holds, running or in their TTL (429 beyond; >= the in-flight cap)
//	DAS_ASK_MAX_TURNS_PER_CONVERSATION  50       asks in one conversation (409 beyond; 1 to 10000)
//	DAS_ASK_MAX_BODY_BYTES              81920    request body limit in bytes (413 beyond; 1024 to 16 MiB)
//	DAS_ASK_SHUTDOWN_GRACE_S            10       seconds running asks get to finish on shutdown (0: none)
//	DAS_ASK_STORE_WAIT_S                4        seconds a request waits for a stalled store (503 beyond)
package server
