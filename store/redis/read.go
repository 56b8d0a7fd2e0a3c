package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// Read implements store.Store: XRANGE from the entry after the cursor (entry ids are
// "<seq>-0"), read in one transaction with the finished flag. The change channel is
// registered before the read, and every append publishes the ticket on the change channel
// from inside its script, so a change after the read always closes the channel: replay, then
// live, with neither a gap nor a duplicate.
func (s *Store) Read(ctx context.Context, ticket string, after int64) (store.Batch, error) {
	changed := s.waiters.wait(ticket)
	var fin *goredis.StringCmd
	var xr *goredis.XMessageSliceCmd
	bk := s.keys.bucketOf(ticket)
	_, err := s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		fin = p.HGet(ctx, s.keys.ticket(bk, ticket), "finished")
		xr = p.XRange(ctx, s.keys.log(bk, ticket), strconv.FormatInt(after+1, 10)+"-0", "+")
		return nil
	})
	if err != nil && err != goredis.Nil {
		return store.Batch{}, wrap(err)
	}
	if fin.Err() == goredis.Nil {
		s.waiters.wake(ticket) // nothing will ever change: release the channel
		return store.Batch{}, store.ErrNotFound
	}
	if fin.Err() != nil {
		return store.Batch{}, wrap(fin.Err())
	}
	b := store.Batch{Finished: fin.Val() == "1"}
	for _, m := range xr.Val() {
		ev, err := eventOf(m)
		if err != nil {
			return store.Batch{}, err
		}
		if ev.Type == gen.EventTypeAccepted {
			data, ok := s.open(ev.Data, acceptedAD(ticket))
			if !ok {
				// Sealed with a key that is no longer configured: crypto-shredded, so the
				// ticket is gone for every reader.
				return store.Batch{}, store.ErrNotFound
			}
			ev.Data = data
		}
		b.Events = append(b.Events, ev)
	}
	if b.Finished {
		// Nothing more will come; release the channel (its other readers read again and
		// see the end too).
		s.waiters.wake(ticket)
	} else {
		b.Changed = changed
	}
	return b, nil
}

// eventOf decodes a log entry: id "<seq>-0", fields t (type) and d (data).
func eventOf(m goredis.XMessage) (store.Event, error) {
	ms, _, _ := strings.Cut(m.ID, "-")
	seq, _ := strconv.ParseInt(ms, 10, 64)
	typ, _ := m.Values["t"].(string)
	data, _ := m.Values["d"].(string)
	if seq == 0 || typ == "" {
		return store.Event{}, fmt.Errorf("redis store: log entry %q is not an event", m.ID)
	}
	return store.Event{Seq: seq, Type: gen.EventType(typ), Data: []byte(data)}, nil
}
