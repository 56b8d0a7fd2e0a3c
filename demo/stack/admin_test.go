package stack_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
)

// TestStackAdminListener: with AdminAddr the stack's service is instrumented as askd's is, and
// its metrics and probes are served on their own listener — not on the service's.
func TestStackAdminListener(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{AdminAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if s.AdminURL == "" {
		t.Fatal("no AdminURL")
	}
	token, err := s.IdP.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := gen.NewClientWithResponses(s.AskURL, gen.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := c.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{})
	if err != nil || conv.JSON201 == nil {
		t.Fatalf("create conversation: %v", err)
	}
	if conv.HTTPResponse.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the service's response")
	}
	tk, err := c.CreateAskWithResponse(ctx, conv.JSON201.Id, nil, gen.AskRequest{Question: "What does change failure rate mean?"})
	if err != nil || tk.JSON202 == nil {
		t.Fatalf("create ask: %v", err)
	}
	st, err := c.GetAskWithResponse(ctx, tk.JSON202.Ticket, &gen.GetAskParams{Prefer: ptr("wait=50")})
	if err != nil || st.JSON200 == nil || st.JSON200.State != gen.AskStateAnswer {
		t.Fatalf("status: %v", err)
	}
	if err := s.Service.Shutdown(ctx); err != nil { // every run has returned: its end is counted
		t.Fatal(err)
	}

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(s.AdminURL + "/metrics"); code != http.StatusOK || !strings.Contains(body, `ask_asks_total{kind="",outcome="answer"} 1`) {
		t.Errorf("/metrics: %d, want one answer counted:\n%s", code, body)
	}
	if code, _ := get(s.AdminURL + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := get(s.AskURL + "/metrics"); code == http.StatusOK {
		t.Error("the service's listener serves /metrics")
	}
}
