package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
)

// The README's wrong-winner question, and the SQL that answers it both ways, straight against the
// demo database: the catalog's change failure rate counts failed and rolled-back deployments over
// all of them; the naive reading counts failed ones only.
const (
	qWrongWinner = "Which team had the highest change failure rate in 2026-Q3?"
	sqlCatalog   = `SELECT t.name, ROUND(100.0 * SUM(d.status IN ('failed', 'rolled_back')) / COUNT(*), 1) AS r
		FROM deployments d JOIN services s ON s.id = d.service_id JOIN teams t ON t.id = s.team_id
		WHERE d.quarter = '2026-Q3' GROUP BY t.name ORDER BY r DESC, t.name LIMIT 1`
	sqlNaive = `SELECT t.name, ROUND(100.0 * SUM(d.status = 'failed') / COUNT(*), 1) AS r
		FROM deployments d JOIN services s ON s.id = d.service_id JOIN teams t ON t.id = s.team_id
		WHERE d.quarter = '2026-Q3' GROUP BY t.name ORDER BY r DESC, t.name LIMIT 1`
)

// TestPhase2TwoSources runs phase 2 on the split demo (a catalog source and a warehouse source):
// a branch per source inside the supervisor's, steps and milestones naming open branches, the
// supervisor's reconciling milestone, done.steps counting every branch's calls, and a divergence
// on the wrong-winner question whose figures are the database's both ways — null where the
// catalog changes nothing.
func TestPhase2TwoSources(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{Split: true, Phase: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.CatalogURL == "" || len(s.SourceURLs) != 2 {
		t.Fatalf("split stack: catalog %q, sources %v", s.CatalogURL, s.SourceURLs)
	}
	tok, err := s.IdP.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(s.AskURL, client.Options{Token: client.StaticToken(tok)})
	if err != nil {
		t.Fatal(err)
	}
	query := func(sql string) []any {
		t.Helper()
		sess, err := source.Connect(ctx, source.Config{Name: "warehouse", URL: s.SourceURL + "/mcp"}, tok, source.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		r := sess.Call(ctx, "run_query", map[string]any{"sql": sql})
		var res struct{ Rows [][]any }
		if err := json.Unmarshal(r.Data, &res); err != nil || len(res.Rows) != 1 {
			t.Fatalf("direct query: %v %s", err, r.Text)
		}
		return res.Rows[0]
	}
	run := func(q string) ([]client.Event, client.Outcome) {
		t.Helper()
		cv, err := c.CreateConversation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := c.Ask(ctx, cv.Id, q)
		if err != nil {
			t.Fatal(err)
		}
		var evs []client.Event
		events := func(yield func(client.Event, error) bool) {
			for ev, err := range c.Events(ctx, tk.Ticket, client.EventsOptions{}) {
				if err == nil {
					evs = append(evs, ev)
				}
				if !yield(ev, err) {
					return
				}
			}
		}
		out, err := client.Collect(events)
		if err != nil {
			t.Fatal(err)
		}
		checkBranches(t, evs, []string{"catalog", "warehouse"})
		return evs, out
	}

	t.Run("wrong winner", func(t *testing.T) {
		catalog, naive := query(sqlCatalog), query(sqlNaive)
		if fmt.Sprint(catalog[0]) == fmt.Sprint(naive[0]) {
			t.Fatalf("the demo data gives the same team both ways (%v): the question shows nothing", catalog)
		}
		evs, out := run(qWrongWinner)
		if out.Kind != client.Answer {
			t.Fatalf("outcome %v, want an answer", out.Kind)
		}
		a := out.Answer
		if a.Result == nil || len(a.Result.Rows) != 1 || fmt.Sprint(a.Result.Rows[0]) != fmt.Sprint(catalog) {
			t.Fatalf("result %+v, want the catalog's winner %v", a.Result, catalog)
		}
		d := a.Divergence
		if d == nil {
			t.Fatal("divergence is null on the wrong-winner question")
		}
		if len(d.Result.Rows) != 1 || fmt.Sprint(d.Result.Rows[0]) != fmt.Sprint(naive) {
			t.Errorf("divergence result %+v, want the naive winner %v", d.Result, naive)
		}
		if !slices.Equal(d.Without, []string{"change failure rate"}) || len(d.Sql) == 0 || strings.Contains(d.Sql[len(d.Sql)-1], "rolled_back") {
			t.Errorf("divergence without %v, sql %q: want change failure rate, a statement without rolled_back", d.Without, d.Sql)
		}
		if !slices.ContainsFunc(a.Provenance, func(p gen.Provenance) bool { return p.Term == "change failure rate" }) {
			t.Errorf("provenance %+v lacks the definition divergence names", a.Provenance)
		}
		// The README states both winners; they are the database's.
		readme, err := os.ReadFile("../../README.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range [][]any{catalog, naive} {
			rate, _ := row[1].(float64)
			if want := fmt.Sprintf("**%v (%.1f %%)**", row[0], rate); !strings.Contains(string(readme), want) {
				t.Errorf("README.md does not state %s", want)
			}
		}
		var reconciling bool
		for _, ev := range evs {
			if m, ok := ev.Value.(gen.MilestoneEvent); ok && m.Phase == gen.MilestonePhaseReconciling && m.BranchId != nil && *m.BranchId == "b1" {
				reconciling = true
			}
		}
		if !reconciling {
			t.Error("no reconciling milestone in the supervisor's branch")
		}
	})

	t.Run("a refusal in a branch is the run's refusal", func(t *testing.T) {
		bobTok, err := s.IdP.Mint(idp.Claims{OID: "bob"})
		if err != nil {
			t.Fatal(err)
		}
		bob, err := client.New(s.AskURL, client.Options{Token: client.StaticToken(bobTok)})
		if err != nil {
			t.Fatal(err)
		}
		cv, err := bob.CreateConversation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := bob.Ask(ctx, cv.Id, "What was the on-call pay per team in 2026-Q3?")
		if err != nil {
			t.Fatal(err)
		}
		var evs []client.Event
		for ev, err := range bob.Events(ctx, tk.Ticket, client.EventsOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		checkBranches(t, evs, []string{"catalog", "warehouse"})
		var refusal *gen.RefusalEvent
		refusedIn := ""
		for _, ev := range evs {
			switch v := ev.Value.(type) {
			case gen.RefusalEvent:
				refusal = &v
			case gen.StepEvent:
				if v.Refused && v.BranchId != nil {
					refusedIn = *v.BranchId
				}
			case gen.AnswerEvent:
				t.Fatal("an answer in a run where a branch was refused")
			}
		}
		if refusal == nil || refusal.Tool != "run_query" || refusal.Source != "warehouse" {
			t.Fatalf("refusal %+v, want run_query on warehouse", refusal)
		}
		if refusedIn == "" || refusedIn == "b1" {
			t.Errorf("the refused call was made in branch %q, want a source or the withheld branch", refusedIn)
		}
	})

	t.Run("the catalog changes nothing", func(t *testing.T) {
		_, out := run("How many sev1 incidents did we have in 2026-Q2?")
		if out.Kind != client.Answer || out.Answer.Headline == nil {
			t.Fatalf("outcome %v, want an answer with a headline", out.Kind)
		}
		if out.Answer.Divergence != nil {
			t.Errorf("divergence %+v, want null: the same statement runs with or without the catalog", out.Answer.Divergence)
		}
	})
}

// checkBranches holds a phase-2 stream to its shape: the supervisor's branch b1 around
// everything; one source branch per configured source (and at most one withheld branch), each
// opened once inside b1 before its first step and closed once after its last; every step and
// milestone naming a branch that is open; done.steps equal to the steps seen.
func checkBranches(t *testing.T, evs []client.Event, sources []string) {
	t.Helper()
	open := map[string]bool{}
	opened := map[string]int{}
	var bySource []string
	var steps int64
	supOpen := false
	for _, ev := range evs {
		switch v := ev.Value.(type) {
		case gen.BranchEvent:
			if v.BranchId == "b1" {
				supOpen = v.State == gen.BranchEventStateOpen
				if !supOpen && len(open) > 0 {
					t.Errorf("supervisor closed with %v still open", open)
				}
				continue
			}
			if !supOpen {
				t.Errorf("branch %s %s outside the supervisor's", v.BranchId, v.State)
			}
			if v.State == gen.BranchEventStateOpen {
				opened[v.BranchId]++
				open[v.BranchId] = true
				if v.Role == "source" && v.Source != nil {
					bySource = append(bySource, *v.Source)
				}
			} else {
				if !open[v.BranchId] {
					t.Errorf("branch %s closed while not open", v.BranchId)
				}
				delete(open, v.BranchId)
			}
		case gen.StepEvent:
			steps++
			if v.BranchId == nil || (*v.BranchId != "b1" && !open[*v.BranchId]) || (*v.BranchId == "b1" && !supOpen) {
				t.Errorf("step %s names branch %v, not an open one", v.Tool, v.BranchId)
			}
		case gen.MilestoneEvent:
			if v.BranchId == nil || (*v.BranchId != "b1" && !open[*v.BranchId]) {
				t.Errorf("milestone %s names branch %v, not an open one", v.Phase, v.BranchId)
			}
		case gen.DoneEvent:
			if v.Steps != steps {
				t.Errorf("done.steps %d, want the %d steps seen", v.Steps, steps)
			}
		}
	}
	for id, n := range opened {
		if n != 1 {
			t.Errorf("branch %s opened %d times", id, n)
		}
	}
	slices.Sort(bySource)
	if !slices.Equal(bySource, sources) {
		t.Errorf("source branches for %v, want one per configured source %v", bySource, sources)
	}
}

// TestWrongWinnerPhase1: the README's wrong-winner question on the default stack (one demo source,
// phase 1): the catalog's winner, as the database has it, and divergence null — phase 1 promises
// it.
func TestWrongWinnerPhase1(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok, err := s.IdP.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(s.AskURL, client.Options{Token: client.StaticToken(tok)})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := source.Connect(ctx, source.Config{Name: "demo", URL: s.SourceURL + "/mcp"}, tok, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var res struct{ Rows [][]any }
	if r := sess.Call(ctx, "run_query", map[string]any{"sql": sqlCatalog}); json.Unmarshal(r.Data, &res) != nil || len(res.Rows) != 1 {
		t.Fatalf("direct query: %s", r.Text)
	}
	cv, err := c.CreateConversation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, out, err := c.AskAndWait(ctx, cv.Id, qWrongWinner)
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != client.Answer || out.Answer.Result == nil || fmt.Sprint(out.Answer.Result.Rows) != fmt.Sprint(res.Rows) {
		t.Fatalf("outcome %v %+v, want the catalog's winner %v", out.Kind, out.Answer, res.Rows)
	}
	if !strings.Contains(out.Answer.Text, fmt.Sprint(res.Rows[0][0])) {
		t.Errorf("text %q does not name %v", out.Answer.Text, res.Rows[0][0])
	}
	if out.Answer.Divergence != nil {
		t.Errorf("divergence %+v in phase 1, want null", out.Answer.Divergence)
	}
}
