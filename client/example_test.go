package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
)

// Ask a question and say what came of it. The four outcomes are different things: switch on
// the kind, never on text.
func Example() {
	baseURL, stop := exampleService() // e.g. "http://127.0.0.1:8080/ask"
	defer stop()

	c, err := client.New(baseURL, client.Options{Token: client.StaticToken("ACCESS_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	conv, err := c.CreateConversation(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// AskAndWait cancels the run if ctx ends first: the person has gone.
	_, out, err := c.AskAndWait(ctx, conv.Id, "How many sev1 incidents did we have in 2026-Q2?")
	if err != nil {
		log.Fatal(err)
	}
	switch out.Kind {
	case client.Answer:
		fmt.Println(out.Answer.Text)
		for _, cv := range out.Answer.Caveats { // always show every caveat
			fmt.Println("caveat:", cv.Text)
		}
	case client.Abstention:
		fmt.Println("no answer; the catalog has nothing for:", strings.Join(out.Abstention.Terms, ", "))
	case client.Refusal:
		fmt.Printf("refused by %s: %s\n", out.Refusal.Source, out.Refusal.Reason)
	case client.Error:
		fmt.Printf("failed (%s): %s\n", out.Error.Kind, out.Error.Message)
	}
	// Output:
	// There were 4 sev1 incidents in 2026-Q2.
	// caveat: Severity is assigned by the on-call engineer.
}

// Follow the work as it happens: milestones are for people (in your own words), steps are the
// trace. Unknown event types arrive as UnknownEvent and can be ignored.
func ExampleClient_Events() {
	baseURL, stop := exampleService()
	defer stop()
	c, _ := client.New(baseURL, client.Options{Token: client.StaticToken("ACCESS_TOKEN")})

	for ev, err := range c.Events(context.Background(), "tk", client.EventsOptions{}) {
		if err != nil {
			log.Fatal(err) // final: 401, 404, the reconnect budget spent, or ctx ended
		}
		switch v := ev.Value.(type) {
		case gen.MilestoneEvent:
			fmt.Printf("%d: %s %s\n", ev.Seq, v.Phase, v.Subject)
		case gen.StepEvent:
			fmt.Printf("%d: called %s\n", ev.Seq, v.Tool)
		case gen.DoneEvent:
			fmt.Printf("%d: done after %d tool calls (%d not seen)\n", ev.Seq, v.Steps, ev.MissedSteps)
		default:
			if k := ev.Outcome(); k != client.NotTerminal {
				fmt.Printf("%d: %s\n", ev.Seq, k)
			}
		}
	}
	// Output:
	// 3: grounding severity
	// 4: called define_term
	// 5: querying incidents
	// 6: called run_query
	// 8: answer
	// 9: done after 2 tool calls (0 not seen)
}

// A long-running program refreshes its token: the source is asked on every request, stream
// reconnects included.
func ExampleTokenFunc() {
	baseURL, stop := exampleService()
	defer stop()
	refresh := func(ctx context.Context) (string, error) {
		return "FRESH_ACCESS_TOKEN", nil // e.g. from an oauth2.TokenSource
	}
	c, _ := client.New(baseURL, client.Options{Token: client.TokenFunc(refresh)})
	out, err := c.Wait(context.Background(), "tk")
	fmt.Println(out.Kind, err)
	// Output: answer <nil>
}

// exampleService stands in for the ask service: one conversation, one ticket, one run.
func exampleService() (string, func()) {
	ev := func(seq int, typ, body string) string {
		return fmt.Sprintf("id: %d\nevent: %s\ndata: {\"seq\":%d,\"ticket\":\"tk\",\"conversation_id\":\"cv\",\"ts\":\"2026-11-29T20:00:00Z\",\"type\":%q%s}\n\n", seq, typ, seq, typ, body)
	}
	stream := ev(1, "accepted", `,"question":"How many sev1 incidents did we have in 2026-Q2?"`) +
		ev(2, "branch", `,"branch_id":"b","role":"supervisor","state":"open"`) +
		ev(3, "milestone", `,"phase":"grounding","subject":"severity","source":"demo"`) +
		ev(4, "step", `,"call_id":"c1","tool":"define_term","source":"demo","args":{"term":"severity"},"ms":3,"refused":false`) +
		ev(5, "milestone", `,"phase":"querying","subject":"incidents","source":"demo"`) +
		ev(6, "step", `,"call_id":"c2","tool":"run_query","source":"demo","args":{"sql":"SELECT COUNT(*) ..."},"ms":9,"refused":false`) +
		ev(7, "branch", `,"branch_id":"b","role":"supervisor","state":"close"`) +
		ev(8, "answer", `,"text":"There were 4 sev1 incidents in 2026-Q2.","caveats":[{"term":"severity","text":"Severity is assigned by the on-call engineer.","source":"demo"}],"path":{"speed":"full","detail":"warehouse"},"provenance":[],"sql":["SELECT COUNT(*) ..."],"divergence":null,"headline":{"label":"n","value":4}`) +
		ev(9, "done", `,"outcome":"answer","steps":2,"model_calls":3,"input_tokens":900,"output_tokens":80,"elapsed_ms":4100`)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ask/v1/conversations", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"cv","asks_url":"/ask/v1/conversations/cv/asks","created_at":"2026-11-29T20:00:00Z"}`)
	})
	mux.HandleFunc("POST /ask/v1/conversations/cv/asks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"ticket":"tk","conversation_id":"cv","events_url":"/ask/v1/asks/tk/events","status_url":"/ask/v1/asks/tk","cancel_url":"/ask/v1/asks/tk/cancel","created_at":"2026-11-29T20:00:00Z"}`)
	})
	mux.HandleFunc("GET /ask/v1/asks/tk/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": ask events\nretry: 2000\n\n"+stream)
	})
	srv := httptest.NewServer(mux)
	return srv.URL + "/ask", srv.Close
}
