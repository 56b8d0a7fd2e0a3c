package source_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask/agent/source"
)

// A source's response header is bounded as its body is (source.MaxResponseHeaderBytes): the
// default transport took up to net/http's 10 MiB of header lines per response, held whole in
// memory, on every request of every run, beyond the 4 MiB the documentation promised for a
// whole response. A source answering 1 MiB of header lines fails the handshake as a transport
// failure; the same source with a few lines is connected.
func TestResponseHeaderIsBounded(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "run_query", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	for _, tt := range []struct {
		name     string
		lines    int
		wantFail bool
	}{
		{"a few header lines", 8, false},
		{"1 MiB of header lines", 1 << 10, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for i := range tt.lines {
					w.Header().Add("X-Padding", strings.Repeat(string(rune('a'+i%26)), 1<<10))
				}
				h.ServeHTTP(w, r)
			}))
			defer hs.Close()
			s, err := source.Connect(t.Context(), source.Config{Name: "padded", URL: hs.URL}, "the-callers-bearer", source.Options{})
			if s != nil {
				defer s.Close()
			}
			var te *source.TransportError
			switch {
			case tt.wantFail && !errors.As(err, &te):
				t.Fatalf("Connect to a source with %d KiB of header lines: err %v, want a *source.TransportError", tt.lines, err)
			case !tt.wantFail && err != nil:
				t.Fatalf("Connect to a source with %d KiB of header lines: %v", tt.lines, err)
			}
		})
	}
}
