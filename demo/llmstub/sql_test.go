package llmstub_test

import (
	"database/sql"
	"testing"
	"testing/synctest"

	"github.com/openai/openai-go/v3"
	_ "modernc.org/sqlite"
)

// demoSchema is the demo dataset's schema as the shared conventions fix it.
const demoSchema = `
CREATE TABLE teams (id INTEGER PRIMARY KEY, name TEXT NOT NULL, department TEXT NOT NULL);
CREATE TABLE services (id INTEGER PRIMARY KEY, name TEXT NOT NULL, team_id INTEGER NOT NULL REFERENCES teams(id), tier INTEGER NOT NULL);
CREATE TABLE incidents (id INTEGER PRIMARY KEY, service_id INTEGER NOT NULL REFERENCES services(id), severity TEXT NOT NULL,
  opened_at TEXT NOT NULL, resolved_at TEXT, quarter TEXT NOT NULL);
CREATE TABLE deployments (id INTEGER PRIMARY KEY, service_id INTEGER NOT NULL REFERENCES services(id), deployed_at TEXT NOT NULL,
  quarter TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE oncall_pay (team_id INTEGER NOT NULL REFERENCES teams(id), quarter TEXT NOT NULL, amount_eur REAL NOT NULL);
`

// TestDefaultScriptSQLIsValid runs every README question through the stub, collects each SQL
// statement it asks run_query to execute, and has SQLite compile it against the demo schema.
func TestDefaultScriptSQLIsValid(t *testing.T) {
	var statements []string
	// In a bubble, so the slow question's scripted delay passes on the fake clock.
	synctest.Test(t, func(t *testing.T) {
		_, client := bubbleClient(t)
		src := demoSource{count: 12, topTeam: "Storefront"}
		first := ask(t, client, nil, qMostTeam, src.answer, false)
		history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(qMostTeam), openai.AssistantMessage(first.Final)}
		runs := []askResult{
			ask(t, client, nil, qSev1, src.answer, false),
			ask(t, client, nil, qTakeYourTm, src.answer, false),
			first,
			ask(t, client, history, qFollowUp, src.answer, false),
			ask(t, client, nil, qOncallPay, src.answer, false),
			ask(t, client, nil, qDefine, src.answer, false),
			ask(t, client, nil, qChurn, demoSource{noTerms: true}.answer, false),
		}
		for _, r := range runs {
			for _, c := range r.Calls {
				if c.Name == "run_query" {
					statements = append(statements, c.Args["sql"].(string))
				}
			}
		}
	})
	if len(statements) != 5 {
		t.Fatalf("%d statements, want one for each of the 5 warehouse questions: %q", len(statements), statements)
	}

	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection, so the schema and the statements share the database
	if _, err := db.ExecContext(t.Context(), demoSchema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	for _, stmt := range statements {
		rows, err := db.QueryContext(t.Context(), "EXPLAIN "+stmt)
		if err != nil {
			t.Errorf("not valid SQLite for the demo schema: %v\n%s", err, stmt)
			continue
		}
		if err := rows.Close(); err != nil {
			t.Error(err)
		}
		// And it runs, read-only, on the empty tables.
		rows, err = db.QueryContext(t.Context(), stmt)
		if err != nil {
			t.Errorf("does not run: %v\n%s", err, stmt)
			continue
		}
		if err := rows.Close(); err != nil {
			t.Error(err)
		}
	}
}
