package source_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/internal/memnet"
)

// A handshake whose context ends while the source hangs (here on tools/list, after answering
// initialize) sends nothing more: before, the SDK followed the end with a
// notifications/cancelled and the session's DELETE, each of which waits up to 5 s for a source
// that hangs, so that a handshake the agent cut short still held a connection and its
// goroutines that long (the source here answers them at once, to see them sent).
func TestHandshakeCutSendsNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			after []string // what arrived once ctx had ended
			cut   bool
		)
		ctx, cancel := context.WithCancel(t.Context())
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if r.Method == http.MethodPost {
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
					http.Error(w, "bad json", http.StatusBadRequest)
					return
				}
			}
			mu.Lock()
			if cut {
				after = append(after, r.Method+" "+req.Method)
			}
			mu.Unlock()
			switch {
			case r.Method == http.MethodDelete:
				w.WriteHeader(http.StatusNoContent)
				return
			case r.Method == http.MethodPost && req.ID == nil: // a notification
				w.WriteHeader(http.StatusAccepted)
				return
			case r.Method == http.MethodPost && req.Method == "initialize":
				w.Header().Set("Mcp-Session-Id", "hung-session")
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
					"protocolVersion": "2025-06-18",
					"capabilities":    map[string]any{"tools": map[string]any{}},
					"serverInfo":      map[string]any{"name": "hung", "version": "0"},
				}})
				return
			case r.Method == http.MethodPost && req.Method == "tools/list":
				mu.Lock()
				cut = true
				mu.Unlock()
				cancel() // the handshake's end, while the source hangs
			case r.Method == http.MethodPost && req.Method != "tools/list" && !cut:
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "no such method"}})
				return
			}
			<-r.Context().Done() // hung
		})
		_, err := source.Connect(ctx, source.Config{Name: "hung", URL: "http://hung.test/mcp"}, "tok",
			source.Options{HTTPClient: &http.Client{Transport: memnet.Transport{Handler: h}}})
		if err == nil {
			t.Fatal("Connect succeeded; want it to fail with its context")
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(after) != 0 {
			t.Errorf("sent to the hung source after the handshake's end: %q, want nothing", after)
		}
	})
}
