package hardening_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/internal/logtest"
)

// The hostile-source faults (package internal/hostile has them as real MCP servers, run
// against the agent in package agent) through the whole service, here as a proxy in front of
// the demo source: a response that never ends, a multi-megabyte answer, malformed JSON-RPC, the
// session ended by the source mid-run (404 for its id), the token rejected mid-run (401). Each
// ends in the outcome the contract names, with every component logging at debug level and no
// log line, response or event but accepted holding the question or the token.
func TestHostileSourcesThroughTheService(t *testing.T) {
	tests := []struct {
		name, kind, phrase string
		// fault answers the n-th tool call (from 1), or returns false to pass it on.
		fault func(p *faultProxy, n int64, w http.ResponseWriter, r *http.Request) bool
	}{
		{"never ends", "timeout", "deadline", func(p *faultProxy, _ int64, w http.ResponseWriter, r *http.Request) bool {
			// A keep-alive comment every 10 ms, never an event, until the client goes away or
			// the test ends (the call in flight outlives the run's deadline by design: it is
			// bounded by the tool timeout).
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				if _, err := io.WriteString(w, ": still thinking\n\n"); err != nil || rc.Flush() != nil {
					return true
				}
				select {
				case <-r.Context().Done():
					return true
				case <-p.release:
					return true
				case <-tick.C:
				}
			}
		}},
		{"multi-megabyte answer", "transport", "response larger than the limit", func(_ *faultProxy, _ int64, w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`+strings.Repeat("x", 6<<20)+`"}]}}`)
			return true
		}},
		{"malformed JSON-RPC", "transport", "source demo: call", func(_ *faultProxy, _ int64, w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`)
			return true
		}},
		{"session ended mid-run", "transport", "source demo: call", func(_ *faultProxy, n int64, w http.ResponseWriter, _ *http.Request) bool {
			if n < 2 {
				return false
			}
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}},
		{"token rejected mid-run", "transport", "rejected the credentials (HTTP 401)", func(_ *faultProxy, n int64, w http.ResponseWriter, _ *http.Request) bool {
			if n < 2 {
				return false
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="das", error="invalid_token"`)
			http.Error(w, "expired", http.StatusUnauthorized)
			return true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			p := newFaultProxy(t)
			p.set(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
				if !isToolCall(body) {
					return false
				}
				return tt.fault(p, calls.Add(1), w, r)
			})
			sink := &logtest.Buffer{}
			s, _ := startStack(t, stack.Options{
				Logger:   slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Deadline: faultDeadline, Sources: []agent.SourceConfig{{Name: "demo", URL: p.srv.URL + "/mcp"}},
				AdminAddr: "127.0.0.1:0",
			})
			t.Cleanup(p.releaseAll)
			p.setTarget(t, s.SourceURL)

			a := newAPI(s.AskURL)
			defer a.close()
			ctx := t.Context()
			tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
			cid := a.conversation(ctx, t, tok)
			ticket := a.ask(ctx, t, tok, cid, qSev1)
			frames := a.events(ctx, t, tok, ticket, "")
			term := checkLog(t, frames, 1, false)
			if term.Type != "error" || term.Kind != tt.kind || !strings.Contains(term.Message, tt.phrase) {
				t.Errorf("outcome %s/%s %q, want error/%s saying %q", term.Type, term.Kind, term.Message, tt.kind, tt.phrase)
			}
			w := &witness{}
			w.events(frames)
			w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+ticket, tok, nil, nil))
			assertClean(t, sink.String(), w, append([]string{qSev1}, tokenSecrets(tok)...))
		})
	}
}
