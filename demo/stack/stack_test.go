package stack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
)

// The whole system answers a README question end to end, over HTTP, with a real token: the
// service, the agent, the llm-stub and the demo source each do their part.
func TestStackAnswersAReadmeQuestion(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	c, cid := aliceConversation(ctx, t, s)
	tk, err := c.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{Question: "How many sev1 incidents did we have in 2026-Q2?"})
	if err != nil || tk.JSON202 == nil {
		t.Fatalf("create ask: %v %s", err, tk.Body)
	}
	st, err := c.GetAskWithResponse(ctx, tk.JSON202.Ticket, &gen.GetAskParams{Prefer: ptr("wait=50")})
	if err != nil || st.JSON200 == nil {
		t.Fatalf("status: %v %s", err, st.Body)
	}
	if st.JSON200.State != gen.AskStateAnswer || st.JSON200.Terminal == nil {
		t.Fatalf("state %q, want answer: %s", st.JSON200.State, st.Body)
	}
	ans, err := st.JSON200.Terminal.AsAnswerEvent()
	if err != nil {
		t.Fatal(err)
	}
	if ans.Headline == nil || ans.Path.Speed != gen.AnswerPathSpeedFull || len(ans.Sql) == 0 {
		b, _ := json.Marshal(ans)
		t.Fatalf("answer lacks headline/full path/sql: %s", b)
	}
	if !strings.Contains(ans.Text, "sev1") {
		t.Errorf("answer text %q does not read as an answer to the question", ans.Text)
	}
}

func ptr[T any](v T) *T { return &v }

// aliceConversation is a client of s's service as alice, with a conversation of hers.
func aliceConversation(ctx context.Context, t *testing.T, s *stack.Stack) (*gen.ClientWithResponses, string) {
	t.Helper()
	token, err := s.IdP.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
	c, err := gen.NewClientWithResponses(s.AskURL, gen.WithRequestEditorFn(bearer))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := c.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{})
	if err != nil || conv.JSON201 == nil {
		t.Fatalf("create conversation: %v", err)
	}
	return c, conv.JSON201.Id
}
