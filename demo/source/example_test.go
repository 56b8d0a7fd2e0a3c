package source_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask/demo/source"
)

// Example runs the demo source in process, as the dev stack and other packages' tests do, and
// calls one of its tools over MCP with a bearer. In production the Authenticator is an
// *auth.Validator built from the DAS_* settings.
func Example() {
	ctx := context.Background()
	src, err := source.New(ctx, source.Options{Authenticator: fakeAuth{}})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	srv := httptest.NewServer(src.Handler())
	defer srv.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             srv.URL + "/mcp",
		HTTPClient:           &http.Client{Transport: headers{token: "tok-bob", next: http.DefaultTransport}},
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Meta:      mcp.Meta{"ask/call_id": "example-1"},
		Name:      "run_query",
		Arguments: map[string]any{"sql": "SELECT sum(amount_eur) FROM oncall_pay"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.IsError, res.Meta["ask/refusal"])
	// Output: true map[code:forbidden reason:identity bob may not read table oncall_pay]
}
