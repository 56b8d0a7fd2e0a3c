package main

import (
	"io"
	"strings"
	"testing"

	"github.com/das-ask/ask/internal/logtest"
)

// Without -admin-addr, ask-serve's service is observed as askd's is: a `request` line per API
// request, and an ask ends with one `ask finished` line naming its ticket (README's promise),
// holding neither the question nor the token. Before, both came only with -admin-addr.
func TestAskServeLogsEachAskAsAskdDoes(t *testing.T) {
	var logs logtest.Buffer
	s := startServe(t, nil, &logs)
	const question = "How many sev1 incidents did we have in 2026-Q2?"
	a := s.ask(question)
	if a.conversation.Header.Get("X-Request-Id") == "" {
		t.Errorf("createConversation: %d without X-Request-Id", a.conversation.StatusCode)
	}
	stream := s.events(a.eventsURL, a.token)
	events, _ := io.ReadAll(stream.Body) // to done, which closes the stream
	stream.Body.Close()
	if !strings.Contains(string(events), "event: done") {
		t.Fatalf("the stream ended without done:\n%s", events)
	}
	s.stop() // every line of the ask is written by then

	var finished []string
	requests := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="ask finished"`) {
			finished = append(finished, l)
		}
		if strings.Contains(l, "msg=request ") && strings.Contains(l, "request_id=") {
			requests++
		}
	}
	if requests < 3 { // createConversation, createAsk, streamEvents (the token is the IdP's)
		t.Errorf("%d request lines, want one per API request, 3 at least", requests)
	}
	if len(finished) != 1 || !strings.Contains(finished[0], "ticket="+a.ticket) || !strings.Contains(finished[0], "request_id=") {
		t.Errorf("ask finished lines %q, want one naming ticket %s and its request id", finished, a.ticket)
	}
	logs.AssertAbsent(t, question, a.token)
}
