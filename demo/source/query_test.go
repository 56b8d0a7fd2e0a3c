package source_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/source"
)

type queryOut struct {
	SQL       string   `json:"sql"`
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	RowCount  int      `json:"row_count"`
	Truncated bool     `json:"truncated"`
}

func TestPermissions(t *testing.T) {
	_, srv := start(t, source.Options{})
	sessions := map[string]any{}
	for _, oid := range []string{"alice", "bob", "carol"} {
		sessions[oid] = connect(t, srv, "tok-"+oid)
	}
	sensitive := []string{
		"SELECT * FROM oncall_pay",
		"SELECT count(*) FROM oncall_pay",
		`SELECT amount_eur FROM "ONCALL_PAY" WHERE quarter = '2026-Q3'`,
		"SELECT t.name, p.amount_eur FROM teams t JOIN oncall_pay p ON p.team_id = t.id",
		"SELECT name FROM teams WHERE id IN (SELECT team_id FROM oncall_pay WHERE amount_eur > 0)",
		"WITH p AS (SELECT * FROM main.oncall_pay) SELECT sum(amount_eur) FROM p",
		"SELECT (SELECT max(amount_eur) FROM [oncall_pay]) AS m",
	}
	for _, q := range sensitive {
		t.Run(q, func(t *testing.T) {
			res := call(t, connect(t, srv, "tok-alice"), "a-"+q, "run_query", map[string]any{"sql": q})
			var out queryOut
			structured(t, res, &out)
			if out.RowCount == 0 {
				t.Errorf("alice got no rows")
			}
			for _, oid := range []string{"bob", "carol"} {
				res := call(t, connect(t, srv, "tok-"+oid), oid+"-"+q, "run_query", map[string]any{"sql": q})
				if got := refusal(res); !res.IsError || got != source.CodeForbidden {
					t.Errorf("%s: isError=%v refusal=%q (%s), want forbidden", oid, res.IsError, got, text(res))
				}
				if strings.Contains(text(res), "amount") && !strings.Contains(text(res), "oncall_pay") {
					t.Errorf("%s: refusal text %q leaks data", oid, text(res))
				}
			}
		})
	}
	t.Run("bob reads public tables", func(t *testing.T) {
		res := call(t, connect(t, srv, "tok-bob"), "b1", "run_query", map[string]any{"sql": "SELECT count(*) FROM teams"})
		var out queryOut
		structured(t, res, &out)
		if got := out.Rows[0][0]; got != float64(8) {
			t.Errorf("teams = %v, want 8", got)
		}
	})
	t.Run("bob may still use the catalog for on-call pay", func(t *testing.T) {
		cs := connect(t, srv, "tok-bob")
		var def struct {
			Term   string   `json:"term"`
			Tables []string `json:"tables"`
		}
		structured(t, call(t, cs, "b2", "define_term", map[string]any{"term": "on-call pay"}), &def)
		if def.Term != "on-call compensation" || len(def.Tables) == 0 || def.Tables[0] != "oncall_pay" {
			t.Errorf("define_term = %+v", def)
		}
		var found struct {
			Terms []struct{ Term string } `json:"terms"`
		}
		structured(t, call(t, cs, "b3", "search_catalog", map[string]any{"query": "on-call compensation"}), &found)
		if len(found.Terms) == 0 || found.Terms[0].Term != "on-call compensation" {
			t.Errorf("search_catalog = %+v", found)
		}
	})
}

// TestOnlyTheDatasetsTablesAreRead: SQLite's own virtual tables are not tables of the dataset.
// sqlite_dbpage returns the database file's raw pages, oncall_pay's rows among them, and
// until 2026-12-06 bob read them with "SELECT data FROM sqlite_dbpage" (the authorizer asked
// only whether the table read was a restricted one). No identity reads them now; the schema
// tables (the schema is public) and json_each, which reads only its argument, stay readable.
func TestOnlyTheDatasetsTablesAreRead(t *testing.T) {
	_, srv := start(t, source.Options{})
	for _, oid := range []string{"alice", "bob", "carol"} {
		cs := connect(t, srv, "tok-"+oid)
		for _, q := range []string{
			"SELECT data FROM sqlite_dbpage",
			"SELECT hex(data) FROM sqlite_dbpage WHERE pgno = (SELECT rootpage FROM sqlite_master WHERE name = 'oncall_pay')",
			"SELECT * FROM temp.sqlite_dbpage",
			"SELECT * FROM sqlite_dbpage('main')",
			"SELECT name, (SELECT count(*) FROM SQLITE_DBPAGE) FROM teams",
			"SELECT * FROM dbstat",
			`SELECT name FROM "dbstat" WHERE name = 'oncall_pay'`,
		} {
			res := call(t, cs, oid+"-"+q, "run_query", map[string]any{"sql": q})
			if got := refusal(res); !res.IsError || got != source.CodeForbidden {
				t.Errorf("%s: %q: isError=%v refusal=%q (%.200s), want forbidden", oid, q, res.IsError, got, text(res))
			}
		}
		for _, q := range []string{
			"SELECT name FROM sqlite_master WHERE type = 'table'",
			"SELECT count(*) FROM sqlite_schema",
			"SELECT count(*) FROM sqlite_temp_master",
			"SELECT value FROM json_each('[1, 2]')",
			"SELECT count(*) FROM json_tree('{\"a\": [1]}')",
			"WITH t AS (SELECT id FROM teams) SELECT count(*) FROM (SELECT * FROM t)",
			"WITH c AS (SELECT 1) SELECT count(*) FROM c",
		} {
			var out queryOut
			structured(t, call(t, cs, oid+"-"+q, "run_query", map[string]any{"sql": q}), &out)
			if out.RowCount == 0 {
				t.Errorf("%s: %q: no rows", oid, q)
			}
		}
	}
}

func TestReadOnly(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-alice")
	writes := []string{
		"INSERT INTO teams (id, name, department) VALUES (99, 'x', 'y')",
		"insert into teams values (99, 'x', 'y')",
		"UPDATE teams SET name = 'x'",
		"DELETE FROM incidents",
		"/* leading comment */ DELETE FROM incidents",
		"-- a comment\nDROP TABLE teams",
		"SELECT 1; DROP TABLE teams",
		"SELECT 1; SELECT 2",
		"SELECT ';'; DELETE FROM teams",
		"ATTACH DATABASE ':memory:' AS x",
		"ATTACH DATABASE 'file:/tmp/evil.db' AS x",
		"PRAGMA query_only = 0",
		"PRAGMA table_info(teams)",
		"CREATE TABLE x (a)",
		"CREATE TEMP TABLE x AS SELECT * FROM teams",
		"ALTER TABLE teams ADD COLUMN x",
		"VACUUM",
		"REPLACE INTO teams VALUES (1, 'x', 'y')",
		"BEGIN",
		"WITH x AS (SELECT 1) INSERT INTO teams SELECT 99, 'x', 'y' FROM x",
		"WITH x AS (SELECT 1) DELETE FROM teams",
		"SELECT load_extension('/tmp/evil.so')",
		"select LOAD_EXTENSION('x', 'y')",
	}
	for i, q := range writes {
		t.Run(q, func(t *testing.T) {
			res := call(t, cs, "w"+string(rune('a'+i)), "run_query", map[string]any{"sql": q})
			if got := refusal(res); !res.IsError || got != source.CodeReadOnly {
				t.Errorf("isError=%v refusal=%q (%s), want read_only", res.IsError, got, text(res))
			}
		})
	}
	var out queryOut
	structured(t, call(t, cs, "check", "run_query", map[string]any{"sql": "SELECT count(*), max(name) FROM teams"}), &out)
	if got := out.Rows[0]; got[0] != float64(8) || got[1] != "Storefront" {
		t.Errorf("after the write attempts teams = %v, want 8 rows unchanged", got)
	}

	t.Run("mistakes are errors, not refusals", func(t *testing.T) {
		for _, q := range []string{"SELEC 1", "SELECT * FROM no_such_table", "", "  -- only a comment",
			"SELECT length(zeroblob(100000000))", "SELECT printf('%.*c', 50000000, 'x')"} {
			res := call(t, cs, "m", "run_query", map[string]any{"sql": q})
			if !res.IsError || refusal(res) != "" {
				t.Errorf("%q: isError=%v refusal=%q, want a plain tool error", q, res.IsError, refusal(res))
			}
		}
	})
	t.Run("a semicolon inside a string is one statement", func(t *testing.T) {
		var out queryOut
		structured(t, call(t, cs, "s", "run_query", map[string]any{"sql": "SELECT 'a;b' AS v, \"name\" FROM teams WHERE name = 'O''Brien;' OR 1 = 1;"}), &out)
		if out.RowCount != 8 || out.Rows[0][0] != "a;b" {
			t.Errorf("got %+v", out)
		}
	})
}

func TestRowCap(t *testing.T) {
	_, srv := start(t, source.Options{RowCap: 10})
	cs := connect(t, srv, "tok-alice")
	var out queryOut
	structured(t, call(t, cs, "c1", "run_query", map[string]any{"sql": "SELECT id, severity FROM incidents ORDER BY id"}), &out)
	if out.RowCount != 10 || len(out.Rows) != 10 || !out.Truncated {
		t.Errorf("row_count=%d rows=%d truncated=%v, want 10, 10, true", out.RowCount, len(out.Rows), out.Truncated)
	}
	if out.Columns[0] != "id" || out.Rows[9][0] != float64(10) {
		t.Errorf("columns=%v last row=%v", out.Columns, out.Rows[9])
	}
	structured(t, call(t, cs, "c2", "run_query", map[string]any{"sql": "SELECT * FROM teams"}), &out)
	if out.RowCount != 8 || out.Truncated {
		t.Errorf("row_count=%d truncated=%v, want 8, false", out.RowCount, out.Truncated)
	}

	_, srv = start(t, source.Options{})
	structured(t, call(t, connect(t, srv, "tok-alice"), "c3", "run_query", map[string]any{"sql": "SELECT * FROM deployments"}), &out)
	if out.RowCount != source.DefaultRowCap || !out.Truncated {
		t.Errorf("default cap: row_count=%d truncated=%v, want %d, true", out.RowCount, out.Truncated, source.DefaultRowCap)
	}
}

// TestResultBytesCap: a result holds at most source.MaxResultBytes of rows as JSON, whatever the
// row cap allows, and says truncated when the bound cut it. Each value may be 1 MiB, so until
// 2026-12-06 500 rows of them made one result of about 1 GB (twice: the structured content and
// its text), which the source held in memory whole while the service reads 4 MiB of it at
// most: 50 such rows took the source from 73 MB to 1.2 GB.
func TestResultBytesCap(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-bob")
	var out queryOut
	res := call(t, cs, "wide", "run_query", map[string]any{"sql": "SELECT id, printf('%.*c', 100000, 'x') AS pad FROM deployments"})
	structured(t, res, &out)
	if b, _ := json.Marshal(out.Rows); len(b) > source.MaxResultBytes || !out.Truncated || out.RowCount == 0 || out.RowCount != len(out.Rows) {
		t.Errorf("rows of %d bytes (%d rows, row_count %d), truncated=%v; want at most %d bytes, truncated", len(b), len(out.Rows), out.RowCount, out.Truncated, source.MaxResultBytes)
	}
	if n := len(text(res)); n > 3*source.MaxResultBytes {
		t.Errorf("the result's text is %d bytes", n)
	}
	// One row too large for any result is an error the model can act on, not an empty result.
	res = call(t, cs, "one", "run_query", map[string]any{"sql": "SELECT printf('%.*c', 1000000, 'x') AS a, printf('%.*c', 1000000, 'y') AS b"})
	if !res.IsError || refusal(res) != "" || !strings.Contains(text(res), "fewer or shorter") {
		t.Errorf("one row over the bound: isError=%v refusal=%q %.200q, want a tool error", res.IsError, refusal(res), text(res))
	}
	// A result under the bound is whole.
	structured(t, call(t, cs, "narrow", "run_query", map[string]any{"sql": "SELECT id FROM deployments LIMIT 500"}), &out)
	if out.RowCount != 500 || out.Truncated {
		t.Errorf("row_count=%d truncated=%v, want 500, false", out.RowCount, out.Truncated)
	}
}

func TestQueryTimeout(t *testing.T) {
	const limit = 200 * time.Millisecond
	_, srv := start(t, source.Options{QueryTimeout: limit})
	cs := connect(t, srv, "tok-alice")
	// A recursive CTE that never ends: only the time limit stops it. The test's own deadline is
	// a backstop so that a broken limit fails instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	forever := "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
	res := call(&ctxTB{TB: t, ctx: ctx}, cs, "slow", "run_query", map[string]any{"sql": forever})
	if !res.IsError || refusal(res) != "" {
		t.Fatalf("isError=%v refusal=%q, want a plain tool error", res.IsError, refusal(res))
	}
	if !strings.Contains(text(res), "200ms limit") {
		t.Errorf("error %q does not name the limit", text(res))
	}
	// The connection is usable again afterwards.
	var out queryOut
	structured(t, call(t, cs, "after", "run_query", map[string]any{"sql": "SELECT count(*) FROM services"}), &out)
	if out.RowCount != 1 {
		t.Errorf("after timeout: %+v", out)
	}
}

// ctxTB overrides Context, so call runs under a test-chosen deadline.
type ctxTB struct {
	testing.TB
	ctx context.Context
}

func (c *ctxTB) Context() context.Context { return c.ctx }
