// Package redis is the ask service's run registry on Redis (a store.Shared): tickets, their
// event logs and conversations live in one Redis that every replica of the service shares, so
// any replica serves any ticket behind a plain round-robin gateway, and a run whose replica
// dies still ends with exactly one terminal event and done. Select it in askd with
// DAS_ASK_STORE=redis://host:port/db.
//
// # Keys (under Options.Prefix, default "ask:")
//
//	c:<cid>            hash   owner, created, the running ticket ("" when none)
//	c:<cid>:turns      list   the conversation's finished turns (JSON), oldest first
//	t:<tid>            hash   owner, conversation, last seq, finished, runner, usage, terminal and done
//	t:<tid>:log        stream the events; entry id "<seq>-0", fields t (type) and d (the event's JSON)
//	t:<tid>:steps      list   the seqs of the step entries still in the log, oldest first
//	convs, tickets     zsets  id → expiry (ms, +inf while running): capacity counts live entries
//	o:c:<owner>        zset   the owner's conversations, as convs: the per-owner cap counts them
//	o:t:<owner>        zset   the owner's tickets, as tickets; each owner zset expires with its last entry
//	running            zset   running ticket → lease expiry (ms)
//	inflight           hash   owner → running tickets (owner: len(tenant):tenant oid)
//	changed            channel every append publishes the ticket id here
//	ended              channel every end of a log (Finish, End, Restore) publishes the ticket id here
//	generation         string  the store's generation (store.Generational): new after a restart that lost everything
//
// # Promises, and how they are kept
//
// Every write that spans keys is one Lua script, so it is atomic whichever replica runs it;
// times come from Redis's clock (TIME), so replicas with skewed clocks agree. Append checks
// the seq continues the log (gap-free seq) and, past MaxEvents entries, evicts the oldest step
// through the side index of step seqs — never any other type — in the same script. Read is
// answered by the tail hub: the readers of one ticket in one instance share one tail of its
// log, which reads Redis (an XRANGE from the entry after the last it holds, in one
// transaction with the finished flag, the log's length and the ticket's TTL) once per change
// notification, however many readers wait, and hands the same event bytes to all of them; the
// appending script publishes the ticket after its write and a tail's change channel is the
// one of the state it answers from, so replay then live has neither a gap nor a duplicate. A
// finished ticket's tail answers replays from memory until the ticket's expiry (the TTL read
// with the end, counted from before that read). Options.CacheBytes bounds the hub (least
// recently read tails go first). One subscription per store instance fans notifications out
// to the readers in the process (a connection per waiting reader, as XREAD BLOCK would need,
// does not scale to thousands of open streams); a lost subscription is re-established by the
// client and then drops every tail and wakes every reader, and the service re-reads at every
// keep-alive anyway. The end of a log is notified on its own channel too, so the runner's
// lease watch (WatchFinished) learns of an end from elsewhere without reading per event. The end of a log (branch close, terminal, done)
// appends, marks the ticket finished, starts the TTL of the ticket's keys and of the
// conversation, records the turn and releases the owner's slot in one script: TTL counts from
// the terminal event, and nothing expires while an ask runs.
//
// # Leases and fencing
//
// The instance that creates a ticket is its runner; its lease is the ticket's score in the
// running set. Append, Finish and Renew refuse (ErrFinished) a caller that is not the runner,
// and anyone once the ticket is finished, so a runner that comes back after another replica
// ended its run changes nothing. End finishes a running ticket from any replica when its log
// has not moved since the caller read it, and, for a lapse, when the lease has lapsed by
// Redis's clock: of any number of concurrent attempts exactly one succeeds. An attempt that
// finds the log moved marks the ticket ending, which refuses the runner's further appends, so
// a busy runner cannot starve a cancel: the retry succeeds.
//
// # Faults
//
// Every script gives the same answer when re-run after its reply was lost (go-redis retries
// a command whose connection failed): it recognises its own earlier effect by reading it back.
// An error that says Redis could not be reached or could not take the write now is
// store.ErrUnavailable. Restore re-creates and ends a ticket whose log a restart lost; the
// generation key changes when a restart lost everything, so ids minted with it tell lost from
// never there.
//
// # Operating it
//
// The question text must never be written to disk readable. Either run a dedicated Redis with
// persistence off (redis-server --save "" --appendonly no: the memory-only mode), or let it
// persist (appendonly yes, appendfsync everysec: the durable mode) and set Options.Seal, which
// seals the accepted event and every turn at rest (package seal). New refuses a Redis that it
// can see persists (CONFIG GET) when the store does not seal. Standalone Redis (or a Sentinel-managed primary) only: the
// scripts touch keys of several tickets and conversations, which Redis Cluster would place in
// different slots. Replicas that share tickets must use the same URL, prefix, TTL and
// MaxEvents.
package redis
