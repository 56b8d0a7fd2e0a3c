package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
)

// Defaults for MemoryOptions' zero values.
const (
	DefaultTTL       = 900 * time.Second
	DefaultMaxEvents = 1000
)

// MemoryOptions configure NewMemory. Zero values mean defaults.
type MemoryOptions struct {
	// TTL is how long a finished ticket, and an idle conversation, are retained.
	TTL time.Duration
	// MaxEvents bounds each ticket's retained events; past it steps are evicted oldest first.
	MaxEvents int
}

// Memory is the in-process Store. Expiry runs on one timer (time.AfterFunc) over a queue of
// what expires in order (expire), so it holds no goroutine of its own; Close stops the timer
// and releases everything.
type Memory struct {
	ttl       time.Duration
	maxEvents int

	mu       sync.Mutex
	closed   bool
	expiries expiryQueue
	convs    map[string]*memConv
	tickets  map[string]*memTicket
	inFlight map[string]int // owner key -> running tickets
	convsOf  map[string]int // owner key -> conversations held
	heldOf   map[string]int // owner key -> tickets held (running or retained)

	idems memIdems // Idempotency-Key records (memory_idempotency.go)
}

type memConv struct {
	c       Conversation
	turns   []ask.Turn
	running string // the running ticket, "" when none
	// epoch tells the conversation's current expiry from the ones queued before it: each
	// (re)start of its idle time takes a new one.
	epoch int
}

type memTicket struct {
	t        Ticket
	question string
	// events is the log ordered by seq, with evicted steps still in place (Data dropped) until
	// the next compaction: every step before index scan is evicted, and nothing else is, so an
	// eviction costs O(1) amortized instead of shifting the whole log.
	events   []Event
	scan     int // every step in events[:scan] is evicted; no other event is
	dead     int // how many steps in events[:scan]
	changed  chan struct{}
	finished bool
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory(opts MemoryOptions) *Memory {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	return &Memory{
		ttl:       opts.TTL,
		maxEvents: opts.MaxEvents,
		convs:     map[string]*memConv{},
		tickets:   map[string]*memTicket{},
		inFlight:  map[string]int{},
		convsOf:   map[string]int{},
		heldOf:    map[string]int{},
	}
}

// Close stops every expiry timer and drops everything; waiting readers are woken and then see
// ErrNotFound. Calls after Close answer ErrNotFound or ErrFull.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.expiries.stop()
	clear(m.convs)
	for id, t := range m.tickets {
		t.notify()
		delete(m.tickets, id)
	}
	clear(m.inFlight)
	clear(m.convsOf)
	clear(m.heldOf)
	m.idems.close()
	return nil
}

// CreateConversation implements Store.
func (m *Memory) CreateConversation(_ context.Context, c Conversation, limits Limits) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrFull
	}
	key := c.Owner.Key()
	if old, dup := m.convs[c.ID]; dup && old.c.Owner.Key() == key && old.c.CreatedAt.Equal(c.CreatedAt) {
		return nil // the same call again: the conversation it created
	}
	if limits.MaxConversationsPerOwner > 0 && m.convsOf[key] >= limits.MaxConversationsPerOwner {
		return m.heldLocked(c.Owner, true)
	}
	if limits.MaxTickets > 0 && len(m.convs) >= limits.MaxTickets {
		return ErrFull
	}
	if _, dup := m.convs[c.ID]; dup {
		return errIDTaken
	}
	mc := &memConv{c: c}
	m.convs[c.ID] = mc
	m.convsOf[key]++
	m.expireConvLocked(mc)
	return nil
}

// DropConversation implements ConversationDropper. The service drops a keyed create's
// conversation when a retry took its record over (the retry answered one of its own); no
// creation is ever on its way to this store, so nothing is kept to refuse one.
func (m *Memory) DropConversation(_ context.Context, c Conversation) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, ok := m.convs[c.ID]
	if !ok || mc.c.Owner.Key() != c.Owner.Key() || !mc.c.CreatedAt.Equal(c.CreatedAt) {
		return false, nil
	}
	if mc.running != "" || len(mc.turns) > 0 {
		return false, ErrConflict
	}
	delete(m.convs, c.ID) // its queued expiries find it gone
	decrement(m.convsOf, c.Owner.Key())
	return true, nil
}

// Conversation implements Store.
func (m *Memory) Conversation(_ context.Context, id string) (Conversation, []ask.Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.convs[id]
	if !ok {
		return Conversation{}, nil, ErrNotFound
	}
	return c.c, slices.Clone(c.turns), nil
}

// CreateTicket implements Store.
func (m *Memory) CreateTicket(_ context.Context, nt NewTicket, limits Limits) ([]ask.Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.convs[nt.ConversationID]
	key := nt.Owner.Key()
	if !ok || c.c.Owner.Key() != key {
		return nil, ErrNotFound
	}
	if t, dup := m.tickets[nt.ID]; dup {
		if t.t.ConversationID == nt.ConversationID && t.t.Owner.Key() == key && t.t.CreatedAt.Equal(nt.CreatedAt) &&
			len(t.events) > 0 && sameEvent(t.events[0], nt.Accepted) {
			return slices.Clone(c.turns), nil // the same call again: the ticket it created
		}
		return nil, ErrSeq
	}
	if c.running != "" {
		return nil, &ConflictError{Ticket: c.running}
	}
	if limits.MaxTurns > 0 && len(c.turns) >= limits.MaxTurns {
		return nil, ErrConversationFull
	}
	if limits.MaxInFlightPerOwner > 0 && m.inFlight[key] >= limits.MaxInFlightPerOwner {
		return nil, ErrTooManyInFlight
	}
	if limits.MaxRetainedPerOwner > 0 && m.heldOf[key] >= limits.MaxRetainedPerOwner {
		return nil, m.heldLocked(nt.Owner, false)
	}
	if limits.MaxTickets > 0 && len(m.tickets) >= limits.MaxTickets {
		return nil, ErrFull
	}
	if nt.Accepted.Seq != 1 {
		return nil, ErrSeq
	}
	for i, ev := range nt.Then {
		if ev.Seq != int64(i)+2 || ev.Type == gen.EventTypeStep {
			return nil, ErrSeq
		}
	}
	if _, dup := m.tickets[nt.ID]; dup {
		return nil, ErrSeq
	}
	m.tickets[nt.ID] = &memTicket{
		t: Ticket{
			ID:             nt.ID,
			ConversationID: nt.ConversationID,
			Owner:          nt.Owner,
			CreatedAt:      nt.CreatedAt,
			LastSeq:        1 + int64(len(nt.Then)),
		},
		// Room for the log's usual end (a branch close, the terminal, done) without regrowing.
		events:   append(append(make([]Event, 0, 1+len(nt.Then)+3), nt.Accepted), nt.Then...),
		question: nt.Question,
	}
	m.inFlight[key]++
	m.heldOf[key]++
	c.running = nt.ID
	c.epoch++ // no expiry while the ask runs: its end starts the idle time again
	return slices.Clone(c.turns), nil
}

// Ticket implements Store.
func (m *Memory) Ticket(_ context.Context, id string) (Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tickets[id]
	if !ok {
		return Ticket{}, ErrNotFound
	}
	return t.t, nil
}

// Question is the question ticket was created with (as store.Shared.Question).
func (m *Memory) Question(_ context.Context, ticket string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tickets[ticket]
	if !ok {
		return "", ErrNotFound
	}
	return t.question, nil
}

// Append implements Store.
func (m *Memory) Append(ctx context.Context, ticket string, ev Event) error {
	_, err := m.AppendBatch(ctx, ticket, []Event{ev})
	return err
}

// AppendBatch implements Store.
func (m *Memory) AppendBatch(_ context.Context, ticket string, evs []Event) (int, error) {
	if !runsOn(evs) {
		return 0, ErrSeq
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tickets[ticket]
	if !ok {
		return 0, ErrNotFound
	}
	from := 0
	if last, first := t.t.LastSeq, evs[0].Seq; first <= last {
		// A retry, whole or in part: the log's last entry is the batch's event at that seq.
		// (last - first wraps below zero for a batch that starts far enough below the log.)
		if d := last - first; d >= 0 && d < int64(len(evs)) {
			i := int(d)
			if n := len(t.events); n > 0 && sameEvent(t.events[n-1], evs[i]) {
				from = i + 1
				if from == len(evs) {
					return 0, nil
				}
			}
		}
	}
	if t.finished {
		return 0, ErrFinished
	}
	if evs[from].Seq != t.t.LastSeq+1 {
		return 0, ErrSeq
	}
	evicted := 0
	for _, ev := range evs[from:] {
		if m.appendLocked(t, ev) {
			evicted++
		}
	}
	t.notify()
	return evicted, nil
}

// runsOn reports whether evs is not empty and its seqs run on by one.
func runsOn(evs []Event) bool {
	for i := range evs {
		if evs[i].Seq != evs[0].Seq+int64(i) {
			return false
		}
	}
	return len(evs) > 0
}

// Finish implements Store.
func (m *Memory) Finish(ctx context.Context, ticket string, tail []Event, turn ask.Turn) error {
	_, err := m.FinishCounted(ctx, ticket, tail, turn)
	return err
}

// FinishCounted implements Store.
func (m *Memory) FinishCounted(_ context.Context, ticket string, tail []Event, turn ask.Turn) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.finishLocked(ticket, tail, turn, false)
}

// Restore ends a running ticket whose log no longer continues its runner's seqs, with a tail
// whose seqs come after every seq the runner assigned, leaving a gap before it
// (store.Shared.Restore's contract). The memory store loses nothing on its own, so only a
// fault in its caller (an append it refused as out of order) brings a run here; without it
// that run's log would never end. It never re-creates a ticket: one that is gone was closed
// with the store (ErrNotFound). Re-run with the same end, it answers ok.
func (m *Memory) Restore(_ context.Context, nt NewTicket, tail []Event, turn ask.Turn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.finishLocked(nt.ID, tail, turn, true)
	return err
}

// finishLocked appends tail, which holds the terminal event and done, and ends the ticket.
// The tail continues the log's last seq, or with gap set may start anywhere after it.
func (m *Memory) finishLocked(ticket string, tail []Event, turn ask.Turn, gap bool) (int, error) {
	t, ok := m.tickets[ticket]
	if !ok {
		return 0, ErrNotFound
	}
	if t.finished {
		if n := len(tail); n > 0 && t.t.Done != nil && sameEvent(*t.t.Done, tail[n-1]) {
			return 0, nil // the same end again
		}
		return 0, ErrFinished
	}
	next := t.t.LastSeq
	if gap && len(tail) > 0 && tail[0].Seq > next {
		next = tail[0].Seq - 1
	}
	var terminal, done *Event
	for i := range tail {
		next++
		if tail[i].Seq != next {
			return 0, ErrSeq
		}
		switch {
		case tail[i].Terminal():
			terminal = &tail[i]
		case tail[i].Type == gen.EventTypeDone:
			done = &tail[i]
		}
	}
	if terminal == nil || done == nil {
		return 0, ErrSeq
	}
	evicted := 0
	for _, ev := range tail {
		if m.appendLocked(t, ev) {
			evicted++
		}
	}
	term, dn := *terminal, *done
	t.t.Terminal, t.t.Done = &term, &dn
	t.finished = true
	t.notify()

	key := t.t.Owner.Key()
	if m.inFlight[key] <= 1 {
		delete(m.inFlight, key)
	} else {
		m.inFlight[key]--
	}
	if c, ok := m.convs[t.t.ConversationID]; ok && c.running == ticket {
		c.running = ""
		if turn != (ask.Turn{}) { // the zero turn records none (Store.Finish)
			c.turns = append(c.turns, turn)
		}
		m.expireConvLocked(c)
	}
	m.expireLocked(expiring{ticket: t})
	return evicted, nil
}

// Read implements Store.
func (m *Memory) Read(_ context.Context, ticket string, after int64) (Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tickets[ticket]
	if !ok {
		return Batch{}, ErrNotFound
	}
	i := sort.Search(len(t.events), func(i int) bool { return t.events[i].Seq > after })
	b := Batch{Events: t.retainedFrom(i), Finished: t.finished}
	if !t.finished {
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		b.Changed = t.changed
	}
	return b, nil
}

// errIDTaken: ids are random, so another's id is a bug, not a conflict to report.
var errIDTaken = errors.New("store: the id is already taken by another ticket or conversation")

// sameEvent reports whether a and b are the same event: a retried write, not a conflict.
func sameEvent(a, b Event) bool {
	return a.Seq == b.Seq && a.Type == b.Type && bytes.Equal(a.Data, b.Data)
}

// appendLocked appends ev, evicting the oldest step first when the log is full, and reports
// whether it evicted one.
func (m *Memory) appendLocked(t *memTicket, ev Event) bool {
	evicted := false
	if len(t.events)-t.dead >= m.maxEvents {
		evicted = t.evictOldestStep()
	}
	t.events = append(t.events, ev)
	t.t.LastSeq = ev.Seq
	return evicted
}

// evictOldestStep evicts the oldest retained step, if there is one, by moving scan past it;
// the log is compacted once more than half of it is evicted steps.
func (t *memTicket) evictOldestStep() bool {
	j := slices.IndexFunc(t.events[t.scan:], func(e Event) bool { return e.Type == gen.EventTypeStep })
	if j < 0 {
		t.scan = len(t.events) // no step left: nothing before the end needs scanning again
		return false
	}
	j += t.scan
	t.events[j].Data = nil // its payload is released now, its place at the next compaction
	t.scan = j + 1
	t.dead++
	if t.dead*2 > len(t.events) {
		kept := slices.DeleteFunc(t.events[:t.scan], func(e Event) bool { return e.Type == gen.EventTypeStep })
		n := copy(t.events[len(kept):], t.events[t.scan:])
		clear(t.events[len(kept)+n:])
		t.events = t.events[:len(kept)+n]
		t.scan, t.dead = len(kept), 0
	}
	return true
}

// retainedFrom returns a copy of the retained events from index i of the log on.
func (t *memTicket) retainedFrom(i int) []Event {
	if i >= t.scan || t.dead == 0 {
		return slices.Clone(t.events[i:])
	}
	out := make([]Event, 0, len(t.events)-i)
	for _, e := range t.events[i:t.scan] {
		if e.Type != gen.EventTypeStep {
			out = append(out, e)
		}
	}
	return append(out, t.events[t.scan:]...)
}

// notify wakes every reader waiting on the ticket's log.
func (t *memTicket) notify() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// expireConvLocked (re)starts the conversation's idle time: it expires the TTL from now unless
// it is touched again (or an ask starts in it) before.
func (m *Memory) expireConvLocked(c *memConv) {
	c.epoch++
	m.expireLocked(expiring{conv: c, epoch: c.epoch})
}

// The expiry queue. Everything expires the store's TTL after the moment it was queued, so the
// queue is in expiry order as it is appended to: one timer, armed for its head, serves it all
// (a timer per ticket and per conversation cost two allocations and a timer-heap update at
// every ask's start and end). A conversation touched again is queued again, with a new epoch;
// its earlier entries find the epoch moved on and do nothing. The queue is a list of fixed
// blocks, so it grows without copying what it holds.
type expiryQueue struct {
	blocks [][]expiring // blocks[0][head:], then the later blocks, are pending, in order
	head   int
	timer  *time.Timer // armed for the first pending entry while there is one
	t0     time.Time   // the origin of the entries' times (its monotonic reading)
}

// expiryBlock is how many entries a block holds (32 bytes each).
const expiryBlock = 256

// expiring is one entry: a ticket, or a conversation at one epoch, due at t0 + at.
type expiring struct {
	at     time.Duration
	ticket *memTicket
	conv   *memConv
	epoch  int
}

// expireLocked queues e to expire the TTL from now.
func (m *Memory) expireLocked(e expiring) {
	if m.closed {
		return
	}
	x := &m.expiries
	if x.t0.IsZero() {
		x.t0 = time.Now()
	}
	e.at = time.Since(x.t0) + m.ttl
	empty := x.empty()
	if n := len(x.blocks); n == 0 || len(x.blocks[n-1]) == expiryBlock {
		x.blocks = append(x.blocks, make([]expiring, 0, expiryBlock))
	}
	last := &x.blocks[len(x.blocks)-1]
	*last = append(*last, e)
	if empty {
		x.arm(m, m.ttl)
	}
}

func (x *expiryQueue) empty() bool {
	return len(x.blocks) == 0 || len(x.blocks) == 1 && x.head == len(x.blocks[0])
}

// arm sets the timer to fire after d.
func (x *expiryQueue) arm(m *Memory, d time.Duration) {
	if x.timer == nil {
		x.timer = time.AfterFunc(d, m.expired)
		return
	}
	x.timer.Reset(d)
}

// stop stops the timer and forgets the queue.
func (x *expiryQueue) stop() {
	if x.timer != nil {
		x.timer.Stop()
	}
	x.blocks, x.head = nil, 0
}

// expired is the timer's: it removes whatever is due and is still current, then re-arms for
// what is left.
func (m *Memory) expired() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	x := &m.expiries
	now := time.Since(x.t0)
	for !x.empty() {
		b := x.blocks[0]
		if x.head == len(b) { // a full block, spent: the next one
			x.blocks[0] = nil
			x.blocks, x.head = x.blocks[1:], 0
			continue
		}
		e := b[x.head]
		if e.at > now {
			x.arm(m, e.at-now)
			return
		}
		b[x.head] = expiring{}
		x.head++
		switch {
		case e.ticket != nil:
			id := e.ticket.t.ID
			if cur, ok := m.tickets[id]; ok && cur == e.ticket {
				delete(m.tickets, id)
				decrement(m.heldOf, e.ticket.t.Owner.Key())
				e.ticket.notify()
			}
		case e.conv != nil:
			id := e.conv.c.ID
			if cur, ok := m.convs[id]; ok && cur == e.conv && e.conv.epoch == e.epoch && e.conv.running == "" {
				delete(m.convs, id)
				decrement(m.convsOf, e.conv.c.Owner.Key())
			}
		}
	}
}

// maxDueScan bounds how many queued expiries heldLocked looks at, under the store's lock: the
// queue is every conversation's and finished ticket's, and a refused identity may ask again and
// again. 2048 take about 10 µs here, a fraction of a request's cost; past them the refusal gives
// the default hint, as when none is due.
const maxDueScan = 1 << 11

// heldLocked is the refusal of owner at its cap of conversations (convs) or retained
// tickets: a HeldError saying when the first of them is due to expire (expired takes them in
// queue order, which is due order), or ErrOwnerFull when none is due among the queue's first
// maxDueScan entries (every one of the owner's conversations in use by a running ask, say).
func (m *Memory) heldLocked(owner Owner, convs bool) error {
	x := &m.expiries
	if x.empty() {
		return ErrOwnerFull
	}
	now, n := time.Since(x.t0), 0
	for i, b := range x.blocks {
		if i == 0 {
			b = b[x.head:]
		}
		for _, e := range b {
			if n++; n > maxDueScan {
				return ErrOwnerFull
			}
			var current bool
			switch {
			case convs && e.conv != nil:
				c := e.conv
				current = c.c.Owner == owner && m.convs[c.c.ID] == c && c.epoch == e.epoch && c.running == ""
			case !convs && e.ticket != nil:
				tk := e.ticket
				current = tk.t.Owner == owner && m.tickets[tk.t.ID] == tk
			}
			if current {
				return &HeldError{Frees: max(e.at-now, time.Millisecond)} // due now: the timer is on its way
			}
		}
	}
	return ErrOwnerFull
}

// decrement takes one from counts[key], deleting the entry at zero so that owners who hold
// nothing cost nothing.
func decrement(counts map[string]int, key string) {
	if counts[key] <= 1 {
		delete(counts, key)
	} else {
		counts[key]--
	}
}
