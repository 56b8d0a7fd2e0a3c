package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/das-ask/ask/gen"
)

// Event is one event of a ticket's stream.
//
// Value holds the event decoded into its generated type — gen.AcceptedEvent, gen.BranchEvent,
// gen.StepEvent, gen.MilestoneEvent, gen.AnswerEvent, gen.AbstentionEvent, gen.RefusalEvent,
// gen.ErrorEvent or gen.DoneEvent — or an [UnknownEvent] for a type this client does not know,
// so a type switch on Value covers the contract and tolerates its growth.
type Event struct {
	// Seq is the event's seq (its SSE id).
	Seq int64
	// Type is the event's type as sent; it may be one this client does not know.
	Type gen.EventType
	// Value is the typed event (see above).
	Value any
	// Data is the event exactly as the service sent it: one JSON object.
	Data json.RawMessage
	// MissedSteps is set on the done event only: how many of the run's tool calls (done.steps)
	// this stream never delivered as step events, because the service evicted them before they
	// were read. Zero when every step was seen.
	MissedSteps int64
}

// UnknownEvent is an event whose type this client does not know. It is passed through, not
// treated as an error: the contract says clients must tolerate new types.
type UnknownEvent struct {
	// Type is the event's type as sent.
	Type string
	// Seq is the event's seq.
	Seq int64
	// Data is the event exactly as the service sent it.
	Data json.RawMessage
}

// Outcome reports how the run ends if e is its terminal event: Answer, Abstention, Refusal or
// Error; for every other event (done included) it returns NotTerminal.
func (e Event) Outcome() OutcomeKind {
	switch e.Value.(type) {
	case gen.AnswerEvent:
		return Answer
	case gen.AbstentionEvent:
		return Abstention
	case gen.RefusalEvent:
		return Refusal
	case gen.ErrorEvent:
		return Error
	}
	return NotTerminal
}

// IsDone reports whether e is the done event, always the last of a run.
func (e Event) IsDone() bool {
	_, ok := e.Value.(gen.DoneEvent)
	return ok
}

// decodeEvent decodes one frame's data. The type comes from the data's own "type" (the
// contract's discriminator), falling back to the SSE event name; the seq from the data, falling
// back to the SSE id. Data that is not JSON (or is null, an array, a string, a number) is an error
// whatever the type; an unknown type's JSON yields an UnknownEvent; a known type whose data does
// not decode, or an outcome, branch or milestone without a field the contract requires
// (contractFault), is an error, since no retry can repair it.
func decodeEvent(f frame) (Event, error) {
	var head struct {
		Type *string `json:"type"`
		Seq  *int64  `json:"seq"`
	}
	raw := json.RawMessage(f.data)
	headErr := json.Unmarshal(raw, &head)
	if headErr == nil && !jsonObject(raw) {
		headErr = errors.New("not an object") // null, which decodes into a struct as nothing
	}
	typ := f.typ
	if headErr == nil && head.Type != nil {
		typ = *head.Type
	}
	ev := Event{Type: gen.EventType(typ), Data: raw}
	if headErr == nil && head.Seq != nil {
		ev.Seq = *head.Seq
	} else if n, err := strconv.ParseInt(f.id, 10, 64); err == nil {
		ev.Seq = n
	}
	// Data that does not decode is final whatever the type: an unknown type's too, which was
	// passed on as an UnknownEvent (whose Data is one JSON object) and the stream went on.
	if headErr != nil {
		// Never the decoder's message: a syntax error quotes the character it could not read,
		// and an accepted event's data is the question. Nor an event name the contract does not
		// have: it is the service's text, which may be the question too.
		name := typ
		if !ev.Type.Valid() {
			name = "unknown-type"
		}
		var syn *json.SyntaxError
		if errors.As(headErr, &syn) {
			return Event{}, fmt.Errorf("client: %s event %d is not JSON (at byte %d)", name, ev.Seq, syn.Offset)
		}
		return Event{}, fmt.Errorf("client: %s event %d is not a JSON object", name, ev.Seq)
	}
	if !ev.Type.Valid() {
		ev.Value = UnknownEvent{Type: typ, Seq: ev.Seq, Data: raw}
		return ev, nil
	}
	var u gen.Event
	if err := u.UnmarshalJSON(raw); err != nil {
		return Event{}, fmt.Errorf("client: %s event %d: %w", typ, ev.Seq, err)
	}
	v, err := u.ValueByDiscriminator()
	if err != nil {
		return Event{}, fmt.Errorf("client: %s event %d: %w", typ, ev.Seq, err)
	}
	if fault := contractFault(ev.Type, raw); fault != "" {
		return Event{}, fmt.Errorf("client: %s event %d is not the contract's: %s", typ, ev.Seq, fault)
	}
	ev.Value = v
	return ev, nil
}
