package store

import (
	"context"
	"sync"
	"time"
)

// memIdems are the Memory store's idempotency records. Expired records are purged oldest
// first, as new ones arrive and on a timer armed for the oldest one's expiry, so an idle store
// holds none once they have expired: records are begun with the service's one TTL, so the
// insertion order is the expiry order (near enough; a record is also checked on every use).
type memIdems struct {
	mu     sync.Mutex
	recs   map[string]*memIdem
	order  []memIdemRef
	timer  *time.Timer // armed for order[0]'s expiry while order holds a record
	closed bool
}

type memIdem struct {
	fp       string
	id       string
	prev     string
	done     bool
	response []byte
	lock     time.Time // the holder's lock, while not done
	expires  time.Time
}

type memIdemRef struct {
	k   string
	rec *memIdem
}

var _ Idempotency = (*Memory)(nil)

func idemKey(o Owner, key string) string { return o.Key() + "\x00" + key }

// BeginIdempotent implements Idempotency.
func (m *Memory) BeginIdempotent(_ context.Context, owner Owner, key string, b IdemBegin) (IdemResult, error) {
	x := &m.idems
	x.mu.Lock()
	defer x.mu.Unlock()
	now := time.Now()
	x.purge(now)
	if b.TTL <= 0 {
		b.TTL = m.ttl // the store's own (IdemBegin.TTL), as the Redis store's is
	}
	k := idemKey(owner, key)
	r := x.recs[k]
	if r != nil && !now.Before(r.expires) {
		delete(x.recs, k)
		r = nil
	}
	switch {
	case r == nil:
		if x.recs == nil {
			x.recs = map[string]*memIdem{}
		}
		r = &memIdem{fp: b.Fingerprint, id: b.Candidate, lock: now.Add(b.Lock), expires: now.Add(b.TTL)}
		x.recs[k] = r
		x.order = append(x.order, memIdemRef{k, r})
		if len(x.order) == 1 {
			x.arm(now)
		}
		return IdemResult{State: IdemNew, ID: b.Candidate}, nil
	case r.fp != b.Fingerprint:
		return IdemResult{State: IdemMismatch}, nil
	case r.done:
		return IdemResult{State: IdemDone, ID: r.id, Response: append([]byte(nil), r.response...)}, nil
	case r.id == b.Candidate: // this request's own retry
		return IdemResult{State: IdemNew, ID: r.id, Prev: r.prev}, nil
	case now.Before(r.lock):
		return IdemResult{State: IdemBusy, ID: r.id}, nil
	}
	// The holder's lock lapsed: take over, remembering what it may have created.
	r.prev, r.id, r.lock = r.id, b.Candidate, now.Add(b.Lock)
	return IdemResult{State: IdemNew, ID: r.id, Prev: r.prev}, nil
}

// CompleteIdempotent implements Idempotency.
func (m *Memory) CompleteIdempotent(_ context.Context, owner Owner, key, candidate, final string, response []byte) error {
	x := &m.idems
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.recs[idemKey(owner, key)]
	switch {
	case r == nil: // expired: nobody else can hold it
		return nil
	case !r.done && r.id == candidate && final != candidate && final != r.prev:
		// A takeover answering what the attempt it took over from made, which that attempt
		// has since given up (it came back and found the key taken over): not the key's.
		return ErrIdemLost
	case !r.done && r.id == candidate:
		r.done, r.id, r.response = true, final, append([]byte(nil), response...)
		return nil
	case r.done && r.id == final:
		return nil
	case !r.done && r.prev == candidate:
		r.prev = "" // it undoes what it made: nothing of it to give back or look for
	}
	return ErrIdemLost
}

// AbandonIdempotent implements Idempotency.
func (m *Memory) AbandonIdempotent(_ context.Context, owner Owner, key, candidate string) error {
	x := &m.idems
	x.mu.Lock()
	defer x.mu.Unlock()
	k := idemKey(owner, key)
	r := x.recs[k]
	switch {
	case r == nil || r.done:
	case r.id != candidate:
		if r.prev == candidate {
			r.prev = "" // taken over, and it made nothing: nothing of it to give back or look for
		}
	case r.prev != "":
		// Taken over: back to the attempt it was taken from, whose lock had lapsed.
		r.id, r.prev, r.lock = r.prev, "", time.Time{}
	default:
		delete(x.recs, k)
		x.compact()
	}
	return nil
}

// compact drops from the purge order the records no longer held, once they are most of it; x.mu
// is held. A record abandoned (its create refused: an unknown conversation, a cap, a busy one)
// left its place in the order until its TTL, so an identity sending keyed creates that are
// refused, each under a new key, grew the order by one entry (its key and record, 400 bytes and
// more) a request for the whole TTL: 80 MB for 200,000 (a resource audit). Compacting when
// at least half the order is stale keeps it within twice the records held, at a constant cost
// per abandoned record.
func (x *memIdems) compact() {
	if len(x.order) <= 2*len(x.recs)+64 {
		return
	}
	n := 0
	for _, ref := range x.order {
		if x.recs[ref.k] == ref.rec {
			x.order[n] = ref
			n++
		}
	}
	clear(x.order[n:])
	x.order = x.order[:n]
	if n == 0 {
		x.order = nil // its array may have grown large: let it go
		return
	}
	if n < cap(x.order)/4 {
		x.order = append([]memIdemRef(nil), x.order...) // nor keep the large array for a few
	}
	x.arm(time.Now()) // the oldest record held may be another
}

// purge drops the expired records at the front of the insertion order.
func (x *memIdems) purge(now time.Time) {
	n := 0
	for ; n < len(x.order) && !now.Before(x.order[n].rec.expires); n++ {
		if x.recs[x.order[n].k] == x.order[n].rec {
			delete(x.recs, x.order[n].k)
		}
	}
	if n > 0 {
		x.order = append(x.order[:0], x.order[n:]...)
		clear(x.order[len(x.order) : n+len(x.order)])
	}
	if len(x.order) == 0 {
		x.order = nil // its array may have grown large: let it go
	}
}

// arm sets the timer for the oldest record's expiry, if there is one; x.mu is held.
func (x *memIdems) arm(now time.Time) {
	if len(x.order) == 0 || x.closed {
		return
	}
	d := x.order[0].rec.expires.Sub(now)
	if x.timer == nil {
		x.timer = time.AfterFunc(d, x.expired)
		return
	}
	x.timer.Reset(d)
}

// expired is the timer's: it purges what has expired and re-arms for the rest.
func (x *memIdems) expired() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	now := time.Now()
	x.purge(now)
	x.arm(now)
}

// close stops the timer and drops every record.
func (x *memIdems) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	if x.timer != nil {
		x.timer.Stop()
	}
	x.recs, x.order = nil, nil
}
