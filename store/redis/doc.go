// Package redis is the ask service's run registry on Redis (a store.Shared): tickets, their
// event logs and conversations live in one Redis that every replica of the service shares, so
// any replica serves any ticket behind a plain round-robin gateway, and a run whose replica
// dies still ends with exactly one terminal event and done. Select it in askd with
// DAS_ASK_STORE=redis://host:port/db, redis+cluster://host:port[,host:port...] (Redis Cluster) or
// redis+sentinel://host:port[,host:port...]/master (Sentinel): one goredis.UniversalClient.
//
// # Keys (under Options.Prefix, default "ask:", in buckets)
//
// Every key starts with its bucket's hash tag, {<prefix>b<N>}, N in 0..Options.Buckets-1, so
// Redis Cluster keeps a bucket in one slot and every script, which touches one bucket, runs on
// one slot (no CROSSSLOT). The bucket is the owner's: N = FNV-1a(tenant, oid) mod Buckets. The
// service ends the ids it mints with "-" and Home(owner) ("b<N>", store.Homed), so the store
// finds an id's bucket from the id alone; an id without it is bucket 0. A ticket's admission
// looks its conversation up in the ticket's bucket: a conversation of another owner's bucket is
// not found, as another owner's is. Below, every key carries its bucket's tag.
//
//	c:<cid>            hash   owner, created, the running ticket ("" when none), the count of its turns, a restored ask's turn waiting for the end of the ask before it (next:<tid>)
//	c:<cid>:turns      list   the conversation's finished turns (JSON), oldest first
//	t:<tid>            hash   owner, conversation, last seq, finished, runner, usage, the seqs of its terminal and done, the floor (floor.go)
//	t:<tid>:log        stream the events; entry id "<seq>-0", fields t (type) and d (the event's JSON)
//	t:<tid>:steps      list   the seqs of the step entries still in the log, oldest first
//	convs, tickets     zsets  id → expiry (ms): capacity counts live entries, per bucket; expired ones are
//	                          dropped when the cap is near and by every Lapsed sweep. A ticket enters tickets
//	                          at its end (running, the running set counts it); a conversation keeps the score
//	                          its creation gave it: past it, a sweep reads the hash's expiry (persisted while
//	                          an ask runs: scored a minute ahead, or the TTL if shorter, to be looked at again)
//	o:c:<owner>        zset   the owner's conversations, as convs: the per-owner cap counts them; no expiry
//	                          while a ticket of the owner runs
//	o:t:<owner>        zset   the owner's tickets, as tickets: those at +inf are its running ones, which the
//	                          in-flight cap counts; each owner zset expires with its last entry
//	running            zset   running ticket → lease expiry (ms), per bucket; Lapsed reads every bucket's
//	idem:<owner><key>  hash   an Idempotency-Key record, in the owner's bucket
//	wh:<tid>, wh:due   hash, zset  the ticket's webhook delivery; the bucket's pending deliveries by due time
//	generation         string  the store's generation (store.Generational), in bucket 0
//	<prefix>changed    channel every append publishes "<tid>\x00<last seq>\x00<replica>" here (PUBLISH reaches every node)
//	<prefix>ended      channel every end of a log (Finish, End, Restore) publishes the ticket id here
//
// The shared caps are per bucket: Limits.MaxTickets holds as ceil(MaxTickets/Buckets) tickets,
// and as many conversations, in each bucket, so the store holds at most Buckets times that and
// an owner meets its own bucket's cap. With Buckets 1 (the default on one Redis) they are exact;
// on Redis Cluster Buckets defaults to DefaultClusterBuckets. Replicas that share a prefix must
// use the same Buckets.
//
// # Promises, and how they are kept
//
// Every write that spans keys is one Lua script, so it is atomic whichever replica runs it;
// times come from Redis's clock (TIME), so replicas with skewed clocks agree. An append
// (AppendBatch: one event or several, one script) checks the batch continues the log (gap-free
// seq) and, past MaxEvents entries, evicts the oldest step through the side index of step seqs
// — never any other type — in the same script, answering how many it evicted. Creation
// (CreateTicket) checks the conversation is the caller's, admits, and writes the accepted event
// and NewTicket.Then (the service's branch open) in one script; the runner's Finish names its
// keys from what this instance remembers of the tickets it created, without a read first. Read is
// answered by the tail hub: the readers of one ticket in one instance share one tail of its
// log, which reads Redis (an XRANGE from the entry after the last it holds, in one read-only
// script with the finished flag, the log's length and the ticket's TTL) once per change
// notification, however many readers wait, and hands the same event bytes to all of them; the
// appending script publishes the ticket after its write and a tail's change channel is the
// one of the state it answers from, so replay then live has neither a gap nor a duplicate. A
// finished ticket's tail answers replays from memory until the ticket's expiry (the TTL read
// with the end, counted from before that read). Options.CacheBytes bounds the hub (least
// recently read tails go first). One subscription per store instance fans notifications out
// to the readers in the process (a connection per waiting reader, as XREAD BLOCK would need,
// does not scale to thousands of open streams); a lost subscription is re-established by the
// client and then drops every tail and wakes every reader. A notification can also be lost
// while the subscription stays up (a Redis Cluster node holding it frozen past
// cluster-node-timeout), so a tail not known finished goes to Redis again at a read once 5 s
// have passed since it last did, notified or not; the service reads at every keep-alive, and a
// stream whose ticket ended unheard gets the end at its next one. The end of a log is notified on its own channel too, so the runner's
// lease watch (NotifyFinished, a function called at the end notification, or WatchFinished,
// a channel) learns of an end from elsewhere without reading per event. The end of a log (branch close, terminal, done)
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
// The run's scripts (creation, appends, the end) go through the client's full-duplex
// autopipeline, which streams the scripts of concurrent runs onto one held connection per
// node; a connection failure retries those in flight, which their idempotence makes safe, and
// a call is bounded by the client's read timeout rather than its context once it is queued.
// The runs' own ends that arrive while one of their bucket is in flight go together, as one
// endTickets call, once it is answered (ends.go); each end runs there in a protected call, so
// one that raises an error answers alone, and a failed call is every end's in it, each retried.
// An error that says Redis could not be reached or could not take the write now is
// store.ErrUnavailable, a write refused for memory (OOM: maxmemory with noeviction) among them.
// The reads that take several keys at one instant are read-only scripts (reads.go), not MULTIs,
// so that a full Redis, which refuses every command queued in a MULTI, still serves them. Restore re-creates and ends a ticket whose log a restart lost; the
// generation key changes when a restart lost everything, so ids minted with it tell lost from
// never there.
//
// # Operating it
//
// The question text must never be written to disk readable. Either run a dedicated Redis with
// persistence off (redis-server --save "" --appendonly no: the memory-only mode), or let it
// persist (appendonly yes, appendfsync everysec: the durable mode) and set Options.Seal, which
// seals the accepted event, the ticket's question (field q, kept for Question) and every turn
// at rest (package seal). New refuses a Redis that it
// can see persists (CONFIG GET; on a cluster, of every primary) when the store does not seal,
// and such a store keeps asking while it runs (every new connection, a reconnect, a new
// generation, every Options.PersistenceCheck): while its Redis persists it refuses every write
// that holds a question (store.ErrWouldPersist, with store.ErrUnavailable) and Refusing names
// the reason for the readiness probe (persist.go).
// Replicas that share tickets must use the same URL, prefix, buckets, TTL and MaxEvents.
package redis
