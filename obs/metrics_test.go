package obs_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/das-ask/ask/server"
)

// The README's example questions, each ending in a different outcome.
const (
	qAnswer     = "How many sev1 incidents did we have in 2026-Q2?"
	qAbstention = "What is our customer churn rate?"
	qRefusal    = "What was the on-call pay per team in 2026-Q3?"
	qSlow       = "Take your time: how many sev1 incidents did we have in 2026-Q2?"
)

// TestMetricsAfterScriptedAsks runs a scripted set of asks through the whole service and
// checks, on a scrape of /metrics, that each metric moved by what those asks did — and that
// no label value is a question, a token or an identity.
func TestMetricsAfterScriptedAsks(t *testing.T) {
	s := startStack(t)
	alice, bob := s.idp.Token(t, "alice"), s.idp.Token(t, "bob")

	// Refused admissions: no bearer, and a conversation that does not exist.
	if resp, _ := s.do(t, http.MethodPost, "/v1/conversations", "", map[string]any{}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no bearer: %d", resp.StatusCode)
	}
	if resp, _ := s.do(t, http.MethodPost, "/v1/conversations/c_nope/asks", alice, map[string]any{"question": qAnswer}, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown conversation: %d", resp.StatusCode)
	}

	// An answer, an abstention and a refusal, each streamed to done.
	convA := s.conversation(t, alice)
	answerTicket := s.ask(t, alice, convA, qAnswer)
	if got := s.events(t, alice, answerTicket, ""); !slices.Contains(got, "answer") || got[len(got)-1] != "done" {
		t.Fatalf("answer ask: events %v", got)
	}
	abstain := s.ask(t, alice, convA, qAbstention)
	if got := s.events(t, alice, abstain, ""); !slices.Contains(got, "abstention") {
		t.Fatalf("abstention ask: events %v", got)
	}
	convB := s.conversation(t, bob)
	refused := s.ask(t, bob, convB, qRefusal)
	if got := s.events(t, bob, refused, ""); !slices.Contains(got, "refusal") {
		t.Fatalf("refusal ask: events %v", got)
	}
	// A reconnect with a cursor after the end replays the tail and closes.
	if got := s.events(t, alice, answerTicket, "2"); len(got) == 0 || got[len(got)-1] != "done" {
		t.Fatalf("reconnect: events %v", got)
	}
	// A slow ask, cancelled while its first model call waits: error{cancelled}.
	convC := s.conversation(t, alice)
	slow := s.ask(t, alice, convC, qSlow)
	if resp, b := s.do(t, http.MethodPost, "/v1/asks/"+slow+"/cancel", alice, nil, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	if got := s.events(t, alice, slow, ""); !slices.Contains(got, "error") {
		t.Fatalf("cancelled ask: events %v", got)
	}
	s.shutdown(t) // every run has returned: what obs records is complete

	fams, body := s.scrape(t)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ask_asks_total", []string{"outcome", "answer", "kind", ""}, 1},
		{"ask_asks_total", []string{"outcome", "abstention", "kind", ""}, 1},
		{"ask_asks_total", []string{"outcome", "refusal", "kind", ""}, 1},
		{"ask_asks_total", []string{"outcome", "error", "kind", "cancelled"}, 1},
		{"ask_ask_duration_seconds", []string{"outcome", "answer"}, 1},
		{"ask_ask_duration_seconds", []string{"outcome", "error"}, 1},
		{"ask_asks_running", nil, 0},
		{"ask_time_to_ticket_seconds", nil, 4},
		{"ask_streams_open", nil, 0},
		{"ask_stream_reconnects_total", nil, 1},
		{"ask_events_emitted_total", []string{"type", "accepted"}, 4},
		{"ask_events_emitted_total", []string{"type", "done"}, 4},
		{"ask_events_emitted_total", []string{"type", "answer"}, 1},
		{"ask_step_events_dropped_total", nil, 0},
		{"ask_tool_calls_total", []string{"source", "demo", "tool", "run_query", "refused", "true", "outcome", "refused"}, 1},
		{"ask_tool_calls_total", []string{"source", "demo", "tool", "run_query", "refused", "false", "outcome", "ok"}, 1},
		{"ask_admission_refusals_total", []string{"route", "create_conversation", "reason", "unauthorized"}, 1},
		{"ask_admission_refusals_total", []string{"route", "create_ask", "reason", "not_found"}, 1},
		{"ask_http_requests_total", []string{"route", "create_ask", "method", "POST", "code", "202"}, 4},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := sum(fams, "ask_ask_duration_seconds"); got != 4 {
		t.Errorf("ask durations observed: %v, want 4", got)
	}
	// Steps: the answer made 4 tool calls, the abstention and the refusal at least one each.
	if got := value(fams, "ask_events_emitted_total", "type", "step"); got < 6 {
		t.Errorf("step events emitted: %v, want at least 6", got)
	}
	if got, calls := sum(fams, "ask_tool_calls_total"), value(fams, "ask_events_emitted_total", "type", "step"); got != calls {
		t.Errorf("tool calls counted %v, step events %v: want equal", got, calls)
	}
	// Model calls: five for the answer, at least one each for the abstention and the refusal
	// (the cancelled ask may or may not have started one).
	if got := value(fams, "ask_model_calls_total", "provider", "stub"); got < 7 {
		t.Errorf("model calls: %v, want at least 7", got)
	}
	if got := value(fams, "ask_model_call_duration_seconds", "provider", "stub"); got != value(fams, "ask_model_calls_total", "provider", "stub") {
		t.Errorf("model call latencies observed: %v, want one per call", got)
	}
	for _, dir := range []string{"input", "output"} {
		if got := value(fams, "ask_model_tokens_total", "provider", "stub", "direction", dir); got <= 0 {
			t.Errorf("%s tokens: %v, want > 0", dir, got)
		}
	}

	// Nothing a label holds, nor anything the scrape shows, is a question, a token or an oid.
	secrets := []string{qAnswer, qAbstention, qRefusal, qSlow, alice, bob}
	oids := []string{"alice", "bob"}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				v := lp.GetValue()
				if slices.Contains(secrets, v) || slices.Contains(oids, v) {
					t.Errorf("%s has label %s=%q: a question, a token or an oid", name, lp.GetName(), v)
				}
				if strings.Contains(v, answerTicket) || strings.Contains(v, convA) {
					t.Errorf("%s has label %s=%q: an id", name, lp.GetName(), v)
				}
			}
		}
	}
	for _, sec := range secrets {
		if strings.Contains(body, sec) {
			t.Errorf("/metrics contains a question or a token")
		}
	}

	// One "ask finished" line per ask, with its ticket, outcome and oid, and never a question
	// or a token anywhere in the logs.
	// An ask's only info line is that one: whatever else mentions its ticket is debug.
	logs := s.logs.String()
	finished := map[string]map[string]any{}
	infoLines := map[string][]string{}
	for line := range strings.Lines(logs) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if tk, _ := m["ticket"].(string); tk != "" && m["level"] == "INFO" {
			infoLines[tk] = append(infoLines[tk], m["msg"].(string))
		}
		if m["msg"] == "ask finished" {
			finished[m["ticket"].(string)] = m
		}
	}
	for _, tk := range []string{answerTicket, abstain, refused, slow} {
		if got := infoLines[tk]; len(got) != 1 || got[0] != "ask finished" {
			t.Errorf("ticket %s's info lines: %q, want one, ask finished", tk, got)
		}
	}
	for ticket, want := range map[string][2]string{
		answerTicket: {"answer", "alice"}, abstain: {"abstention", "alice"}, refused: {"refusal", "bob"}, slow: {"error", "alice"},
	} {
		m := finished[ticket]
		if m == nil {
			t.Errorf("no ask finished line for %s", ticket)
			continue
		}
		if m["outcome"] != want[0] || m["oid"] != want[1] || m["request_id"] == "" || m["trace_id"] == "" {
			t.Errorf("ask finished %s: %v, want outcome %s, oid %s, a request id and a trace id", ticket, m, want[0], want[1])
		}
	}
	if m := finished[answerTicket]; m != nil && (m["steps"] != 4.0 || m["model_calls"] != 5.0) {
		t.Errorf("answer's line: steps %v, model_calls %v; want 4 and 5", m["steps"], m["model_calls"])
	}
	if len(finished) != 4 {
		t.Errorf("%d ask finished lines, want 4", len(finished))
	}
	s.logs.AssertAbsent(t, qAnswer, qAbstention, qRefusal, qSlow, alice, bob)
}

// TestRefusalsCountedByTheirCause checks that each refused admission is counted under its
// cause, not under whatever cause first shares its status: a 429 for an identity at its cap of
// conversations or tickets is not one for too many asks in flight, and a 409 for a full
// conversation is not one for an ask already running in it.
func TestRefusalsCountedByTheirCause(t *testing.T) {
	s := startStackWith(t, server.Options{MaxInFlight: 1, MaxConversationsPerID: 2, MaxRetainedPerID: 1, MaxTurns: 1})
	alice, bob := s.idp.Token(t, "alice"), s.idp.Token(t, "bob")

	// alice: two conversations, her cap; a third is a 429 for what she holds.
	a1, a2 := s.conversation(t, alice), s.conversation(t, alice)
	if resp, b := s.do(t, http.MethodPost, "/v1/conversations", alice, map[string]any{}, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third conversation: %d %s", resp.StatusCode, b)
	}
	// A slow ask in a1, then one in a2 while it runs: a 429 for too many in flight; then, once
	// it ended (cancelled), a second turn in a1 (MaxTurns 1): a 409 for a full conversation.
	slow := s.ask(t, alice, a1, qSlow)
	if resp, b := s.do(t, http.MethodPost, "/v1/conversations/"+a2+"/asks", alice, map[string]any{"question": qAnswer}, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second ask in flight: %d %s", resp.StatusCode, b)
	}
	// A second ask in a1 while its first runs: a 409 for an ask already running there.
	if resp, b := s.do(t, http.MethodPost, "/v1/conversations/"+a1+"/asks", alice, map[string]any{"question": qAnswer}, nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("ask beside a running one: %d %s", resp.StatusCode, b)
	}
	if resp, b := s.do(t, http.MethodPost, "/v1/asks/"+slow+"/cancel", alice, nil, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	s.events(t, alice, slow, "")
	if resp, b := s.do(t, http.MethodPost, "/v1/conversations/"+a1+"/asks", alice, map[string]any{"question": qAnswer}, nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("second turn in a full conversation: %d %s", resp.StatusCode, b)
	}
	// bob: an ended ask holds his one ticket; an ask in another conversation is a 429 for what
	// he holds, not for asks in flight (he has none).
	b1, b2 := s.conversation(t, bob), s.conversation(t, bob)
	s.events(t, bob, s.ask(t, bob, b1, qAnswer), "")
	if resp, b := s.do(t, http.MethodPost, "/v1/conversations/"+b2+"/asks", bob, map[string]any{"question": qAnswer}, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an ask beyond the tickets bob may hold: %d %s", resp.StatusCode, b)
	}
	s.shutdown(t)

	fams, _ := s.scrape(t)
	for _, c := range []struct {
		route, reason string
		want          float64
	}{
		{"create_conversation", "too_many_held", 1},
		{"create_conversation", "too_many_in_flight", 0}, // made at zero, never counted
		{"create_ask", "too_many_in_flight", 1},
		{"create_ask", "too_many_held", 1},
		{"create_ask", "conflict", 1},
		{"create_ask", "conversation_full", 1},
	} {
		if got := value(fams, "ask_admission_refusals_total", "route", c.route, "reason", c.reason); got != c.want {
			t.Errorf("ask_admission_refusals_total{route=%q,reason=%q} = %v, want %v", c.route, c.reason, got, c.want)
		}
	}
}

// TestUnavailableCountedByTheirCause: of the 503s, a service holding as many conversations or
// tickets as it may (DAS_ASK_MAX_TICKETS: capacity) and one draining for a shutdown (a
// rollout) are counted apart from the store not answering, which the operator fixes elsewhere.
func TestUnavailableCountedByTheirCause(t *testing.T) {
	s := startStackWith(t, server.Options{MaxTickets: 1})
	alice, bob := s.idp.Token(t, "alice"), s.idp.Token(t, "bob")
	s.conversation(t, alice)
	if resp, b := s.do(t, http.MethodPost, "/v1/conversations", bob, map[string]any{}, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a conversation past MaxTickets: %d %s", resp.StatusCode, b)
	}
	s.shutdown(t)
	if resp, b := s.do(t, http.MethodPost, "/v1/conversations", bob, map[string]any{}, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a conversation while shutting down: %d %s", resp.StatusCode, b)
	}

	fams, _ := s.scrape(t)
	for _, c := range []struct {
		reason string
		want   float64
	}{{"full", 1}, {"shutting_down", 1}, {"unavailable", 0}} {
		if got := value(fams, "ask_admission_refusals_total", "route", "create_conversation", "reason", c.reason); got != c.want {
			t.Errorf("ask_admission_refusals_total{route=\"create_conversation\",reason=%q} = %v, want %v", c.reason, got, c.want)
		}
	}
}
