package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// CreateConversation implements store.Store.
func (s *Store) CreateConversation(ctx context.Context, c store.Conversation, limits store.Limits) error {
	k, b := s.keys, s.keys.bucketOf(c.ID)
	res, err := createConversation.Run(ctx, s.rdb,
		[]string{k.conv(b, c.ID), k.turns(b, c.ID), k.convs(b), k.ownerConvs(b, c.Owner), k.ownerTickets(b, c.Owner)},
		c.ID, c.Owner.Tenant, c.Owner.OID, nanos(c.CreatedAt), ms(s.ttl), k.perBucket(limits.MaxTickets),
		limits.MaxConversationsPerOwner, ms(s.recheck)).Text()
	if err != nil && !outcomeUnknown(err) {
		// Refused unrun (TRYAGAIN while the slot migrates, say): nothing was created, which
		// the service needs to know to free a keyed create's Idempotency-Key at once.
		return fmt.Errorf("%w (%w)", wrap(err), store.ErrNotRun)
	}
	if err != nil {
		return wrap(err)
	}
	if due, ok := strings.CutPrefix(res, "ownerfull "); ok {
		return held(due)
	}
	return statusErr(res)
}

// held is the refusal at an owner's cap whose first entry is due in due ms (first_due).
func held(due string) error {
	if ms, err := strconv.ParseInt(due, 10, 64); err == nil && ms > 0 {
		return &store.HeldError{Frees: time.Duration(ms) * time.Millisecond}
	}
	return store.ErrOwnerFull
}

// DropConversation implements store.Shared: dropConversation, in c's bucket.
func (s *Store) DropConversation(ctx context.Context, c store.Conversation) (bool, error) {
	k, b := s.keys, s.keys.bucketOf(c.ID)
	res, err := dropConversation.Run(ctx, s.rdb,
		[]string{k.conv(b, c.ID), k.turns(b, c.ID), k.convs(b), k.ownerConvs(b, c.Owner)},
		c.ID, c.Owner.Tenant, c.Owner.OID, nanos(c.CreatedAt), ms(s.ttl)).Text()
	switch {
	case err != nil:
		return false, wrap(err)
	case res == "ok":
		return true, nil
	case res == "absent":
		return false, nil
	case res == "used":
		return false, store.ErrConflict
	}
	return false, statusErr(res)
}

// Conversation implements store.Store: the hash and the turns in one read-only script
// (readConversation: served by a Redis that refuses writes).
func (s *Store) Conversation(ctx context.Context, id string) (store.Conversation, []ask.Turn, error) {
	b := s.keys.bucketOf(id)
	res, err := s.readScript(ctx, readConversation, []string{s.keys.conv(b, id), s.keys.turns(b, id)})
	if err != nil {
		return store.Conversation{}, nil, err
	}
	if len(res) != 2 {
		return store.Conversation{}, nil, errReply
	}
	m := hashOf(res[0])
	if len(m) == 0 || m["dropped"] != "" { // dropped: what dropConversation leaves
		return store.Conversation{}, nil, store.ErrNotFound
	}
	turns, err := s.decodeTurns(id, stringsOf(res[1]))
	if err != nil {
		return store.Conversation{}, nil, err
	}
	return store.Conversation{
		ID:        id,
		Owner:     store.Owner{Tenant: m["tenant"], OID: m["oid"]},
		CreatedAt: fromNanos(m["created"]),
	}, turns, nil
}

// turn is a conversation turn as Redis holds it.
type turn struct {
	Question string        `json:"q"`
	Outcome  gen.EventType `json:"o"`
	Text     string        `json:"x"`
}

// encodeTurn is a turn of conversation conv as Redis holds it: JSON, sealed when the store
// seals (it holds the question).
// The zero turn, which records none (store.Store.Finish), is "", which the end scripts skip.
func (s *Store) encodeTurn(conv string, t ask.Turn) (string, error) {
	if t == (ask.Turn{}) {
		return "", nil
	}
	b, err := json.Marshal(turn{Question: t.Question, Outcome: t.Outcome, Text: t.Text})
	if err != nil {
		return "", err
	}
	if s.seal != nil {
		b = s.seal.Seal(b, turnAD(conv))
	}
	return string(b), nil
}

// decodeTurns decodes conversation conv's turns. A turn sealed with a key that is no longer
// configured is crypto-shredded: it is left out, and the conversation goes on without it.
func (s *Store) decodeTurns(conv string, raw []string) ([]ask.Turn, error) {
	var out []ask.Turn
	for _, r := range raw {
		b, ok := s.open([]byte(r), turnAD(conv))
		if !ok {
			continue
		}
		var t turn
		if err := json.Unmarshal(b, &t); err != nil {
			// Not the turn's content: it may hold the question.
			return nil, fmt.Errorf("redis store: a conversation turn is not valid JSON")
		}
		out = append(out, ask.Turn{Question: t.Question, Outcome: t.Outcome, Text: t.Text})
	}
	return out, nil
}

// statusErr maps a script's status word to the store's errors.
func statusErr(status string) error {
	switch status {
	case "ok":
		return nil
	case "notfound":
		return store.ErrNotFound
	case "full":
		return store.ErrFull
	case "inflight":
		return store.ErrTooManyInFlight
	case "ownerfull":
		return store.ErrOwnerFull
	case "turns":
		return store.ErrConversationFull
	case "finished":
		return store.ErrFinished
	case "seq":
		return store.ErrSeq
	case "held":
		return store.ErrLeaseHeld
	case "taken":
		// Ids are random (128 bits): another's id is a bug, not a conflict to report.
		return errors.New("redis store: the id is already taken by another ticket or conversation")
	}
	return fmt.Errorf("redis store: unexpected script status %q", status)
}
