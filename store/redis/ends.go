package redis

import (
	"context"
	"errors"
	"sync"
)

// errShortBatch is an endTickets reply that answers fewer ends than it was sent (a bug).
var errShortBatch = errors.New("redis store: the end script answered fewer ends than it was sent")

// maxEndBatch bounds the ends one endTickets call carries: Redis runs a script to its end
// before it answers anything else, so a batch of 32 trivial ends (about 20 commands each) holds
// the tickets created meanwhile for well under a millisecond.
const maxEndBatch = 32

// maxEndCalls bounds a bucket's end calls in flight at once. A call beyond the first goes only
// for a full batch (maxEndBatch ends waiting). With one call at a time, 32 ends a round trip fell
// behind the tickets at concurrency 64 on one primary (one bucket): askbench's time to ticket
// found a burst's last run ending 35–78 ms after its last 202, each end's admission slot and
// done held meanwhile, the backlog growing with the burst. Letting up to four calls go whatever
// their size kept up (about 1 ms) but split the ends into small calls: the Redis path spent
// about 8% more CPU per ask (FINDINGS.md). Full batches only keep the calls as large as before,
// and add a call only when the ends outrun one.
const maxEndCalls = 4

// ends sends the runs' own ends (Finish) that arrive together as one endTickets call per bucket.
// An ask's end is half of what Redis does for it; sent one script each, the ends cost the
// service a command to encode, write and read back, and Redis one to parse and dispatch,
// apiece. Measured at concurrency 64 in askbench's time to ticket (docs/decisions.md), sharing
// them moved the Redis row's p50 ratio from a median of 2.50× to 2.34× over six paired runs.
//
// The batches are group commits without a timer or a goroutine of their own, per bucket (a
// bucket's keys share one hash slot, as a script's keys must on Redis Cluster): an end that finds
// no call of its bucket in flight goes at once, as endTicket, so a lone end pays nothing for the
// sharing; ends that arrive while one is in flight queue, and go, up to maxEndBatch of them, as
// the next call the moment one is answered, sent by the first of them; and when maxEndBatch of
// them wait and fewer than maxEndCalls calls are in flight, they go at once as another call,
// sent by the last, so that the ends keep up with the tickets.
// Only ends wait on ends: the tickets' creation never does, which is where an earlier batcher
// of every script lost more than it saved (FINDINGS.md, "Tried and not kept").
//
// Every end is idempotent (scripts.go), so a batch the client runs again after a lost reply
// answers as its first run did, and an error of the call (Redis unreachable, a timeout) is
// every end's in it, each of which the service retries as before. An end that raises an error
// inside the script answers it alone (endTickets runs each in a protected call). A queued end's
// own context does not reach its batch, as with the autopipeline under it: a stalled Redis
// fails the batch at the client's read timeout.
type ends struct {
	s  *Store
	mu sync.Mutex
	q  map[int]*endQueue // by bucket
}

// endQueue is a bucket's ends waiting for a call in flight to be answered. Ends wait only while
// a call is in flight, and fewer than maxEndBatch of them unless maxEndCalls are.
type endQueue struct {
	waiting  []*endCall
	inflight int // calls of this bucket in flight
}

// take removes the next batch from the waiting ends.
func (q *endQueue) take() []*endCall {
	n := min(len(q.waiting), maxEndBatch)
	batch := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	return batch
}

// endCall is one end: its endTicket command, its reply, and ch, which receives false when the
// reply is in, or true when this end is to send batch (itself first in it).
type endCall struct {
	c     evalCmd
	res   any
	err   error
	ch    chan bool
	batch []*endCall
}

// run ends one ticket of bucket b (c, its endTicket command) and answers endTicket's reply.
func (e *ends) run(ctx context.Context, b int, c evalCmd) (any, error) {
	me := &endCall{c: c, ch: make(chan bool, 1)}
	e.mu.Lock()
	if e.q == nil {
		e.q = map[int]*endQueue{}
	}
	q := e.q[b]
	if q == nil {
		q = &endQueue{}
		e.q[b] = q
	}
	q.waiting = append(q.waiting, me)
	var batch []*endCall
	// None in flight: no end waits, and I go alone. Or I make a full batch with calls to spare:
	// none waited for a full batch before me (it would have gone), so the batch ends with me.
	if q.inflight == 0 || (len(q.waiting) == maxEndBatch && q.inflight < maxEndCalls) {
		q.inflight++
		batch = q.take()
	}
	e.mu.Unlock()
	if batch == nil {
		if !<-me.ch {
			return me.res, me.err // answered in a batch another end sent
		}
		batch = me.batch // a call was answered, and its sender handed its place to me
	}

	e.send(context.WithoutCancel(ctx), batch)

	e.mu.Lock()
	var next []*endCall
	if len(q.waiting) == 0 {
		q.inflight--
		q.waiting = nil
	} else {
		next = q.take() // its first sends it, in this call's place
		next[0].batch = next
	}
	e.mu.Unlock()
	if next != nil {
		next[0].ch <- true
	}
	for _, c := range batch {
		if c != me {
			c.ch <- false
		}
	}
	return me.res, me.err
}

// send runs batch's ends: one as endTicket, several as endTickets (their keys first, one
// end's after another, then its count and each end's key count, argument count and
// arguments).
func (e *ends) send(ctx context.Context, batch []*endCall) {
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.err = eval(ctx, e.s.writes, endTicket, c.c).Result()
		return
	}
	nkeys, nargs := 0, 1
	for _, c := range batch {
		nkeys += c.c.nkeys()
		nargs += 2 + len(c.c.args())
	}
	all := newEval(endTickets, nkeys, nargs)
	for _, c := range batch {
		all = append(all, c.c.keys()...)
	}
	all = append(all, len(batch))
	for _, c := range batch {
		all = append(all, c.c.nkeys(), len(c.c.args()))
		all = append(all, c.c.args()...)
	}
	res, err := eval(ctx, e.s.writes, endTickets, all).Slice()
	for i, c := range batch {
		switch {
		case err != nil:
			c.err = err
		case i < len(res):
			c.res = res[i]
		default:
			c.err = errShortBatch
		}
	}
}
