package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/demo/source"
)

// fakeAuth accepts "tok-<oid>" and rejects anything else.
type fakeAuth struct{}

func (fakeAuth) Authenticate(_ context.Context, raw string) (ask.Identity, error) {
	oid, ok := strings.CutPrefix(raw, "tok-")
	if !ok || oid == "" {
		return ask.Identity{}, errors.New("bad token")
	}
	return ask.Identity{OID: oid, Token: raw, Scopes: []string{"das"}}, nil
}

// start runs a source with opts (fakeAuth unless opts sets one) on a loopback httptest server.
func start(tb testing.TB, opts source.Options) (*source.Source, *httptest.Server) {
	tb.Helper()
	if opts.Authenticator == nil {
		opts.Authenticator = fakeAuth{}
	}
	src, err := source.New(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("source.New: %v", err)
	}
	srv := httptest.NewServer(src.Handler())
	tb.Cleanup(func() {
		srv.Close()
		if err := src.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return src, srv
}

type callIDKey struct{}

// withCallID makes the test transport send id in the Ask-Call-Id header of the call's requests.
func withCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// headers adds the bearer to every request and the call id of the request's context, as the
// ask agent does.
type headers struct {
	token string
	next  http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	if id, ok := r.Context().Value(callIDKey{}).(string); ok {
		r.Header.Set("Ask-Call-Id", id)
	}
	return h.next.RoundTrip(r)
}

// connect opens an MCP session to srv as the bearer token, closed when tb ends.
func connect(tb testing.TB, srv *httptest.Server, token string) *mcp.ClientSession {
	tb.Helper()
	cs, err := dial(tb.Context(), srv, token)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

func dial(ctx context.Context, srv *httptest.Server, token string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "source-test", Version: "0"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             srv.URL + "/mcp",
		HTTPClient:           &http.Client{Transport: headers{token: token, next: srv.Client().Transport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
}

// call calls tool with args, sending callID in _meta and in the header.
func call(tb testing.TB, cs *mcp.ClientSession, callID, tool string, args any) *mcp.CallToolResult {
	tb.Helper()
	res, err := cs.CallTool(withCallID(tb.Context(), callID), &mcp.CallToolParams{
		Meta:      mcp.Meta{"ask/call_id": callID},
		Name:      tool,
		Arguments: args,
	})
	if err != nil {
		tb.Fatalf("CallTool %s: %v", tool, err)
	}
	return res
}

// structured decodes a successful result's StructuredContent into v, and checks that the text
// content carries the same JSON.
func structured(tb testing.TB, res *mcp.CallToolResult, v any) {
	tb.Helper()
	if res.IsError {
		tb.Fatalf("result is an error: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("structured content %s: %v", b, err)
	}
	var a, c any
	if err := json.Unmarshal([]byte(text(res)), &a); err != nil {
		tb.Fatalf("text content is not JSON: %v", err)
	}
	json.Unmarshal(b, &c)
	ab, _ := json.Marshal(a)
	cb, _ := json.Marshal(c)
	if string(ab) != string(cb) {
		tb.Errorf("text content %s differs from structured content %s", ab, cb)
	}
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// refusal returns the result's ask/refusal code, or "" when it is not a refusal.
func refusal(res *mcp.CallToolResult) string {
	m, ok := res.Meta["ask/refusal"].(map[string]any)
	if !ok {
		return ""
	}
	code, _ := m["code"].(string)
	return code
}

// auditEntries fetches GET /audit with query q: JSON lines, one entry each.
func auditEntries(tb testing.TB, srv *httptest.Server, q string) []source.AuditEntry {
	tb.Helper()
	resp, err := srv.Client().Get(srv.URL + "/audit?" + q)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /audit: %s", resp.Status)
	}
	entries := []source.AuditEntry{}
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var e source.AuditEntry
		if err := dec.Decode(&e); err != nil {
			tb.Fatal(err)
		}
		entries = append(entries, e)
	}
	return entries
}
