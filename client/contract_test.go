package client_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/client"
)

// Events as the contract has them, each of a type contractFault checks.
var contractEvents = map[string]string{
	"answer": `{"seq":2,"type":"answer","text":"SECRET","caveats":[{"term":"SECRET","text":"t","source":"s"}],` +
		`"provenance":[{"term":"t","statement":"SECRET","source":"s","kind":"k"}],"sql":["SECRET"],"path":{"speed":"full","detail":"d"},` +
		`"headline":{"label":"l","value":null},"result":{"columns":["c"],"rows":[[1]],"truncated":false},` +
		`"divergence":{"without":["s"],"sql":[],"result":{"columns":[],"rows":[],"truncated":true}}}`,
	"abstention": `{"seq":2,"type":"abstention","terms":["SECRET"],"sources":["s"]}`,
	"refusal":    `{"seq":2,"type":"refusal","tool":"t","source":"SECRET","reason":"r","call_id":"c"}`,
	"error":      `{"seq":2,"type":"error","kind":"internal","message":"SECRET"}`,
	"branch":     `{"seq":2,"type":"branch","branch_id":"b1","role":"SECRET","state":"open"}`,
	"milestone":  `{"seq":2,"type":"milestone","phase":"grounding","subject":"SECRET","source":"s"}`,
}

// An outcome, branch or milestone without a field the contract requires (or with one null, or
// an item of its lists without its own) ends the stream with an error naming its type, seq and
// field, never a value, as the Python and TypeScript clients: the generated types decoded a
// missing field as its zero value, so an answer without text was said as an empty answer, and
// an error without kind as "The run failed (): …".
func TestEventThatBreaksTheContractIsFinal(t *testing.T) {
	for _, tt := range []struct {
		typ, from, to, field string
	}{
		{"answer", `"text":"SECRET",`, ``, "text is missing"},
		{"answer", `"text":"SECRET"`, `"text":null`, "text is missing"},
		{"answer", `{"term":"SECRET",`, `{`, "caveats is not of the contract's type"},
		{"answer", `"statement":"SECRET",`, ``, "provenance is not of the contract's type"},
		{"answer", `"sql":["SECRET"]`, `"sql":[null]`, "sql is not of the contract's type"},
		{"answer", `"sql":["SECRET"],`, ``, "sql is missing"},
		{"answer", `"speed":"full",`, ``, "path is not of the contract's type"},
		{"answer", `,"value":null`, ``, "headline is not of the contract's type"},
		{"answer", `"rows":[[1]]`, `"rows":[null]`, "result is not of the contract's type"},
		{"answer", `"sql":[],"result":{"columns":[],"rows":[],"truncated":true}`, `"sql":[]`, "divergence is not of the contract's type"},
		{"abstention", `"terms":["SECRET"],`, ``, "terms is missing"},
		{"refusal", `"source":"SECRET",`, ``, "source is missing"},
		{"error", `"kind":"internal",`, ``, "kind is missing"},
		{"error", `,"message":"SECRET"`, ``, "message is missing"},
		{"branch", `"branch_id":"b1",`, ``, "branch_id is missing"},
		{"milestone", `"subject":"SECRET",`, ``, "subject is missing"},
	} {
		t.Run(tt.typ+" "+tt.field, func(t *testing.T) {
			data := contractEvents[tt.typ]
			if !strings.Contains(data, tt.from) {
				t.Fatalf("the case does not apply: %q is not in %s", tt.from, data)
			}
			data = strings.Replace(data, tt.from, tt.to, 1)
			evs, last := streamOf(t, data)
			if len(evs) != 1 || last == nil {
				t.Fatalf("delivered %d events, then %v: want the one before it, then an error", len(evs), last)
			}
			want := fmt.Sprintf("%s event 2 is not the contract's: the field %s", tt.typ, tt.field)
			if !strings.Contains(last.Error(), want) {
				t.Errorf("error %q: want it to say %q", last, want)
			}
			if !errors.Is(last, client.ErrProtocol) {
				t.Errorf("error %q does not match ErrProtocol", last)
			}
			if strings.Contains(last.Error(), "SECRET") {
				t.Errorf("error %q holds the event's data", last)
			}
		})
	}
}

// The same events whole are delivered (a headline's value may be null; optional fields absent).
func TestEventThatKeepsTheContractIsDelivered(t *testing.T) {
	for typ, data := range contractEvents {
		evs, last := streamOf(t, data)
		if len(evs) != 3 || last != nil {
			t.Errorf("%s: delivered %d events, then %v: want 3 and no error", typ, len(evs), last)
		}
	}
	evs, last := streamOf(t, `{"seq":2,"type":"answer","text":"","caveats":[],"provenance":[],"sql":[],"path":{"speed":"partial"}}`)
	if len(evs) != 3 || last != nil {
		t.Errorf("an answer of empty lists and no optional field: delivered %d events, then %v", len(evs), last)
	}
}

// streamOf serves an accepted event, data as event 2 and done, and returns what Events delivered and
// its last error.
func streamOf(t *testing.T, data string) ([]client.Event, error) {
	t.Helper()
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		_, _ = io.WriteString(w, "id: 1\ndata: {\"seq\":1,\"type\":\"accepted\"}\n\nid: 2\ndata: "+data+"\n\nid: 3\ndata: {\"seq\":3,\"type\":\"done\"}\n\n")
	}), client.Options{})
	var evs []client.Event
	var last error
	for ev, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
		if err != nil {
			last = err
			continue
		}
		evs = append(evs, ev)
	}
	return evs, last
}

// The other final errors of a stream that breaks the contract match ErrProtocol too, so that a
// caller (the CLI) can tell them from a failed connection, which following again may mend.
func TestStreamThatBreaksTheContractMatchesErrProtocol(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"not an event stream": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>")
		},
		"an event beyond MaxEventSize": func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			_, _ = io.WriteString(w, "id: 1\ndata: "+strings.Repeat("x", 100)+"\n\n")
		},
	} {
		c := memClient(t, h, client.Options{MaxEventSize: 64})
		var last error
		for _, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
			last = err
		}
		if !errors.Is(last, client.ErrProtocol) {
			t.Errorf("%s: error %v, want one matching ErrProtocol", name, last)
		}
	}
}
