package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/seal"
)

// CreateTicket implements store.Store. The creating instance becomes the ticket's runner and
// its lease starts.
func (s *Store) CreateTicket(ctx context.Context, nt store.NewTicket, limits store.Limits) ([]ask.Turn, error) {
	if nt.Accepted.Seq != 1 {
		return nil, store.ErrSeq
	}
	for i, ev := range nt.Then {
		if ev.Seq != int64(i)+2 || ev.Type == gen.EventTypeStep {
			return nil, store.ErrSeq
		}
	}
	if err := s.questionSafe(ctx); err != nil {
		return nil, err
	}
	// The ticket's bucket holds everything the script touches: the conversation is looked up
	// there (one of another bucket is another owner's, and is not found), and so are the
	// owner's counters.
	k, b := s.keys, s.keys.bucketOf(nt.ID)
	conv, tk := k.conv(b, nt.ConversationID), k.ticket(b, nt.ID)
	oc, ot := k.owners(b, nt.Owner)
	c := newEval(createTicket, 8, 14+3*len(nt.Then))
	c = append(c, conv, conv+":turns", tk, tk+":log", k.tickets(b), k.running(b), oc, ot,
		nt.ID, nt.ConversationID, nt.Owner.Tenant, nt.Owner.OID, nanos(nt.CreatedAt), s.sealAccepted(nt.ID, nt.Accepted.Data),
		limits.MaxInFlightPerOwner, k.perBucket(limits.MaxTickets), s.replica, ms(s.lease),
		limits.MaxRetainedPerOwner, limits.MaxTurns, len(nt.Then))
	for _, ev := range nt.Then {
		c = append(c, strconv.FormatInt(ev.Seq, 10), string(ev.Type), ev.Data)
	}
	c = append(c, s.sealQuestion(nt.ID, nt.Question))
	// The end watch is registered before the ticket exists, so the runner's lease watch
	// starts without a read (WatchFinished).
	w, made := s.hub.beforeCreate(nt.ID)
	cmd, f, queued := send(ctx, s.writes, c)
	if !queued {
		return s.createdNow(nt, w, made, noScript(ctx, s.writes, createTicket, c, cmd))
	}
	if err := f.WaitContext(ctx); err == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return s.createdNow(nt, w, made, noScript(ctx, s.writes, createTicket, c, cmd))
	}
	// The caller stopped waiting, and the call, on its way to Redis (the autopipeline does not
	// see a call's context once it is queued), cannot be taken back: it runs to the store's
	// answer (or its client's timeouts and retries), followed on a goroutine of the store, and
	// the caller gets a PendingError through which it learns how the creation ended.
	type result struct{ err error }
	done := make(chan result, 1)
	s.calls.Go(func() {
		_ = f.Wait()
		_, err := s.created(nt, w, made, noScript(context.WithoutCancel(ctx), s.writes, createTicket, c, cmd))
		done <- result{err}
	})
	return nil, &store.PendingError{Outcome: func(ctx context.Context) error {
		select {
		case r := <-done:
			done <- r // for a second look
			return r.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}

// createdNow is created for a reply the caller waited for. A call that failed without Redis's
// answer (its reply lost or timed out, no retry left: see outcomeUnknown) may have created the
// ticket all the same, which nobody would run or end before its lease lapsed; it is answered as
// a creation still pending whose outcome is unknown (a PendingError whose Outcome is the
// failure, ErrUnavailable), so that the caller ends whatever was made, as it does for a
// creation it stopped waiting for.
func (s *Store) createdNow(nt store.NewTicket, w *endWatch, made bool, cmd *goredis.Cmd) ([]ask.Turn, error) {
	turns, err := s.created(nt, w, made, cmd)
	if err != nil && outcomeUnknown(cmd.Err()) {
		return nil, &store.PendingError{Outcome: func(context.Context) error { return err }}
	}
	return turns, err
}

// outcomeUnknown reports whether a script call that failed may have run all the same: not when
// Redis answered (an error reply: it refused the call, which then wrote nothing), nor when the
// call never left (no connection could be made or had from the pool, the client closed).
func outcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	var reply goredis.Error
	var op *net.OpError
	switch {
	case errors.As(err, &reply),
		errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, goredis.ErrClosed), errors.Is(err, goredis.ErrPoolTimeout), errors.Is(err, goredis.ErrPoolExhausted):
		return false
	}
	return true
}

// created is CreateTicket's answer from the creation script's reply.
func (s *Store) created(nt store.NewTicket, w *endWatch, made bool, cmd *goredis.Cmd) ([]ask.Turn, error) {
	res, err := cmd.Slice()
	status := ""
	if err == nil {
		status, _ = res[0].(string)
	}
	s.hub.afterCreate(nt.ID, w, made, status == "ok")
	if err != nil {
		return nil, wrap(err)
	}
	switch status {
	case "ok":
		s.runs.put(nt.ID, nt.ConversationID, nt.Owner)
		raw, _ := res[1].([]any)
		strs := make([]string, 0, len(raw))
		for _, r := range raw {
			str, _ := r.(string)
			strs = append(strs, str)
		}
		return s.decodeTurns(nt.ConversationID, strs)
	case "conflict":
		running, _ := res[1].(string)
		return nil, &store.ConflictError{Ticket: running}
	case "ownerfull":
		due := ""
		if len(res) > 1 {
			due, _ = res[1].(string)
		}
		return nil, held(due)
	}
	return nil, statusErr(status)
}

// Ticket implements store.Store: the ticket's hash and, in the same read-only script
// (readTicket: served by a Redis that refuses writes), the log's last two entries, which are
// the terminal event and done of a finished ticket (the end script appends them last; the hash
// names their seqs). A finished ticket whose tail put them elsewhere has them read by seq.
func (s *Store) Ticket(ctx context.Context, id string) (store.Ticket, error) {
	b := s.keys.bucketOf(id)
	res, err := s.readScript(ctx, readTicket, []string{s.keys.ticket(b, id), s.keys.log(b, id)})
	if err != nil {
		return store.Ticket{}, err
	}
	if len(res) != 2 {
		return store.Ticket{}, errReply
	}
	m := hashOf(res[0])
	if len(m) == 0 {
		return store.Ticket{}, store.ErrNotFound
	}
	t := store.Ticket{
		ID:             id,
		ConversationID: m["conv"],
		Owner:          store.Owner{Tenant: m["tenant"], OID: m["oid"]},
		CreatedAt:      fromNanos(m["created"]),
		LastSeq:        atoi(m["last"]),
		Floor:          atoi(m["floor"]),
	}
	if q := m["q"]; strings.HasPrefix(q, seal.Prefix) {
		// Its key dropped, or replaced under the same id (a key made again and given the old
		// kid, which Knows cannot tell): the log's accepted no longer opens either. Opened, not
		// only its kid looked up: an audit found a replaced key's tickets answering their status
		// and a stream of no event that closed without done, which clients follow for ever.
		_, ok := s.open([]byte(q), questionAD(id))
		t.Shredded = !ok
	}
	if m["finished"] != "1" {
		return t, nil
	}
	t.Terminal = &store.Event{Seq: atoi(m["term_seq"]), Type: gen.EventType(m["term_type"]), Data: []byte(m["term"])}
	t.Done = &store.Event{Seq: atoi(m["done_seq"]), Type: gen.EventTypeDone, Data: []byte(m["done"])}
	if _, copied := m["done"]; copied {
		return t, nil // ended when the hash kept a copy of both
	}
	last, _ := res[1].([]any)
	for _, want := range []*store.Event{t.Terminal, t.Done} {
		found := false
		for _, e := range last {
			if ev, err := decodeEntry(e); err == nil && ev.Seq == want.Seq {
				want.Data, found = ev.Data, true
			}
		}
		if found {
			continue
		}
		e, err := s.rdb.Do(ctx, "XRANGE", s.keys.log(b, id), strconv.FormatInt(want.Seq, 10)+"-0", strconv.FormatInt(want.Seq, 10)+"-0").Slice()
		if err != nil {
			return store.Ticket{}, wrap(err)
		}
		if len(e) != 1 {
			return store.Ticket{}, store.ErrNotFound // the log expired with the hash, or is gone
		}
		ev, err := decodeEntry(e[0])
		if err != nil {
			return store.Ticket{}, err
		}
		want.Data = ev.Data
	}
	return t, nil
}

// Append implements store.Store. Only the ticket's runner may append (ErrFinished otherwise).
func (s *Store) Append(ctx context.Context, ticket string, ev store.Event) error {
	_, err := s.AppendBatch(ctx, ticket, []store.Event{ev})
	return err
}

// AppendBatch implements store.Store, in one script. Only the ticket's runner may append
// (ErrFinished otherwise).
func (s *Store) AppendBatch(ctx context.Context, ticket string, evs []store.Event) (int, error) {
	if len(evs) == 0 {
		return 0, store.ErrSeq
	}
	k, b := s.keys, s.keys.bucketOf(ticket)
	c := newEval(appendEvents, 3, 5+3*len(evs))
	c = append(c, k.ticket(b, ticket), k.log(b, ticket), k.steps(b, ticket),
		s.maxEvents, s.replica, k.changed(), s.notice(ticket, evs[len(evs)-1].Seq), len(evs))
	for i, ev := range evs {
		if ev.Seq != evs[0].Seq+int64(i) {
			return 0, store.ErrSeq
		}
		c = append(c, ev.Seq, string(ev.Type), ev.Data)
	}
	res, err := eval(ctx, s.writes, appendEvents, c).Slice()
	if err != nil {
		s.hub.changed(ticket, 0, false)
		return 0, wrap(err)
	}
	status, _ := res[0].(string)
	evicted, _ := res[1].(int64)
	if err := statusErr(status); err != nil {
		if errors.Is(err, store.ErrNotFound) && s.runs.endedBeforeLost(ticket) {
			return 0, store.ErrFinished // it ended elsewhere, then the store lost it: not restored
		}
		return 0, err
	}
	s.hub.wrote(ticket, evs, false, time.Time{}) // this instance reads its own writes at once
	return int(evicted), nil
}

// notice is an append's notification: the ticket, the last seq appended and this instance's
// replica name (notify.go).
func (s *Store) notice(ticket string, seq int64) string {
	return ticket + "\x00" + strconv.FormatInt(seq, 10) + "\x00" + s.replica
}

// Finish implements store.Store. Only the ticket's runner may finish it (ErrFinished
// otherwise).
func (s *Store) Finish(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn) error {
	_, err := s.FinishCounted(ctx, ticket, tail, turn)
	return err
}

// FinishCounted implements store.Store.
func (s *Store) FinishCounted(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn) (int, error) {
	return s.end(ctx, "own", ticket, tail, turn)
}

// End implements store.Shared.
func (s *Store) End(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn, lapsedOnly bool) error {
	mode := "any"
	if lapsedOnly {
		mode = "lapsed"
	}
	_, err := s.end(ctx, mode, ticket, tail, turn)
	return err
}

// Restore implements store.Shared.
func (s *Store) Restore(ctx context.Context, nt store.NewTicket, tail []store.Event, turn ask.Turn) error {
	defer s.runs.drop(nt.ID)
	// A ticket that is gone is re-created with everything its creation wrote (accepted and
	// nt.Then, the supervisor branch's open), so that the restored log opens the branch its
	// end closes: those are what was admitted, not what the store lost.
	then := nt.Then
	for i, ev := range then {
		if ev.Seq != int64(i)+2 || ev.Type == gen.EventTypeStep {
			then = nil // not what CreateTicket takes: accepted alone, as before
			break
		}
	}
	extra := []any{nt.Owner.Tenant, nt.Owner.OID, nanos(nt.CreatedAt), s.sealAccepted(nt.ID, nt.Accepted.Data), s.sealQuestion(nt.ID, nt.Question), len(then)}
	for _, ev := range then {
		extra = append(extra, strconv.FormatInt(ev.Seq, 10), string(ev.Type), ev.Data)
	}
	// A conversation that is gone too is re-created only if it held no turns (NewTicket.Turns),
	// and only within the caps the ticket was admitted under (NewTicket.Limits).
	extra = append(extra, nt.Turns, nt.Limits.MaxConversationsPerOwner, s.keys.perBucket(nt.Limits.MaxTickets), ms(s.recheck))
	_, err := s.run(ctx, "restore", nt.ID, nt.ConversationID, nt.Owner, tail, turn, extra...)
	return err
}

// Question implements store.Shared: the ticket's q field, opened. A ticket created before the
// store kept it there has its question read from its accepted event instead.
func (s *Store) Question(ctx context.Context, ticket string) (string, error) {
	b := s.keys.bucketOf(ticket)
	q, err := s.rdb.HGet(ctx, s.keys.ticket(b, ticket), "q").Result()
	if err == nil {
		plain, ok := s.open([]byte(q), questionAD(ticket))
		if !ok {
			return "", store.ErrNotFound // crypto-shredded, as Read answers
		}
		var question string
		if err := json.Unmarshal(plain, &question); err != nil {
			return "", errors.New("redis store: the ticket's question is not a JSON string")
		}
		return question, nil
	}
	if !errors.Is(err, goredis.Nil) {
		return "", wrap(err)
	}
	batch, err := s.Read(ctx, ticket, 0)
	if err != nil {
		return "", err
	}
	if len(batch.Events) == 0 || batch.Events[0].Type != gen.EventTypeAccepted {
		return "", store.ErrNotFound
	}
	var acc struct {
		Question string `json:"question"`
	}
	if err := json.Unmarshal(batch.Events[0].Data, &acc); err != nil {
		return "", errors.New("redis store: the ticket's accepted event is not valid JSON")
	}
	return acc.Question, nil
}

func (s *Store) end(ctx context.Context, mode, ticket string, tail []store.Event, turn ask.Turn) (int, error) {
	// The ticket's conversation and owner never change once it exists, so reading them ahead
	// of the script names its keys without a race. This instance knows them of the tickets it
	// created (it runs them): no read then.
	if r, ok := s.runs.get(ticket); ok {
		n, err := s.run(ctx, mode, ticket, r.conv, r.owner, tail, turn)
		if err == nil || errors.Is(err, store.ErrFinished) || errors.Is(err, store.ErrNotFound) {
			s.runs.drop(ticket)
		}
		return n, err
	}
	h, err := s.rdb.HMGet(ctx, s.keys.ticket(s.keys.bucketOf(ticket), ticket), "conv", "tenant", "oid").Result()
	if err != nil {
		return 0, wrap(err)
	}
	conv, _ := h[0].(string)
	tenant, _ := h[1].(string)
	oid, _ := h[2].(string)
	if h[0] == nil {
		return 0, store.ErrNotFound
	}
	return s.run(ctx, mode, ticket, conv, store.Owner{Tenant: tenant, OID: oid}, tail, turn)
}

// endKeys is endTicket's key count.
const endKeys = 10

// run runs endTicket in mode; extra follows the tail's events (mode restore). It answers the
// steps the bound evicted for the tail (0 for a retry that finds the end written).
func (s *Store) run(ctx context.Context, mode, ticket, conv string, owner store.Owner, tail []store.Event, turn ask.Turn, extra ...any) (int, error) {
	term, done := -1, -1
	for i, ev := range tail {
		switch {
		case ev.Terminal():
			term = i
		case ev.Type == gen.EventTypeDone:
			done = i
		}
	}
	if term < 0 || done < 0 {
		return 0, store.ErrSeq
	}
	if err := s.questionSafe(ctx); err != nil { // the turn holds the question, a restore the accepted event too
		return 0, err
	}
	tj, err := s.encodeTurn(conv, turn)
	if err != nil {
		return 0, fmt.Errorf("redis store: encode the turn: %w", err)
	}
	k, b := s.keys, s.keys.bucketOf(ticket)
	sent := time.Now()
	tk, cv := k.ticket(b, ticket), k.conv(b, conv)
	oc, ot := k.owners(b, owner)
	c := newEval(endTicket, endKeys, 11+3*len(tail)+len(extra))
	c = append(c, tk, tk+":log", tk+":steps", cv, cv+":turns", k.running(b), k.tickets(b), k.convs(b), oc, ot,
		mode, s.replica, k.ended(), ticket, conv, ms(s.ttl), s.maxEvents, tj, term, done, len(tail))
	for _, ev := range tail {
		c = append(c, strconv.FormatInt(ev.Seq, 10), string(ev.Type), ev.Data)
	}
	c = append(c, extra...)
	var res any
	if mode == "own" { // the runs' own ends, which come together under load, share calls (ends.go)
		res, err = s.ends.run(ctx, b, c)
	} else {
		res, err = eval(ctx, s.writes, endTicket, c).Result()
	}
	n, err := endReply(res, err)
	switch {
	case err != nil:
		s.hub.changed(ticket, 0, false)
	case mode == "restore":
		s.hub.forget(ticket) // the log may have been re-created
	default:
		// This instance reads its own end at once; the ticket expires TTL after the
		// script ran, so no earlier than TTL from now.
		s.hub.wrote(ticket, tail, true, sent.Add(s.ttl))
	}
	return n, err
}

// endReply is the end script's answer: its status, and the steps it evicted.
func endReply(res any, err error) (int, error) {
	if err != nil {
		return 0, wrap(err)
	}
	switch v := res.(type) {
	case string:
		return 0, statusErr(v)
	case []any:
		status, _ := v[0].(string)
		if status == "error" && len(v) > 1 { // an end that raised an error inside endTickets
			return 0, wrap(replyError(fmt.Sprint(v[1])))
		}
		var n int64
		if len(v) > 1 {
			n, _ = v[1].(int64)
		}
		return int(n), statusErr(status)
	}
	return 0, fmt.Errorf("redis store: unexpected reply %T from the end script", res)
}

// runs are the conversation and owner of the tickets this instance created and has not ended,
// nor found ended by another (its watch or renewal finding the ticket finished): what Finish
// needs to name the script's keys. Bounded: past maxRuns entries (runs lost without
// an end) it starts afresh, and Finish reads what it does not know.
type runs struct {
	mu sync.Mutex
	m  map[string]runOf
}

type runOf struct {
	conv  string
	owner store.Owner
	// endHeard: an end notification named the ticket while this instance ran it. A run whose
	// end another replica wrote (a cancel sent there, a lapse) may not have read it before the
	// store lost the ticket (a runner frozen, or slow, across a Redis restart): the ticket it
	// then finds gone had ended, at seqs its readers may have read, and is not restored.
	endHeard bool
}

const maxRuns = 1 << 16

func (r *runs) put(ticket, conv string, owner store.Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= maxRuns {
		r.m = map[string]runOf{}
	}
	r.m[ticket] = runOf{conv: conv, owner: owner}
}

func (r *runs) get(ticket string) (runOf, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[ticket]
	return v, ok
}

// heardEnd marks ticket, if this instance runs it, as named by an end notification.
func (r *runs) heardEnd(ticket string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.m[ticket]; ok {
		v.endHeard = true
		r.m[ticket] = v
	}
}

// endedBeforeLost reports whether ticket, which this instance runs and the store no longer
// holds, was named by an end notification first: it ended (elsewhere) before the store lost it.
func (r *runs) endedBeforeLost(ticket string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[ticket].endHeard
}

func (r *runs) drop(ticket string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, ticket)
}
