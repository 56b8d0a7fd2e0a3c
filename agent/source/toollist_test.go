package source_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/agent/source"
)

// rawSource is an MCP server written by hand (streamable HTTP, JSON responses) whose tools/list
// answers with page(cursor): the tools of that page and the next cursor ("" for the last).
func rawSource(t *testing.T, page func(cursor string) (tools []map[string]any, next string)) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result any
		switch req.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "raw-session")
			result = map[string]any{
				"protocolVersion": "2025-06-18",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "raw", "version": "0"},
			}
		case "tools/list":
			tools, next := page(req.Params.Cursor)
			res := map[string]any{"tools": tools}
			if next != "" {
				res["nextCursor"] = next
			}
			result = res
		default:
			result = map[string]any{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}))
	t.Cleanup(hs.Close)
	return hs
}

// endless is a tool list of empty pages, each naming next(n) as the one after it (n counts the
// pages asked for), until the 10,000th, which is the last.
func endless(next func(n int) string) func(string) ([]map[string]any, string) {
	var n atomic.Int64
	return func(string) ([]map[string]any, string) {
		if i := int(n.Add(1)); i < 10000 {
			return []map[string]any{}, next(i)
		}
		return []map[string]any{}, ""
	}
}

func tool(name string) map[string]any {
	return map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}}
}

// A source's tool list goes to the model on every turn and its names are what the model calls:
// a list the agent cannot offer whole — too many tools (at once or page after page), a name that
// would print as another (control characters, a right-to-left override, a zero-width space),
// is not UTF-8 or is longer than MaxToolName, or a name listed twice (the later one would
// shadow the earlier) — ends the session as a transport failure with a fixed phrase, before the
// model sees any of it.
func TestToolListTheAgentCannotOffer(t *testing.T) {
	many := func(n int) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			out[i] = tool(fmt.Sprintf("tool_%d", i))
		}
		return out
	}
	long := strings.Repeat("a", source.MaxToolName+1)
	tests := []struct {
		name   string
		page   func(string) ([]map[string]any, string)
		reason error
	}{
		{"ten thousand tools", func(string) ([]map[string]any, string) { return many(10000), "" }, source.ErrTooManyTools},
		{"pages without end", func(c string) ([]map[string]any, string) {
			n, _ := strconv.Atoi(c)
			return []map[string]any{tool("t" + strconv.Itoa(n))}, strconv.Itoa(n + 1)
		}, source.ErrTooManyTools},
		// Pages without a tool go on as long as the source names a next one: without a bound
		// the agent asked for them as fast as the source answered until the tool timeout (a
		// thousand requests and a minute, then "no answer"). These sources give up after
		// 10,000 pages, so that without the bound Connect ends, offering no tools.
		{"empty pages without end", endless(func(n int) string { return strconv.Itoa(n + 1) }), source.ErrEndlessToolList},
		{"one cursor again and again", endless(func(int) string { return "again" }), source.ErrEndlessToolList},
		{"control characters", func(string) ([]map[string]any, string) {
			return []map[string]any{tool("run_query"), tool("list\x1b[2J\ntables")}, ""
		}, source.ErrBadToolName},
		{"a right-to-left override", func(string) ([]map[string]any, string) { return []map[string]any{tool("run_\u202equery")}, "" }, source.ErrBadToolName},
		{"a zero-width space", func(string) ([]map[string]any, string) { return []map[string]any{tool("run\u200bquery")}, "" }, source.ErrBadToolName},
		{"a line separator", func(string) ([]map[string]any, string) { return []map[string]any{tool("run\u2028query")}, "" }, source.ErrBadToolName},
		{"empty", func(string) ([]map[string]any, string) { return []map[string]any{tool("")}, "" }, source.ErrBadToolName},
		{"too long", func(string) ([]map[string]any, string) { return []map[string]any{tool(string(long))}, "" }, source.ErrBadToolName},
		{"listed twice", func(string) ([]map[string]any, string) {
			return []map[string]any{tool("run_query"), tool("list_tables"), tool("run_query")}, ""
		}, source.ErrBadToolName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := rawSource(t, tt.page)
			s, err := source.Connect(t.Context(), source.Config{Name: "raw", URL: hs.URL}, "tok", source.Options{})
			if err == nil {
				s.Close()
				t.Fatalf("Connect succeeded with %d tools, want a transport error", len(s.Tools()))
			}
			var te *source.TransportError
			if !errors.As(err, &te) || !errors.Is(err, tt.reason) {
				t.Fatalf("err = %v, want a transport error for %v", err, tt.reason)
			}
			if want := "source raw: list tools: " + tt.reason.Error(); err.Error() != want {
				t.Errorf("message %q, want %q", err.Error(), want)
			}
		})
	}

	// The limit itself is offered whole, with names MCP only recommends against but real
	// servers list: a dot, a slash, a space, letters outside ASCII, MaxToolName bytes.
	odd := []string{"A-z.0_9", "db/run query", "données", "検索", strings.Repeat("é", source.MaxToolName/2)}
	ok := many(source.MaxTools - len(odd))
	for _, n := range odd {
		ok = append(ok, tool(n))
	}
	hs := rawSource(t, func(string) ([]map[string]any, string) { return ok, "" })
	s, err := source.Connect(t.Context(), source.Config{Name: "raw", URL: hs.URL}, "tok", source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Tools()) != source.MaxTools {
		t.Fatalf("%d tools, want %d", len(s.Tools()), source.MaxTools)
	}
	for i, n := range odd {
		if got := s.Tools()[source.MaxTools-len(odd)+i].Name; got != n {
			t.Errorf("tool %q listed as %q", n, got)
		}
	}
}

// A tool named with the caller's bearer, or its signature alone (a tool list made per session),
// is refused like any name the agent cannot offer: a tool's name is in every step event, in the
// tool call's log line and in the ask_tool_calls_total label, where no part of a bearer may go.
func TestToolNamedWithTheBearer(t *testing.T) {
	const sig = "zq7Yc1QnH4bTgX2mKp9vRw3sLd8fUe6aNj0oBi5hCyZ"
	const token = "eyJhbGciOiJFUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9." + sig
	for _, name := range []string{"whoami_" + token, "session_" + sig} {
		hs := rawSource(t, func(string) ([]map[string]any, string) { return []map[string]any{tool("run_query"), tool(name)}, "" })
		s, err := source.Connect(t.Context(), source.Config{Name: "raw", URL: hs.URL}, token, source.Options{})
		if err == nil {
			s.Close()
			t.Fatalf("Connect offered %d tools, one of them named with the bearer; want a transport error", len(s.Tools()))
		}
		if !errors.Is(err, source.ErrBadToolName) || strings.Contains(err.Error(), sig) {
			t.Errorf("err = %v, want a transport error for %v, without the bearer", err, source.ErrBadToolName)
		}
	}
}
