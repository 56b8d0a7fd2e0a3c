package bench

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
)

// emitArgs are the arguments of the peer's `emit` tool.
type emitArgs struct {
	N int `json:"n" jsonschema:"how many progress notifications to send before the result"`
}

// peerHandler is the peer under the same workload: the MCP Go SDK's streamable HTTP
// transport with its memory event store (so streams resume from Last-Event-ID), behind the
// same bearer validation as the service. Its tool `emit` sends n progress notifications on the
// call's stream as fast as it can, each carrying the same step JSON our step events carry, then
// returns.
func peerHandler(v ask.Authenticator) http.Handler {
	step, _ := json.Marshal(sampleStep(0))
	msg := string(step)
	srv := mcp.NewServer(&mcp.Implementation{Name: "askbench-peer", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "emit", Description: "Send n progress notifications, then return."},
		func(ctx context.Context, req *mcp.CallToolRequest, in emitArgs) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			for i := range in.N {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(i + 1), Message: msg,
				}); err != nil {
					return nil, nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	return auth.Middleware(v, h)
}
