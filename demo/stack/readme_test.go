package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
)

// TestReadmeFirstFiveMinutes holds the README's "first five minutes" to what it promises, against
// the real dev stack: each example ends in the outcome the README names, and every number an
// answer states is the database's, read straight from the demo source as the same identity.
func TestReadmeFirstFiveMinutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	clients := map[string]*client.Client{}
	tokens := map[string]string{}
	for _, oid := range []string{"alice", "bob"} {
		tok, err := s.IdP.Mint(idp.Claims{OID: oid})
		if err != nil {
			t.Fatal(err)
		}
		tokens[oid] = tok
		if clients[oid], err = client.New(s.AskURL, client.Options{Token: client.StaticToken(tok)}); err != nil {
			t.Fatal(err)
		}
	}
	// query reads the database directly through the demo source, as alice.
	query := func(sql string) [][]any {
		t.Helper()
		sess, err := source.Connect(ctx, source.Config{Name: "demo", URL: s.SourceURL + "/mcp"}, tokens["alice"], source.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		r := sess.Call(ctx, "run_query", map[string]any{"sql": sql})
		var res struct{ Rows [][]any }
		if err := json.Unmarshal(r.Data, &res); err != nil || len(res.Rows) == 0 {
			t.Fatalf("direct query %q: %v %s", sql, err, r.Text)
		}
		return res.Rows
	}
	ask := func(oid, conv, q string) client.Outcome {
		t.Helper()
		c := clients[oid]
		if conv == "" {
			cv, err := c.CreateConversation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conv = cv.Id
		}
		tk, out, err := c.AskAndWait(ctx, conv, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if tk.ConversationId != conv {
			t.Fatalf("ticket in conversation %s, want %s", tk.ConversationId, conv)
		}
		return out
	}
	mustAnswer := func(out client.Outcome) {
		t.Helper()
		if out.Kind != client.Answer {
			t.Fatalf("outcome %v, want an answer: %+v", out.Kind, out)
		}
	}
	num := func(v any) string { return fmt.Sprint(v) }

	t.Run("one figure", func(t *testing.T) {
		out := ask("alice", "", "How many sev1 incidents did we have in 2026-Q2?")
		mustAnswer(out)
		want := num(query("SELECT COUNT(*) FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'")[0][0])
		if out.Answer.Headline == nil || num(out.Answer.Headline.Value) != want {
			t.Fatalf("headline %+v, want %s", out.Answer.Headline, want)
		}
		if !strings.Contains(out.Answer.Text, want) {
			t.Errorf("text %q does not state %s", out.Answer.Text, want)
		}
	})

	t.Run("join, then a follow-up resolved from the previous turn", func(t *testing.T) {
		cv, err := clients["alice"].CreateConversation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		top := query(`SELECT t.name, COUNT(*) AS n FROM incidents i JOIN services s ON s.id = i.service_id
			JOIN teams t ON t.id = s.team_id WHERE i.quarter = '2026-Q3' GROUP BY t.name ORDER BY n DESC, t.name LIMIT 1`)[0]
		out := ask("alice", cv.Id, "Which team had the most incidents in 2026-Q3?")
		mustAnswer(out)
		if !strings.Contains(out.Answer.Text, num(top[0])) || !strings.Contains(out.Answer.Text, num(top[1])) {
			t.Fatalf("text %q, want team %v with %v incidents", out.Answer.Text, top[0], top[1])
		}
		deploys := num(query(fmt.Sprintf(`SELECT COUNT(*) FROM deployments d JOIN services s ON s.id = d.service_id
			JOIN teams t ON t.id = s.team_id WHERE t.name = '%s' AND d.quarter = '2026-Q3'`, top[0]))[0][0])
		out = ask("alice", cv.Id, "How many deployments did that team ship in 2026-Q3?")
		mustAnswer(out)
		if !strings.Contains(out.Answer.Text, num(top[0])) || !strings.Contains(out.Answer.Text, deploys) {
			t.Errorf("follow-up %q, want %v's %s deployments", out.Answer.Text, top[0], deploys)
		}
		// Without the first turn there is no team to resolve: the same question abstains, says
		// that nothing was looked up, and carries the model's question back.
		out = ask("alice", "", "How many deployments did that team ship in 2026-Q3?")
		if out.Kind != client.Abstention {
			t.Fatalf("the follow-up without a previous turn: %v, want an abstention", out.Kind)
		}
		if a := out.Abstention; len(a.Terms) != 0 || (a.Sources != nil && len(*a.Sources) != 0) || a.Text == nil || !strings.Contains(*a.Text, "Could you name the team?") {
			t.Errorf("abstention %+v: want no terms, no sources and the model's clarifying question", a)
		}
	})

	t.Run("catalog only", func(t *testing.T) {
		out := ask("alice", "", "What does change failure rate mean?")
		mustAnswer(out)
		if out.Answer.Path.Speed != "fast" || len(out.Answer.Sql) != 0 || len(out.Answer.Provenance) == 0 {
			t.Errorf("path %+v, sql %v, provenance %d: want fast, none, some", out.Answer.Path, out.Answer.Sql, len(out.Answer.Provenance))
		}
	})

	t.Run("refusal for bob, audited under bob", func(t *testing.T) {
		out := ask("bob", "", "What was the on-call pay per team in 2026-Q3?")
		if out.Kind != client.Refusal || out.Refusal.Tool != "run_query" {
			t.Fatalf("outcome %v, want a refusal by run_query", out.Kind)
		}
		resp, err := http.Get(s.SourceURL + "/audit?call_id=" + out.Refusal.CallId)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var line struct {
			OID     string `json:"oid"`
			Refused bool   `json:"refused"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(string(b))), &line); err != nil || line.OID != "bob" || !line.Refused {
			t.Errorf("audit line for %s: %s (want oid bob, refused)", out.Refusal.CallId, b)
		}
		if out := ask("alice", "", "What was the on-call pay per team in 2026-Q3?"); out.Kind != client.Answer {
			t.Errorf("alice: outcome %v, want an answer", out.Kind)
		}
	})

	t.Run("abstention", func(t *testing.T) {
		out := ask("alice", "", "What is our customer churn rate?")
		if out.Kind != client.Abstention || len(out.Abstention.Terms) == 0 {
			t.Fatalf("outcome %v, want an abstention with terms", out.Kind)
		}
	})
}
