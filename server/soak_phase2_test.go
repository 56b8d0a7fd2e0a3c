//go:build !fuzzsmoke

package server_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/demo/llmstub"
	demosource "github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/obs"
)

// soakScript is the llm-stub's script for the phase-2 soak, one rule for each kind of question
// the load asks (soak_test.go's run): the wrong-winner question, whose branches, reconciliation
// and withheld branch all run and whose answer diverges ("branch"); one that the warehouse
// refuses, which stops the other branches ("pay"); one whose catalog branch waits on the model
// until the ask is cancelled, while the warehouse's and the withheld branch's end ("block");
// and a count that needs no reconciliation of note (anything else). Goal mode: each branch
// makes the steps whose tools it is offered.
const soakScript = `
rules:
  - name: block
    pattern: '^soak question \d+ block$'
    mode: goal
    steps:
      - tool: describe_table
        args: {table: incidents}
      - tool: search_catalog
        args: {query: incident}
        delay: 1h
    final: "Nothing to say."
  - name: pay
    pattern: '^soak question \d+ pay$'
    mode: goal
    steps:
      - tool: search_catalog
        args: {query: on-call pay}
      - tool: run_query
        args: {sql: "SELECT team_id, SUM(amount_eur) FROM oncall_pay GROUP BY team_id"}
    final: "Paid."
  - name: branch
    pattern: '^soak question \d+ branch$'
    mode: goal
    steps:
      - tool: search_catalog
        args: {query: change failure rate}
      - tool: define_term
        args: {term: change failure rate}
      - tool: describe_table
        args: {table: deployments}
      - tool: run_query
        args:
          sql: >-
            {{if defined .Results "change failure rate"}}SELECT t.name AS team,
            ROUND(100.0 * SUM(d.status IN ('failed', 'rolled_back')) / COUNT(*), 1) AS rate
            {{- else}}SELECT t.name AS team,
            ROUND(100.0 * SUM(d.status = 'failed') / COUNT(*), 1) AS rate{{end}}
            FROM deployments d JOIN services s ON s.id = d.service_id JOIN teams t ON t.id = s.team_id
            WHERE d.quarter = '2026-Q3' GROUP BY t.name ORDER BY 2 DESC, t.name LIMIT 1
    final: "{{with rows .Last}}{{index . 0 0}}.{{else}}Defined.{{end}}"
  - name: count
    pattern: '^soak question \d+$'
    mode: goal
    steps:
      - tool: search_catalog
        args: {query: incident}
      - tool: define_term
        args: {term: incident}
      - tool: describe_table
        args: {table: incidents}
      - tool: run_query
        args: {sql: "SELECT COUNT(*) AS n FROM incidents WHERE severity = 'sev1'"}
    final: "{{with rows .Last}}{{index . 0 0}}.{{else}}Defined.{{end}}"
`

// phase2Runner is the real phase-2 agent as askd runs it (ASK_PHASE=2, divergence on): the
// demo as two MCP sources, a catalog and a warehouse, and the llm-stub behind the production
// OpenAI adapter, each on a real HTTP server of its own in this process, so that a session, a
// connection or a branch the agent leaves behind is a goroutine the soak finds. The sources
// take leftoverAuth's tokens, which the agent forwards as it would a user's bearer. log gets
// the agent's and the model's lines. closeIdle closes the agent's and the model's idle
// connections (with theirs, the servers' goroutines serving them end).
func phase2Runner(t *testing.T, log *slog.Logger) (runner ask.Runner, closeIdle func()) {
	t.Helper()
	ctx := t.Context()
	var sources []agent.SourceConfig
	for _, part := range []demosource.Part{demosource.PartCatalog, demosource.PartWarehouse} {
		// AuditKeep 1: the audit the sources keep for GET /audit is not what this test weighs.
		src, err := demosource.New(ctx, demosource.Options{Authenticator: leftoverAuth{}, Serves: part, AuditKeep: 1})
		if err != nil {
			t.Fatal(err)
		}
		web := httptest.NewServer(src.Handler())
		t.Cleanup(func() {
			web.Close()
			_ = src.Close()
		})
		sources = append(sources, agent.SourceConfig{Name: string(part), URL: web.URL + "/mcp"})
	}
	script, err := llmstub.ParseScript([]byte(soakScript))
	if err != nil {
		t.Fatal(err)
	}
	// MaxLogged 1: nor is the stub's log of the requests it served (1000 by default).
	stub, err := llmstub.New(llmstub.Options{Script: script, MaxLogged: 1})
	if err != nil {
		t.Fatal(err)
	}
	stubWeb := httptest.NewServer(stub.Handler())
	t.Cleanup(stubWeb.Close)

	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := agent.DefaultConfig()
	cfg.BaseURL = stubWeb.URL + "/v1"
	m, err := cfg.NewModel(hc, log)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Model: m, Sources: sources, Logger: log, HTTPClient: hc,
		Phase: 2, DivergenceTurns: agent.DefaultDivergenceTurns})
	if err != nil {
		t.Fatal(err)
	}
	return a, tr.CloseIdleConnections
}

// ranPhase2 fails t unless the load o observed was phase 2's, every way it ends: answers,
// refusals and cancels, with source branches opened. A soak whose asks all failed early (a
// source the agent could not reach, a script that matched nothing) would prove nothing.
func ranPhase2(t *testing.T, o *obs.Observer) {
	t.Helper()
	fams, err := o.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "ask_asks_total":
				got[labels["outcome"]+"/"+labels["kind"]] += m.GetCounter().GetValue()
			case "ask_events_emitted_total":
				got["events:"+labels["type"]] += m.GetCounter().GetValue()
			}
		}
	}
	t.Logf("phase 2: %v", got)
	for _, k := range []string{"answer/", "refusal/", "error/cancelled", "events:branch"} {
		if got[k] == 0 {
			t.Errorf("no %s in the phase-2 load: %v", k, got)
		}
	}
}
