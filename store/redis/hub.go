package redis

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// The tail hub: one tail of the store per ticket per store instance (per replica), shared by
// every local reader of that ticket. A tail holds the ticket's retained events as this
// instance last read them, the finished flag, and a change channel. A change notification
// marks the tail stale and closes its channel; the first reader to come back then reads what
// is new (one read-only script: HGET finished, XRANGE from the tail's last seq, XLEN, PTTL) while the
// others wait for that one read, and every reader is answered from the same buffer, the same
// event bytes. So the store's read cost per change is one round trip per replica, not per
// reader, and a ticket nobody reads costs nothing but a map lookup per notification.
//
// The hub has no goroutine of its own: the reads run on the readers' goroutines (whoever comes
// first), the notifications on the store's one notification goroutine, the sweep of expired
// tails on a timer's. A tail lives until the bytes bound (Options.CacheBytes, an LRU over every
// ticket's tail) pushes it out, the finished ticket's TTL is over, a tail not known finished
// has not been read for the TTL (a sweep, at most every sweepGap, lets those go even when
// nothing is read), or the subscription is re-established (notifications may have been lost,
// or Redis restarted and lost everything): then every tail is dropped and its readers are
// woken to read again. A notification lost with no such break (recheckAfter) is caught by
// the next read past recheckAfter of a tail not known finished, which goes to the store. A
// finished ticket's log no longer changes, so its tail answers a replay from memory until the
// ticket's expiry, which the read that saw the end took from Redis (PTTL, counted from before
// the read was sent, so never later than Redis's).

// DefaultCacheBytes bounds the tail hub's memory when Options.CacheBytes is zero.
const DefaultCacheBytes = 64 << 20

// eventOverhead is what one buffered event costs beyond its data, for the bytes bound.
const eventOverhead = 64

type hub struct {
	rd        reader
	maxEvents int
	maxBytes  int64
	idle      time.Duration // how long a tail that is not known finished is kept unread: the store's TTL
	now       func() time.Time

	mu    sync.Mutex
	tails map[string]*tail
	lru   list.List // of *tail, most recently read first
	bytes int64
	ends  map[string]*endWatch // closed at the ticket's next end notification
	// sweep is armed while the hub holds a tail (sweepExpired), so that an idle replica lets
	// the tails go, where expire drops only finished ones, as new tails come.
	sweep   *time.Timer
	sweepOn bool
}

// recheckAfter is how long a tail not known finished answers its readers from memory, when no
// notification came, before a reader's read goes to the store again. A notification can be
// lost while the subscription stays up: the Redis Cluster node holding it, frozen past
// cluster-node-timeout, has the cluster bus's links to it dropped, and with them what the other
// nodes published meanwhile; nothing breaks, so nothing resets the hub. A stream reads at each
// keep-alive, so a reader whose ticket moved on unheard is told within a keep-alive of this.
const recheckAfter = 5 * time.Second

// sweepGap is how often at most the hub looks over every tail for those to let go
// (sweepExpired): a look walks every tail, holding the hub's lock (about a millisecond for
// 100,000 tails, the most 64 MiB of them can be).
const sweepGap = time.Second

// endWatch is a ticket's end channel. known marks a watch registered before this instance
// created the ticket (unfinished then): until the channel closes, the ticket is known to be
// unfinished, so the runner's lease watch needs no read to start. calls are the functions
// NotifyFinished registered, called once each when the channel closes, after the hub's lock
// is released.
type endWatch struct {
	ch    chan struct{}
	known bool
	calls []*endFunc
}

// endFunc is one function registered on a ticket's end watch.
type endFunc struct{ f func() }

// closeEndLocked closes w, the ticket's watch, and forgets it; h.mu is held. It returns the
// functions registered on it, for the caller to call once the lock is released.
func (h *hub) closeEndLocked(ticket string, w *endWatch) []*endFunc {
	close(w.ch)
	delete(h.ends, ticket)
	return w.calls
}

// callEnds calls each function registered on a closed watch.
func callEnds(calls []*endFunc) {
	for _, c := range calls {
		c.f()
	}
}

// reader is what the hub needs from the store: one read of what follows a seq.
type reader func(ctx context.Context, ticket string, after int64) (fetched, error)

type tail struct {
	id      string
	elem    *list.Element
	gen     uint64 // changes notified for the ticket that no seq tells (an end, a lost subscription)
	want    int64  // the highest seq an append notification named
	loaded  bool   // events were read from the store (and not thrown away since)
	syncGen uint64 // the gen the events were read at
	changed chan struct{}
	events  []store.Event // retained, in seq order; never modified in place once handed out
	last    int64         // the last seq read from the store
	high    int64         // the highest seq read, or a reader's cursor; kept when events are not (floor.go)
	done    bool          // finished: nothing more will come
	expires time.Time     // when done: when Redis forgets the ticket, at the latest
	size    int64
	fetch   *fetch    // the read in progress, if any
	used    time.Time // when a reader last asked for it
	checked time.Time // when a read of the store began that the tail took (recheckAfter)
	dropped bool
}

type fetch struct {
	done chan struct{}
	err  error
}

// fetched is one read of a ticket from the store.
type fetched struct {
	events   []store.Event // seq > after
	finished bool
	length   int64         // the log's length (XLEN) at the read
	ttl      time.Duration // the ticket's remaining TTL at the read; < 0 none
}

func newHub(rd reader, maxEvents int, maxBytes int64, idle time.Duration) *hub {
	return &hub{rd: rd, maxEvents: maxEvents, maxBytes: maxBytes, idle: idle, now: time.Now,
		tails: map[string]*tail{}, ends: map[string]*endWatch{}}
}

// fresh reports whether the tail holds what the store holds, as far as the notifications
// tell: read, with no change since that no seq tells, up to the last seq notified.
func (t *tail) fresh() bool {
	return t.loaded && !t.dropped && (t.done || (t.syncGen == t.gen && t.last >= t.want))
}

func (t *tail) ch() chan struct{} {
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

// read answers store.Store.Read from the ticket's tail, reading the store only if the tail is
// stale, and then once for every reader waiting.
func (h *hub) read(ctx context.Context, ticket string, after int64) (store.Batch, error) {
	retries := 0
	h.mu.Lock()
	for {
		t := h.tails[ticket]
		now := h.now()
		if t == nil {
			h.expire()
			t = &tail{id: ticket}
			t.elem = h.lru.PushFront(t)
			h.tails[ticket] = t
			h.sweepAt(now.Add(h.idle))
		} else if t.done && !now.Before(t.expires) {
			h.drop(t) // Redis has forgotten it by now: ask Redis again
			continue
		} else {
			h.lru.MoveToFront(t.elem)
		}
		t.used = now
		t.high = max(t.high, after) // a reader's cursor: what it was given
		if t.fresh() && (t.done || now.Sub(t.checked) < recheckAfter) {
			b := t.batch(after, nil)
			h.mu.Unlock()
			return b, nil
		}
		if f := t.fetch; f != nil {
			// Another reader is reading the store for this tail: wait for its answer.
			h.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return store.Batch{}, wrap(ctx.Err())
			}
			if f.err != nil && !isCtxErr(f.err) {
				return store.Batch{}, f.err
			}
			h.mu.Lock()
			continue // answered from the tail now, or this reader reads (the other left)
		}
		f := &fetch{done: make(chan struct{})}
		t.fetch = f
		gen, stale, from := t.gen, t.ch(), t.last
		sent := h.now()
		h.mu.Unlock()

		res, err := h.rd(ctx, ticket, from)

		h.mu.Lock()
		t.fetch = nil
		f.err = err
		close(f.done)
		reread := false
		if err == nil {
			reread = h.apply(t, from, gen, res, sent)
		}
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				h.drop(t)
			}
			h.mu.Unlock()
			return store.Batch{}, err
		}
		if reread {
			continue // the buffer disagreed with the log: read the log whole, now
		}
		if t.dropped && retries < 2 {
			// Dropped during the read (a re-subscription, the bytes bound): what was read
			// went nowhere; read again into a new tail.
			retries++
			continue
		}
		// Not fresh: a notification came during the read, which the read may have missed,
		// or the tail was dropped meanwhile. This reader gets what was read and the channel
		// of before the read, already closed, so it reads again.
		var b store.Batch
		if t.fresh() {
			b = t.batch(after, nil)
		} else {
			b = t.batch(after, stale)
		}
		h.mu.Unlock()
		return b, nil
	}
}

// batch is what the tail answers a reader after seq `after`: its current change channel when
// fresh, else stale (closed), so that the reader reads again.
func (t *tail) batch(after int64, stale chan struct{}) store.Batch {
	i := sort.Search(len(t.events), func(i int) bool { return t.events[i].Seq > after })
	b := store.Batch{Finished: t.done}
	if n := len(t.events); i < n {
		b.Events = t.events[i:n:n]
	}
	if t.done {
		return b
	}
	if stale != nil {
		b.Changed = stale
	} else {
		b.Changed = t.ch()
	}
	return b
}

// apply merges a read of what followed from into the tail, evicting as the append script
// does (past maxEvents, the oldest step, and only a step): applied to what was retained when
// the tail was last read, and to the new events still retained, that rule leaves what the log
// retains now. A buffer whose length then differs from the log's is thrown away anyway
// (reread): the next read takes the log whole.
func (h *hub) apply(t *tail, from int64, gen uint64, r fetched, sent time.Time) (reread bool) {
	if t.dropped {
		return false // dropped meanwhile (evicted, reset): nothing to merge into
	}
	// This instance's own writes may have been merged meanwhile (wrote): merge skips what the
	// tail holds already.
	h.merge(t, r.events, from > 0)
	top := from
	if n := len(r.events); n > 0 {
		top = r.events[n-1].Seq
	}
	if t.last == top && int64(len(t.events)) != r.length {
		// The buffer is not what the log holds (it should never happen): forget it.
		h.bytes -= t.size
		t.events, t.last, t.size, t.loaded = nil, 0, 0, false
		return from != 0 // a whole read always agrees with itself
	}
	t.loaded, t.syncGen, t.checked = true, gen, sent
	if r.finished {
		t.done = true
		t.expires = sent.Add(max(r.ttl, 0))
		h.sweepAt(t.expires)
		if t.changed != nil {
			close(t.changed)
			t.changed = nil
		}
	}
	h.shrink(t)
	return false
}

// merge appends what follows the tail's last seq of evs to it; with evict, as the append
// script does (past maxEvents, the oldest step, and only a step, per event). A read from the
// start is the retained log as it is (no evict); what is new, read or written here, is evicted
// as the log was: applied to what was retained when the tail was last read, and to the new
// events still retained, that rule leaves what the log retains now. Events handed out are
// never changed in place: an eviction copies.
func (h *hub) merge(t *tail, evs []store.Event, evict bool) {
	buf := t.events
	owned := false
	for _, ev := range evs {
		if ev.Seq <= t.last {
			continue
		}
		if evict && len(buf) >= h.maxEvents {
			for j := range buf {
				if buf[j].Type != gen.EventTypeStep {
					continue
				}
				if !owned {
					buf = append(make([]store.Event, 0, len(buf)+len(evs)), buf...)
					owned = true
				}
				sz := int64(len(buf[j].Data) + eventOverhead)
				h.bytes -= sz
				t.size -= sz
				buf = append(buf[:j], buf[j+1:]...)
				break
			}
		}
		buf = append(buf, ev)
		t.last = ev.Seq
		t.high = max(t.high, ev.Seq)
		sz := int64(len(ev.Data) + eventOverhead)
		h.bytes += sz
		t.size += sz
	}
	t.events = buf
}

// wrote is this instance's own successful write of evs to the ticket's log (an append, or an
// end when done). The tail takes them at once when they continue it, so that this instance
// reads its own writes without waiting for their notification (which it skips) and without
// reading them back: the tail is the log as it was at the tail's last seq, the writer's
// write succeeded at the next seq, so the log then was the tail, and is now the tail with
// evs (evicted as the script evicts). Otherwise they count as a notification of their seq.
// expires is, for an end, when the ticket expires at the latest.
func (h *hub) wrote(ticket string, evs []store.Event, done bool, expires time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tails[ticket]
	if t == nil || t.done {
		return
	}
	for len(evs) > 0 && evs[0].Seq <= t.last {
		evs = evs[1:] // read already
	}
	if len(evs) == 0 {
		return
	}
	if !t.loaded || t.dropped || evs[0].Seq != t.last+1 {
		t.want = max(t.want, evs[len(evs)-1].Seq)
		if t.changed != nil {
			close(t.changed)
			t.changed = nil
		}
		return
	}
	h.merge(t, evs, true)
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
	if done {
		t.done, t.expires = true, expires
		h.sweepAt(expires)
	}
	h.shrink(t)
}

// sweepAt arms the sweep for at, unless it is armed already (for an earlier time: a tail is
// let go the store's TTL after its end or its last read, whichever it has); h.mu is held.
func (h *hub) sweepAt(at time.Time) {
	if h.sweepOn {
		return
	}
	h.sweepOn = true
	d := max(at.Sub(h.now()), 0)
	if h.sweep == nil {
		h.sweep = time.AfterFunc(d, h.sweepExpired)
		return
	}
	h.sweep.Reset(d)
}

// sweepExpired is the sweep's: it drops every finished tail past its expiry, and every other
// tail nobody has read for the store's TTL (its readers left before its end, which this
// instance then never read; or its first read failed), and arms itself again for the earliest
// of the rest, sweepGap from now at the soonest. A reader still waiting on a tail it drops is
// woken, and reads again into a new one.
func (h *hub) sweepExpired() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sweepOn = false
	now := h.now()
	var next time.Time
	for _, t := range h.tails {
		at := t.expires
		if !t.done {
			at = t.used.Add(h.idle)
		}
		if t.fetch == nil && !now.Before(at) {
			h.drop(t)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		h.sweepAt(later(next, now.Add(sweepGap)))
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// forget drops the ticket's tail (its log was re-created).
func (h *hub) forget(ticket string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.tails[ticket]; t != nil {
		h.drop(t)
	}
}

// stale marks the tail stale and wakes its readers.
func (h *hub) stale(t *tail) {
	t.gen++
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// shrink drops the least recently read tails, never keep, until the hub is within its bound.
func (h *hub) shrink(keep *tail) {
	for h.bytes > h.maxBytes {
		e := h.lru.Back()
		for e != nil && e.Value.(*tail) == keep {
			e = e.Prev()
		}
		if e == nil {
			return
		}
		h.drop(e.Value.(*tail))
	}
}

// expire drops the least recently read tails while they are finished tickets past their
// expiry, so that forgotten tickets do not wait for the bytes bound to go.
func (h *hub) expire() {
	now := h.now()
	for e := h.lru.Back(); e != nil; e = h.lru.Back() {
		t := e.Value.(*tail)
		if !t.done || now.Before(t.expires) {
			return
		}
		h.drop(t)
	}
}

// drop forgets a tail and wakes its readers, who read again into a new one.
func (h *hub) drop(t *tail) {
	if t.dropped {
		return
	}
	t.dropped = true
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
	h.bytes -= t.size
	h.lru.Remove(t.elem)
	if h.tails[t.id] == t {
		delete(h.tails, t.id)
	}
}

// changed is a notification that the ticket's log changed: an append up to seq (0: a
// change no seq tells), or the log's end (ended). A tail that already holds seq has nothing to
// learn; any other is stale, its readers read again. A finished tail never changes.
func (h *hub) changed(ticket string, seq int64, ended bool) {
	var calls []*endFunc
	h.mu.Lock()
	defer func() {
		h.mu.Unlock()
		callEnds(calls)
	}()
	if t := h.tails[ticket]; t != nil && !t.done {
		switch {
		case seq > 0 && seq <= t.last:
		case seq > 0:
			t.want = max(t.want, seq)
			if t.changed != nil {
				close(t.changed)
				t.changed = nil
			}
		default:
			h.stale(t)
		}
	}
	if ended {
		if w, ok := h.ends[ticket]; ok {
			calls = h.closeEndLocked(ticket, w)
		}
	}
}

// reset drops every tail and wakes every reader and every end watcher: notifications may have
// been lost, or what Redis held may be gone. It answers the highest seq of each tail not known
// finished, which this instance's readers may have been given (the floors, floor.go).
func (h *hub) reset() (floors map[string]int64) {
	var calls []*endFunc
	h.mu.Lock()
	for id, t := range h.tails {
		if !t.done && t.high > 0 {
			if floors == nil {
				floors = map[string]int64{}
			}
			floors[id] = t.high
		}
		h.drop(t)
	}
	if h.sweep != nil && h.sweep.Stop() {
		h.sweepOn = false // no tail left to wait for
	}
	for id, w := range h.ends {
		calls = append(calls, h.closeEndLocked(id, w)...)
	}
	h.mu.Unlock()
	callEnds(calls)
	return floors
}

// endWait returns the channel closed at the ticket's next end notification (or reset), and
// whether the hub already knows the ticket finished, or knows it unfinished (this instance
// created it after registering the channel, and the channel has not closed since).
func (h *hub) endWait(ticket string) (ch chan struct{}, done, unfinished bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, done := h.endWatchLocked(ticket)
	if done {
		return nil, true, false
	}
	return w.ch, false, w.known
}

// endNotify is endWait with f registered on the watch, to be called once when its channel
// closes (not when the hub already knows the ticket finished: c is nil then).
func (h *hub) endNotify(ticket string, f func()) (c *endFunc, ch chan struct{}, done, unfinished bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, done := h.endWatchLocked(ticket)
	if done {
		return nil, nil, true, false
	}
	c = &endFunc{f: f}
	w.calls = append(w.calls, c)
	return c, w.ch, false, w.known
}

// endWatchLocked is the ticket's end watch, made if there is none, or done when the hub
// holds its tail finished; h.mu is held.
func (h *hub) endWatchLocked(ticket string) (w *endWatch, done bool) {
	if t := h.tails[ticket]; t != nil && t.done {
		return nil, true
	}
	w, ok := h.ends[ticket]
	if !ok {
		w = &endWatch{ch: make(chan struct{})}
		h.ends[ticket] = w
	}
	return w, false
}

// unnotify takes c off the ticket's watch; it reports false when the watch has closed
// already (c is called, or about to be).
func (h *hub) unnotify(ticket string, c *endFunc) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.ends[ticket]
	if w == nil {
		return false
	}
	for i, x := range w.calls {
		if x == c {
			// slices.Delete clears the vacated slot, so the function taken off (its lease,
			// its run) is not kept reachable in the slice's spare capacity until the watch closes.
			w.calls = slices.Delete(w.calls, i, i+1)
			return true
		}
	}
	return false
}

// beforeCreate registers the ticket's end channel before the script that creates it runs,
// so that any end after the creation closes it. It returns the watch, new when it made it.
func (h *hub) beforeCreate(ticket string) (*endWatch, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.ends[ticket]; ok {
		return w, false
	}
	w := &endWatch{ch: make(chan struct{})}
	h.ends[ticket] = w
	return w, true
}

// afterCreate marks w known unfinished when this instance created the ticket (and no end
// notification or reset closed w meanwhile), or releases a watch it made for a creation
// that did not happen or whose outcome is unknown.
func (h *hub) afterCreate(ticket string, w *endWatch, made, created bool) {
	var calls []*endFunc
	h.mu.Lock()
	defer func() {
		h.mu.Unlock()
		callEnds(calls)
	}()
	if h.ends[ticket] != w {
		return // closed meanwhile: the next watch reads the flag
	}
	switch {
	case created:
		w.known = true
	case made:
		calls = h.closeEndLocked(ticket, w)
	}
}

// forgetEnd releases an end channel nobody waits on any more (the ticket is gone).
func (h *hub) forgetEnd(ticket string, ch chan struct{}) {
	var calls []*endFunc
	h.mu.Lock()
	if w := h.ends[ticket]; w != nil && w.ch == ch {
		calls = h.closeEndLocked(ticket, w)
	}
	h.mu.Unlock()
	callEnds(calls)
}

// stats reports the tails held and their bytes, for tests.
func (h *hub) stats() (tails int, bytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.tails), h.bytes
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// fetch is the hub's one read of the store: in one transaction, the finished flag, the log's
// entries after the seq, its length and the ticket's TTL. The accepted event is opened here
// (a ticket whose accepted event no longer opens is crypto-shredded: ErrNotFound).
func (s *Store) fetch(ctx context.Context, ticket string, after int64) (fetched, error) {
	bk := s.keys.bucketOf(ticket)
	res, err := s.readScript(ctx, readTail, []string{s.keys.ticket(bk, ticket), s.keys.log(bk, ticket)},
		strconv.FormatInt(after+1, 10)+"-0")
	if err != nil {
		return fetched{}, err
	}
	if len(res) != 4 {
		return fetched{}, errReply
	}
	if res[0] == nil {
		return fetched{}, store.ErrNotFound
	}
	fin, _ := res[0].(string)
	length, _ := res[2].(int64)
	pttl, _ := res[3].(int64)
	f := fetched{finished: fin == "1", length: length, ttl: time.Duration(pttl) * time.Millisecond}
	if pttl < 0 {
		f.ttl = -1 // no expiry (running)
	}
	entries, _ := res[1].([]any)
	f.events = make([]store.Event, 0, len(entries))
	for _, e := range entries {
		ev, err := decodeEntry(e)
		if err != nil {
			return fetched{}, err
		}
		if ev.Type == gen.EventTypeAccepted {
			data, ok := s.open(ev.Data, acceptedAD(ticket))
			if !ok {
				// Sealed with a key that is no longer configured: crypto-shredded, so the
				// ticket is gone for every reader.
				return fetched{}, store.ErrNotFound
			}
			ev.Data = data
		}
		f.events = append(f.events, ev)
	}
	return f, nil
}

// decodeEntry decodes one XRANGE entry as Redis sends it, [id, [field, value, ...]], without
// go-redis's per-entry map: id "<seq>-0", fields t (type) and d (data).
func decodeEntry(e any) (store.Event, error) {
	pair, _ := e.([]any)
	if len(pair) != 2 {
		return store.Event{}, errors.New("redis store: a log entry is not an event")
	}
	id, _ := pair[0].(string)
	fields, _ := pair[1].([]any)
	ms, _, _ := strings.Cut(id, "-")
	seq, _ := strconv.ParseInt(ms, 10, 64)
	var typ, data string
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		switch k {
		case "t":
			typ = v
		case "d":
			data = v
		}
	}
	if seq == 0 || typ == "" {
		return store.Event{}, fmt.Errorf("redis store: log entry %q is not an event", id)
	}
	return store.Event{Seq: seq, Type: gen.EventType(typ), Data: []byte(data)}, nil
}
