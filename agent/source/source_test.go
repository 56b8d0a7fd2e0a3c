package source_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/hostile"
)

func TestParseList(t *testing.T) {
	got, err := source.ParseList(" demo=http://127.0.0.1:8091/mcp , hr=https://hr.example/mcp")
	want := []source.Config{{Name: "demo", URL: "http://127.0.0.1:8091/mcp"}, {Name: "hr", URL: "https://hr.example/mcp"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseList = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "demo", "=http://x/mcp", "demo=", "demo=ftp://x", "demo=/mcp", "a b=http://x/mcp", "d=http://x/mcp,d=http://y/mcp"} {
		if _, err := source.ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) succeeded, want an error", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		meta      map[string]any
		wantRole  source.Role
		wantPhase gen.MilestonePhase
	}{
		{"search_catalog", nil, source.RoleCatalogSearch, gen.MilestonePhaseGrounding},
		{"define_term", nil, source.RoleCatalogDefine, gen.MilestonePhaseGrounding},
		{"list_tables", nil, source.RoleSchemaList, gen.MilestonePhaseDiscovering},
		{"describe_table", nil, source.RoleSchemaDescribe, gen.MilestonePhaseDiscovering},
		{"run_query", nil, source.RoleQuery, gen.MilestonePhaseQuerying},
		{"execute_sql", nil, source.RoleQuery, gen.MilestonePhaseQuerying},
		{"ping", nil, source.RoleOther, gen.MilestonePhaseDiscovering},
		// Declared metadata wins over the name.
		{"lookup", map[string]any{"ask/role": "catalog.define", "ask/phase": "grounding"}, source.RoleCatalogDefine, gen.MilestonePhaseGrounding},
		{"run_query", map[string]any{"ask/role": "query", "ask/phase": "reconciling"}, source.RoleQuery, gen.MilestonePhaseReconciling},
		// Unknown declarations fall back.
		{"run_query", map[string]any{"ask/role": "nonsense", "ask/phase": 3}, source.RoleQuery, gen.MilestonePhaseQuerying},
	}
	for _, tt := range tests {
		role, phase := source.Classify(tt.name, tt.meta)
		if role != tt.wantRole || phase != tt.wantPhase {
			t.Errorf("Classify(%s, %v) = %s, %s; want %s, %s", tt.name, tt.meta, role, phase, tt.wantRole, tt.wantPhase)
		}
	}
}

// testServer is a minimal MCP source: tools without metadata, one that refuses, one that fails
// as a tool error, one that fails at the protocol level. It records each request's headers and
// each call's _meta.
type testServer struct {
	mu      sync.Mutex
	headers []http.Header
	metas   []map[string]any
	token   string
}

func (ts *testServer) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	schema := map[string]any{"type": "object"}
	handle := func(f func() (*mcp.CallToolResult, error)) mcp.ToolHandler {
		return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ts.mu.Lock()
			ts.metas = append(ts.metas, req.Params.Meta)
			ts.mu.Unlock()
			return f()
		}
	}
	srv.AddTool(&mcp.Tool{Name: "run_query", InputSchema: schema}, handle(func() (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"sql":"SELECT 1","columns":["n"],"rows":[[1]]}`}},
			StructuredContent: map[string]any{"sql": "SELECT 1", "columns": []any{"n"}, "rows": []any{[]any{1}}},
		}, nil
	}))
	srv.AddTool(&mcp.Tool{Name: "read_pay", InputSchema: schema}, handle(func() (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			IsError: true,
			Meta:    mcp.Meta{"ask/refusal": map[string]any{"code": "forbidden", "reason": "may not read oncall_pay"}},
			Content: []mcp.Content{&mcp.TextContent{Text: "refused: may not read oncall_pay"}},
		}, nil
	}))
	srv.AddTool(&mcp.Tool{Name: "bad_sql", InputSchema: schema}, handle(func() (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "near \"SELEC\": syntax error"}}}, nil
	}))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.headers = append(ts.headers, r.Header.Clone())
		ok := r.Header.Get("Authorization") == "Bearer "+ts.token
		ts.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func TestSessionCallsAndClassifies(t *testing.T) {
	ts := &testServer{token: "tok-alice"}
	hs := ts.start(t)
	s, err := source.Connect(t.Context(), source.Config{Name: "test", URL: hs.URL}, "tok-alice", source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var names []string
	for _, tool := range s.Tools() {
		names = append(names, tool.Name)
		if tool.Source != "test" {
			t.Errorf("tool %+v: source not set", tool)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"bad_sql", "read_pay", "run_query"}) {
		t.Errorf("tools = %v, want those the server listed", names)
	}

	ok := s.Call(t.Context(), "run_query", map[string]any{"sql": "SELECT 1"})
	if ok.Outcome != source.OK || !strings.Contains(string(ok.Data), `"rows":[[1]]`) || !strings.Contains(ok.Text, "SELECT 1") {
		t.Errorf("ok call = %+v", ok)
	}
	refused := s.Call(t.Context(), "read_pay", nil)
	if refused.Outcome != source.Refused || refused.RefusalCode != "forbidden" || refused.RefusalReason != "may not read oncall_pay" || refused.Data != nil {
		t.Errorf("refused call = %+v", refused)
	}
	bad := s.Call(t.Context(), "bad_sql", nil)
	if bad.Outcome != source.ToolError || !strings.Contains(bad.Text, "syntax error") {
		t.Errorf("bad call = %+v", bad)
	}
	unknown := s.Call(t.Context(), "no_such_tool", nil)
	if unknown.Outcome != source.ToolError || unknown.Text == "" {
		t.Errorf("unknown tool = %+v, want a tool error for the model", unknown)
	}

	// Every request carried the bearer; each call carried its own id in _meta and in the header.
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var headerIDs []string
	for _, h := range ts.headers {
		if h.Get("Authorization") != "Bearer tok-alice" {
			t.Errorf("request without the bearer: %v", h)
		}
		if id := h.Get(source.HeaderCallID); id != "" {
			headerIDs = append(headerIDs, id)
		}
	}
	var metaIDs []string
	for _, m := range ts.metas {
		id, _ := m[source.MetaCallID].(string)
		metaIDs = append(metaIDs, id)
	}
	wantIDs := []string{ok.CallID, refused.CallID, bad.CallID}
	if !slices.Equal(metaIDs, wantIDs) {
		t.Errorf("_meta call ids = %v, want %v", metaIDs, wantIDs)
	}
	for _, id := range wantIDs {
		if !slices.Contains(headerIDs, id) {
			t.Errorf("call id %s not sent in %s (got %v)", id, source.HeaderCallID, headerIDs)
		}
	}
	if ok.CallID == refused.CallID || !strings.HasPrefix(ok.CallID, "call_") || len(ok.CallID) != 37 {
		t.Errorf("call ids %q, %q: want distinct call_<32 hex>", ok.CallID, refused.CallID)
	}
}

func TestRejectedBearerIsTransport(t *testing.T) {
	ts := &testServer{token: "tok-alice"}
	hs := ts.start(t)
	_, err := source.Connect(t.Context(), source.Config{Name: "test", URL: hs.URL}, "tok-mallory", source.Options{})
	var te *source.TransportError
	if !asTransport(err, &te) || te.Status != http.StatusUnauthorized || te.Source != "test" {
		t.Fatalf("err = %v, want a transport error with 401", err)
	}
	if strings.Contains(err.Error(), "tok-mallory") {
		t.Errorf("error %q carries the token", err)
	}

	// Mid-session: the token is revoked after connecting.
	s, err := source.Connect(t.Context(), source.Config{Name: "test", URL: hs.URL}, "tok-alice", source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts.mu.Lock()
	ts.token = "rotated"
	ts.mu.Unlock()
	r := s.Call(t.Context(), "run_query", nil)
	if r.Outcome != source.Transport || !asTransport(r.Err, &te) || te.Status != http.StatusUnauthorized {
		t.Errorf("call after revocation = %+v, want transport 401", r)
	}
}

func asTransport(err error, te **source.TransportError) bool {
	e, ok := err.(*source.TransportError)
	if ok {
		*te = e
	}
	return ok
}

// A source whose endpoint answers 307 to another origin, on the very first request: the
// session is not opened, the other origin receives nothing at all, and the error says why.
// One that redirects within its own origin is followed, with the bearer, to the same origin.
func TestRedirects(t *testing.T) {
	foreign := hostile.NewForeign(t)
	ts := &testServer{token: "tok-alice"}
	target := ts.start(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, foreign.URL+"/mcp", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusTemporaryRedirect)
		default:
			// A reverse proxy to the real source, so the same origin serves MCP at /moved.
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, target.URL, r.Body)
			req.Header = r.Header.Clone()
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			for k, vs := range resp.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(resp.StatusCode)
			io.Copy(w, resp.Body)
		}
	}))
	defer front.Close()

	_, err := source.Connect(t.Context(), source.Config{Name: "test", URL: front.URL + "/away"}, "tok-alice", source.Options{})
	if !errors.Is(err, source.ErrOffOrigin) || !strings.Contains(err.Error(), "redirected off its configured origin") {
		t.Errorf("connect through a cross-origin redirect: err = %v, want ErrOffOrigin", err)
	}
	if n := len(foreign.Requests()); n != 0 {
		t.Errorf("the other origin received %d requests", n)
	}
	_, err = source.Connect(t.Context(), source.Config{Name: "test", URL: front.URL + "/loop"}, "tok-alice", source.Options{})
	if !errors.Is(err, source.ErrTooManyRedirects) {
		t.Errorf("connect through a redirect loop: err = %v, want ErrTooManyRedirects", err)
	}

	same := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
			return
		}
		front.Config.Handler.ServeHTTP(w, r)
	}))
	defer same.Close()
	s, err := source.Connect(t.Context(), source.Config{Name: "test", URL: same.URL + "/mcp"}, "tok-alice", source.Options{})
	if err != nil {
		t.Fatalf("connect through a same-origin redirect: %v", err)
	}
	defer s.Close()
	if r := s.Call(t.Context(), "run_query", nil); r.Outcome != source.OK {
		t.Errorf("call through a same-origin redirect = %+v, want ok", r)
	}
}

// TestTooManyRequestsIsNamed: a source that answers 429 (the demo source past its cap of open
// sessions per identity) ends the run as a transport failure whose message says so. It said
// "unreachable or broke the protocol", as for a source that is not there at all.
func TestTooManyRequestsIsNamed(t *testing.T) {
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many open MCP sessions for this identity", http.StatusTooManyRequests)
	}))
	defer busy.Close()
	_, err := source.Connect(t.Context(), source.Config{Name: "test", URL: busy.URL}, "tok-alice", source.Options{})
	var te *source.TransportError
	if !asTransport(err, &te) || !errors.Is(err, source.ErrTooManyRequests) || !strings.Contains(err.Error(), "HTTP 429") {
		t.Fatalf("err = %v, want a transport error naming the 429", err)
	}
}
