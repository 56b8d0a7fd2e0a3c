package agent_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
)

// A source that takes the connection and never answers the handshake ends the run, at the tool
// timeout, in error{transport} saying so — as a tool call that never ends does — not "unreachable
// or broke the protocol", which it did neither of. No model call is made.
func TestSourceSilentOnTheHandshake(t *testing.T) {
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices the client leave
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer silent.Close()
	defer close(stop)
	m := &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}}
	a, err := agent.New(agent.Options{
		Model: m, Sources: []agent.SourceConfig{{Name: "silent", URL: silent.URL + "/mcp"}},
		ToolTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := a.Run(t.Context(), hostileRequest("tok-silent"), &recorder{})
	if out.Error == nil || !strings.Contains(out.Error.Message, "source silent: connect: no answer within the tool timeout") {
		t.Fatalf("outcome = %s %+v, want error{transport} naming the tool timeout", outcomeType(out), out.Error)
	}
	if len(m.reqs) != 0 {
		t.Errorf("%d model calls, want none", len(m.reqs))
	}
}
