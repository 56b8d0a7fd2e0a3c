package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// CreateTicket implements store.Store. The creating instance becomes the ticket's runner and
// its lease starts.
func (s *Store) CreateTicket(ctx context.Context, nt store.NewTicket, limits store.Limits) ([]ask.Turn, error) {
	if nt.Accepted.Seq != 1 {
		return nil, store.ErrSeq
	}
	k := s.keys
	res, err := createTicket.Run(ctx, s.rdb,
		[]string{k.conv(nt.ConversationID), k.turns(nt.ConversationID), k.ticket(nt.ID), k.log(nt.ID), k.steps(nt.ID),
			k.tickets(), k.inflight(), k.running(), k.convs(), k.ownerConvs(nt.Owner), k.ownerTickets(nt.Owner)},
		nt.ID, nt.ConversationID, nt.Owner.Tenant, nt.Owner.OID, nanos(nt.CreatedAt), s.sealAccepted(nt.ID, nt.Accepted.Data),
		limits.MaxInFlightPerOwner, limits.MaxTickets, s.replica, ms(s.lease),
		limits.MaxRetainedPerOwner, limits.MaxTurns).Slice()
	if err != nil {
		return nil, wrap(err)
	}
	status, _ := res[0].(string)
	switch status {
	case "ok":
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
	}
	return nil, statusErr(status)
}

// Ticket implements store.Store.
func (s *Store) Ticket(ctx context.Context, id string) (store.Ticket, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.ticket(id)).Result()
	if err != nil {
		return store.Ticket{}, wrap(err)
	}
	if len(m) == 0 {
		return store.Ticket{}, store.ErrNotFound
	}
	t := store.Ticket{
		ID:             id,
		ConversationID: m["conv"],
		Owner:          store.Owner{Tenant: m["tenant"], OID: m["oid"]},
		CreatedAt:      fromNanos(m["created"]),
		LastSeq:        atoi(m["last"]),
	}
	if m["finished"] == "1" {
		t.Terminal = &store.Event{Seq: atoi(m["term_seq"]), Type: gen.EventType(m["term_type"]), Data: []byte(m["term"])}
		t.Done = &store.Event{Seq: atoi(m["done_seq"]), Type: gen.EventTypeDone, Data: []byte(m["done"])}
	}
	return t, nil
}

// Append implements store.Store. Only the ticket's runner may append (ErrFinished otherwise).
func (s *Store) Append(ctx context.Context, ticket string, ev store.Event) error {
	k := s.keys
	res, err := appendEvent.Run(ctx, s.rdb, []string{k.ticket(ticket), k.log(ticket), k.steps(ticket)},
		ev.Seq, string(ev.Type), ev.Data, s.maxEvents, s.replica, k.changed(), s.notice(ticket, ev.Seq)).Text()
	if err != nil {
		s.hub.changed(ticket, 0, false)
		return wrap(err)
	}
	if err := statusErr(res); err != nil {
		return err
	}
	s.hub.wrote(ticket, []store.Event{ev}, false, time.Time{}) // this instance reads its own writes at once
	return nil
}

// notice is an append's notification: the ticket, the last seq appended and this instance's
// replica name (notify.go).
func (s *Store) notice(ticket string, seq int64) string {
	return ticket + "\x00" + strconv.FormatInt(seq, 10) + "\x00" + s.replica
}

// Finish implements store.Store. Only the ticket's runner may finish it (ErrFinished
// otherwise).
func (s *Store) Finish(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn) error {
	return s.end(ctx, "own", ticket, tail, turn)
}

// End implements store.Shared.
func (s *Store) End(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn, lapsedOnly bool) error {
	mode := "any"
	if lapsedOnly {
		mode = "lapsed"
	}
	return s.end(ctx, mode, ticket, tail, turn)
}

// Restore implements store.Shared.
func (s *Store) Restore(ctx context.Context, nt store.NewTicket, tail []store.Event, turn ask.Turn) error {
	return s.run(ctx, "restore", nt.ID, nt.ConversationID, nt.Owner, tail, turn,
		nt.Owner.Tenant, nt.Owner.OID, nanos(nt.CreatedAt), s.sealAccepted(nt.ID, nt.Accepted.Data))
}

func (s *Store) end(ctx context.Context, mode, ticket string, tail []store.Event, turn ask.Turn) error {
	// The ticket's conversation and owner never change once it exists, so reading them ahead
	// of the script names its keys without a race.
	h, err := s.rdb.HMGet(ctx, s.keys.ticket(ticket), "conv", "tenant", "oid").Result()
	if err != nil {
		return wrap(err)
	}
	conv, _ := h[0].(string)
	tenant, _ := h[1].(string)
	oid, _ := h[2].(string)
	if h[0] == nil {
		return store.ErrNotFound
	}
	return s.run(ctx, mode, ticket, conv, store.Owner{Tenant: tenant, OID: oid}, tail, turn)
}

// run runs endTicket in mode; extra follows the tail's events (mode restore).
func (s *Store) run(ctx context.Context, mode, ticket, conv string, owner store.Owner, tail []store.Event, turn ask.Turn, extra ...any) error {
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
		return store.ErrSeq
	}
	tj, err := s.encodeTurn(conv, turn)
	if err != nil {
		return fmt.Errorf("redis store: encode the turn: %w", err)
	}
	k := s.keys
	sent := time.Now()
	args := []any{mode, s.replica, k.ended(), ticket, conv, ms(s.ttl), s.maxEvents, tj, term, done, len(tail)}
	for _, ev := range tail {
		args = append(args, strconv.FormatInt(ev.Seq, 10), string(ev.Type), ev.Data)
	}
	args = append(args, extra...)
	res, err := endTicket.Run(ctx, s.rdb,
		[]string{k.ticket(ticket), k.log(ticket), k.steps(ticket), k.conv(conv), k.turns(conv),
			k.inflight(), k.running(), k.tickets(), k.convs(), k.ownerConvs(owner), k.ownerTickets(owner)}, args...).Text()
	if err == nil {
		err = statusErr(res)
	} else {
		err = wrap(err)
	}
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
	return err
}
