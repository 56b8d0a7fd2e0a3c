package source_test

import (
	"testing"

	"github.com/das-ask/ask/demo/source"
)

// TestDatasetShape checks the facts the README's example questions and the llm-stub's script
// rely on: eight named teams, seven quarters, a single team with the most incidents in 2026-Q3,
// sev1 incidents in 2026-Q2, some failed and rolled-back deployments, some open incidents, and a
// few thousand rows in all.
func TestDatasetShape(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-alice")
	one := func(sql string) []any {
		t.Helper()
		var out queryOut
		structured(t, call(t, cs, "shape", "run_query", map[string]any{"sql": sql}), &out)
		if len(out.Rows) == 0 {
			t.Fatalf("%s: no rows", sql)
		}
		return out.Rows[0]
	}
	if got := one("SELECT group_concat(name, ',') FROM (SELECT name FROM teams ORDER BY id)")[0]; got != "Payments,Search,Identity,Platform,Mobile,Data,Growth,Storefront" {
		t.Errorf("teams = %v", got)
	}
	if got := one("SELECT count(DISTINCT quarter), min(quarter), max(quarter) FROM incidents"); got[0] != float64(7) || got[1] != "2025-Q1" || got[2] != "2026-Q3" {
		t.Errorf("quarters = %v", got)
	}
	var top queryOut
	structured(t, call(t, cs, "top", "run_query", map[string]any{"sql": `SELECT t.name, count(*) AS n FROM incidents i
		JOIN services s ON s.id = i.service_id JOIN teams t ON t.id = s.team_id
		WHERE i.quarter = '2026-Q3' GROUP BY t.name ORDER BY n DESC LIMIT 2`}), &top)
	if len(top.Rows) != 2 || top.Rows[0][1].(float64) <= top.Rows[1][1].(float64) {
		t.Errorf("2026-Q3 incidents by team: %v, want a single leader", top.Rows)
	}
	if got := one("SELECT count(*) FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'")[0].(float64); got < 3 {
		t.Errorf("sev1 in 2026-Q2 = %v, want a few", got)
	}
	if got := one("SELECT sum(status = 'failed'), sum(status = 'rolled_back'), count(*) FROM deployments"); got[0].(float64) == 0 || got[1].(float64) == 0 {
		t.Errorf("deployments by status = %v", got)
	}
	if got := one("SELECT count(*) FROM incidents WHERE resolved_at IS NULL")[0].(float64); got == 0 {
		t.Errorf("no open incidents")
	}
	if got := one(`SELECT (SELECT count(*) FROM teams) + (SELECT count(*) FROM services) + (SELECT count(*) FROM incidents)
		+ (SELECT count(*) FROM deployments) + (SELECT count(*) FROM oncall_pay)`)[0].(float64); got < 2000 || got > 6000 {
		t.Errorf("%v rows in all, want a few thousand", got)
	}
	if got := one("SELECT round(avg((julianday(resolved_at) - julianday(opened_at)) * 24), 1) FROM incidents WHERE severity = 'sev1'")[0].(float64); got < 1 || got > 12 {
		t.Errorf("sev1 MTTR = %vh, want a plausible few hours", got)
	}
}
