package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
)

// sameAsMarshal fails t unless appendBody's bytes for body are json.Marshal's, and it took body.
func sameAsMarshal(t *testing.T, body any) {
	t.Helper()
	want, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendBody([]byte("x"), body)
	if _, own := ownBody(body); !ok || !own {
		t.Fatalf("appendBody(%T) not taken", body)
	}
	if string(got) != "x"+string(want) {
		t.Errorf("appendBody(%#v)\n got x%s\nwant x%s", body, got[1:], want)
	}
}

// TestBodies holds the service's hand-written body encoders to json.Marshal, byte for byte,
// and the event they make to the one json.Marshal's body would make.
func TestBodies(t *testing.T) {
	src, parent := "catalog", "b1"
	odd := "é <&> \"q\" \\ \x00 \u2028 \xff"
	for _, body := range []any{
		gen.AcceptedBody{Question: "How many sev1 incidents did we have in 2026-Q2?"},
		gen.AcceptedBody{Question: odd},
		gen.AcceptedBody{},
		supervisorOpen,
		gen.BranchBody{BranchId: "b2", Parent: &parent, Role: "source", Source: &src, State: gen.BranchBodyStateClose},
		&gen.BranchBody{BranchId: odd, Role: odd, Source: &odd, State: gen.BranchBodyState(odd)},
		gen.DoneBody{Outcome: gen.DoneBodyOutcomeAnswer, Steps: 3, ModelCalls: 2, InputTokens: 1 << 40, OutputTokens: -1, ElapsedMs: 41_999},
		gen.DoneBody{},
		gen.ErrorBody{Kind: gen.ErrorKindCancelled, Message: "the ask was cancelled"},
		&gen.ErrorBody{Kind: gen.ErrorKind(odd), Message: odd},
	} {
		sameAsMarshal(t, body)
		env := envelope{seq: 7, ticket: "t_X", conv: "c_Y", ts: time.Unix(1, 5).UTC(), typ: gen.EventTypeBranch}
		ev, err := encodeEvent(env, body)
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		if err := json.Unmarshal(ev.Data, &got); err != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		b, _ := json.Marshal(body)
		_ = json.Unmarshal(b, &want)
		for k, v := range want {
			if g, ok := got[k]; !ok || !jsonEqual(g, v) {
				t.Errorf("event %s: %s = %v, want %v", ev.Data, k, g, v)
			}
		}
		if got["seq"] != float64(7) || got["ticket"] != "t_X" || got["type"] != "branch" {
			t.Errorf("event %s: envelope wrong", ev.Data)
		}
	}
	var nilErr *gen.ErrorBody
	if _, own := ownBody(nilErr); own {
		t.Error("ownBody takes a nil body")
	}
	if _, own := ownBody(gen.StepBody{}); own {
		t.Error("ownBody takes a body appendBody does not encode")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestAppendTicket holds the 202's encoder to json.Marshal, and to its error.
func TestAppendTicket(t *testing.T) {
	for _, created := range []time.Time{
		time.Date(2026, 12, 2, 17, 4, 5, 123456789, time.UTC),
		time.Date(2026, 12, 2, 17, 4, 5, 0, time.UTC),
		time.Date(2026, 12, 2, 17, 4, 5, 0, time.FixedZone("x", 3600)),
		{},
	} {
		tk := ticketBody("/ask", "t_A", "c_B", created)
		want, _ := json.Marshal(tk)
		got, err := appendTicket(nil, tk)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendTicket(%v) = %s, %v; want %s", created, got, err, want)
		}
	}
	if _, err := appendTicket(nil, ticketBody("", "t", "c", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))); err == nil {
		t.Error("appendTicket took a time json.Marshal refuses")
	}
}

func FuzzBodies(f *testing.F) {
	f.Add("b1", "supervisor", "open", "", "", int64(1), int64(2), "cancelled", "a message")
	f.Add("é<", "\u2028", "\x00", "s", "p", int64(-1), int64(1<<62), "\xff", "\"\\")
	f.Fuzz(func(t *testing.T, id, role, state, source, parent string, n, m int64, kind, msg string) {
		br := gen.BranchBody{BranchId: id, Role: role, State: gen.BranchBodyState(state)}
		if source != "" {
			br.Source = &source
		}
		if parent != "" {
			br.Parent = &parent
		}
		sameAsMarshal(t, br)
		sameAsMarshal(t, gen.AcceptedBody{Question: msg})
		sameAsMarshal(t, gen.ErrorBody{Kind: gen.ErrorKind(kind), Message: msg})
		sameAsMarshal(t, gen.DoneBody{Outcome: gen.DoneBodyOutcome(kind), Steps: n, ModelCalls: m, InputTokens: n ^ m, OutputTokens: m - n, ElapsedMs: n})
		tk := ticketBody(id, role, state, time.Unix(0, n).UTC())
		want, werr := json.Marshal(tk)
		got, gerr := appendTicket(nil, tk)
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != string(want)) {
			t.Fatalf("appendTicket = %s, %v; json.Marshal = %s, %v", got, gerr, want, werr)
		}
	})
}

// TestEncodeOwnEventOnce: an event of the service's own, with ids as newID mints them, is
// encoded in one allocation (its buffer is sized up front).
func TestEncodeOwnEventOnce(t *testing.T) {
	env := envelope{seq: 123, ticket: "t_GEN0-ABCDEFGHIJKLMNOPQRSTUVWXYZ-b15", conv: "c_GEN0-ABCDEFGHIJKLMNOPQRSTUVWXYZ-b15",
		ts: time.Now(), typ: gen.EventTypeBranch}
	for _, body := range []any{
		gen.AcceptedBody{Question: "How many sev1 incidents did we have in 2026-Q2?"},
		supervisorOpen,
		gen.BranchBody{BranchId: supervisorBranch, Role: "supervisor", State: gen.BranchBodyStateClose},
		gen.DoneBody{Outcome: gen.DoneBodyOutcomeAnswer, Steps: 1 << 20, ModelCalls: 1 << 20, InputTokens: 1 << 40, OutputTokens: 1 << 40, ElapsedMs: 1 << 30},
		&gen.ErrorBody{Kind: gen.ErrorKindInterrupted, Message: "the service's store lost part of this ask's log (a restart, or a fault); the events it lost are not in the log"},
	} {
		if n := testing.AllocsPerRun(50, func() { _, _ = encodeEvent(env, body) }); n != 1 {
			t.Errorf("encodeEvent(%T): %.0f allocations, want 1", body, n)
		}
	}
}

// TestTicketResponseOnce: the 202's body, for ids as newID mints them under a long base path,
// is written into one buffer sized up front.
func TestTicketResponseOnce(t *testing.T) {
	base := "/a/rather/long/base/path/for/the/service"
	ticket, conv := "t_GEN0-ABCDEFGHIJKLMNOPQRSTUVWXYZ-b15", "c_GEN0-ABCDEFGHIJKLMNOPQRSTUVWXYZ-b15"
	tb := ticketBody(base, ticket, conv, time.Now().UTC())
	url := base + "/v1/asks/" + ticket
	if n := testing.AllocsPerRun(50, func() {
		_, _ = appendTicket(make([]byte, 0, 160+3*len(url)+len(ticket)+len(conv)), tb)
	}); n != 1 {
		t.Errorf("%.0f allocations, want 1", n)
	}
}
