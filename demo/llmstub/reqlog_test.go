package llmstub_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/das-ask/ask/demo/llmstub"
)

func getRequests(t *testing.T, url string) []llmstub.Received {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/_stub/requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /_stub/requests: %d", resp.StatusCode)
	}
	var got []llmstub.Received
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRequestLog: every request is recorded — accepted, rejected and unknown — with what was asked
// and what was answered, the same in process and over HTTP; DELETE clears it.
func TestRequestLog(t *testing.T) {
	stub, srv := newStub(t, llmstub.Options{})
	client := newClient(srv.URL)
	res := ask(t, client, nil, qChurn, demoSource{noTerms: true}.answer, false)
	post(t, srv.URL+"/v1/chat/completions", `{"model":"m"}`)
	post(t, srv.URL+"/v1/nope", `{}`)

	got := stub.Requests()
	if len(got) != 4 {
		t.Fatalf("%d requests logged, want 4: %+v", len(got), got)
	}
	for i, r := range got {
		if r.Seq != i+1 {
			t.Errorf("request %d has seq %d", i, r.Seq)
		}
	}
	first, second := got[0], got[1]
	if first.Status != 200 || first.Rule != "customer-churn" || first.Decision != llmstub.DecisionToolCall ||
		first.ToolCall == nil || first.ToolCall.Name != "search_catalog" || first.ToolCall.Arguments != `{"query":"churn"}` {
		t.Errorf("first request %+v", first)
	}
	if !hasMessage(first.Messages, "user", qChurn) || len(first.Tools) != 5 || first.Model != "llm-stub" {
		t.Errorf("first request did not record what was asked: %+v", first)
	}
	if second.Decision != llmstub.DecisionEmpty || second.ToolCall != nil || second.Content != res.Final {
		t.Errorf("second request %+v, want the abstaining prose %q", second, res.Final)
	}
	// The model was never asked to run a query, and was sent the empty search result.
	if n := len(second.Messages); n < 1 || second.Messages[n-1].Role != "tool" || second.Messages[n-1].ToolCallID != first.ToolCall.ID {
		t.Errorf("second request's last message %+v, want the tool result for %s", second.Messages, first.ToolCall.ID)
	}
	if got[2].Status != http.StatusBadRequest || got[2].Error == "" || got[3].Status != http.StatusNotFound || got[3].Path != "/v1/nope" {
		t.Errorf("rejected requests %+v %+v", got[2], got[3])
	}

	if overHTTP := getRequests(t, srv.URL); !reflect.DeepEqual(overHTTP, got) {
		t.Errorf("GET /_stub/requests differs from Requests():\n%+v\n%+v", overHTTP, got)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.URL+"/_stub/requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || len(stub.Requests()) != 0 {
		t.Errorf("DELETE: status %d, %d requests left", resp.StatusCode, len(stub.Requests()))
	}
	// Reading the log is not itself logged.
	if n := len(getRequests(t, srv.URL)); n != 0 {
		t.Errorf("%d requests after reset", n)
	}
}

// TestRequestLogBounded: past MaxLogged the oldest entries go first.
func TestRequestLogBounded(t *testing.T) {
	stub, srv := newStub(t, llmstub.Options{MaxLogged: 2})
	for range 5 {
		post(t, srv.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	}
	got := stub.Requests()
	if len(got) != 2 || got[0].Seq != 4 || got[1].Seq != 5 {
		t.Errorf("log %+v, want seqs 4 and 5", got)
	}
}

// TestRequestLogLoopbackOnly: the request log holds every identity's questions, so /_stub answers
// only a loopback peer naming a loopback host: a request from another address, or one naming
// another host (a page that DNS rebinding brought to loopback), is a 403 that neither reads nor
// clears the log.
func TestRequestLogLoopbackOnly(t *testing.T) {
	stub, srv := newStub(t, llmstub.Options{})
	post(t, srv.URL+"/v1/chat/completions", `{"model":"m"}`)
	h := stub.Handler()
	for _, tc := range []struct{ method, remote, host string }{
		{http.MethodGet, "192.0.2.7:40000", "127.0.0.1:8092"},
		{http.MethodGet, "127.0.0.1:40000", "rebind.example:8092"},
		{http.MethodDelete, "[2001:db8::1]:40000", "localhost:8092"},
		{http.MethodDelete, "127.0.0.1:40000", "rebind.example"},
	} {
		req := httptest.NewRequestWithContext(t.Context(), tc.method, "/_stub/requests", nil)
		req.RemoteAddr, req.Host = tc.remote, tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || strings.Contains(rec.Body.String(), `"messages"`) {
			t.Errorf("%s from %s naming %s: %d %s, want a 403", tc.method, tc.remote, tc.host, rec.Code, rec.Body)
		}
	}
	if n := len(stub.Requests()); n != 1 {
		t.Errorf("%d requests logged after refused DELETEs, want 1", n)
	}
	for _, host := range []string{"127.0.0.1:8092", "localhost", "[::1]:8092"} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/_stub/requests", nil)
		req.RemoteAddr, req.Host = "[::1]:40000", host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("GET from loopback naming %s: %d, want 200", host, rec.Code)
		}
	}
}
