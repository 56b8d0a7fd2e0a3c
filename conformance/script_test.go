package conformance_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/gen"
)

// auditLog is the scripted source's audit log, served like the demo source's:
// GET /audit?call_id=... answers JSON lines.
type auditLog struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (a *auditLog) add(callID, oid, tool string, ms int64, refused bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines = append(a.lines, map[string]any{
		"ts": time.Now().UTC().Format(time.RFC3339Nano), "call_id": callID, "oid": oid,
		"tool": tool, "ms": ms, "refused": refused, "status": "ok",
	})
}

func (a *auditLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("call_id")
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, l := range a.lines {
		if id == "" || l["call_id"] == id {
			_ = enc.Encode(l)
		}
	}
}

// scriptedRunner answers the suite's default questions the way the demo stack's llm-stub
// script does, with tool calls recorded in an audit log, so the suite can be tested against
// the real service without a model or a source.
type scriptedRunner struct {
	audit    *auditLog
	slowWait time.Duration
}

type tool struct {
	name, phase, subject string
	args                 map[string]any
	refused              bool
}

func (s *scriptedRunner) Run(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
	q := conformance.DefaultQuestions()
	call := func(t tool) string {
		emit.ModelCall(ask.Usage{InputTokens: 100, OutputTokens: 20})
		id := "call_" + randHex()
		start := time.Now()
		ms := time.Since(start).Milliseconds()
		s.audit.add(id, req.Identity.OID, t.name, ms, t.refused)
		emit.Step(gen.StepBody{CallId: id, Tool: t.name, Source: "demo", Args: t.args, Ms: ms, Refused: t.refused})
		if !t.refused {
			emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhase(t.phase), Subject: t.subject, Source: "demo"})
		}
		return id
	}
	search := func(term string) {
		call(tool{"search_catalog", "grounding", term, map[string]any{"query": term}, false})
	}
	query := func(sql string) { call(tool{"run_query", "querying", "incidents", map[string]any{"sql": sql}, false}) }
	answer := func(text string, cols []string, rows [][]any, sql []string, speed gen.AnswerPathSpeed) ask.Outcome {
		a := &gen.AnswerBody{Text: text, Caveats: []gen.Caveat{}, Sql: sql,
			Path:       gen.AnswerPath{Speed: speed, Detail: map[gen.AnswerPathSpeed]string{"fast": "catalog", "full": "warehouse"}[speed]},
			Provenance: []gen.Provenance{{Term: "incident", Statement: "An unplanned interruption of a service.", Source: "demo", Kind: "glossary_term"}},
		}
		if rows != nil {
			a.Result = &gen.ResultSet{Columns: cols, Rows: rows}
			if len(rows) == 1 && len(rows[0]) == 1 {
				a.Headline = &gen.Headline{Label: cols[0], Value: rows[0][0]}
			}
		}
		return ask.Outcome{Answer: a}
	}
	switch req.Question {
	case q.Answer, q.Slow, q.Refusal:
		if req.Question == q.Slow {
			select {
			case <-ctx.Done():
				return ask.Outcome{}
			case <-time.After(s.slowWait):
			}
		}
		search("incident")
		call(tool{"describe_table", "discovering", "incidents", map[string]any{"table": "incidents"}, false})
		if req.Question == q.Refusal && req.Identity.OID == "bob" {
			id := call(tool{"run_query", "querying", "oncall_pay", map[string]any{"sql": "SELECT * FROM oncall_pay"}, true})
			return ask.Outcome{Refusal: &gen.RefusalBody{Tool: "run_query", Source: "demo", CallId: id, Reason: "forbidden: oncall_pay"}}
		}
		sql := "SELECT COUNT(*) AS sev1_incidents FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'"
		query(sql)
		return answer("There were 7 sev1 incidents in 2026-Q2.", []string{"sev1_incidents"}, [][]any{{7}}, []string{sql}, "full")
	case q.CatalogOnly:
		search("change failure rate")
		call(tool{"define_term", "grounding", "change failure rate", map[string]any{"term": "change failure rate"}, false})
		return answer("Change failure rate is the share of deployments that fail.", nil, nil, []string{}, "fast")
	case q.Abstention:
		search("churn")
		return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"churn"}}}
	case q.FollowUpFirst:
		search("incident")
		sql := "SELECT t.name, COUNT(*) AS incidents FROM incidents GROUP BY t.name ORDER BY 2 DESC LIMIT 1"
		query(sql)
		return answer("Payments had the most incidents in 2026-Q3 (57).", []string{"team", "incidents"}, [][]any{{"Payments", 57}}, []string{sql}, "full")
	case q.FollowUpSecond:
		for _, t := range req.History {
			if strings.Contains(t.Text, "Payments") {
				search("deployment")
				sql := "SELECT COUNT(*) AS deployments FROM deployments WHERE team = 'Payments' AND quarter = '2026-Q3'"
				query(sql)
				return answer("Payments shipped 31 deployments in 2026-Q3.", []string{"deployments"}, [][]any{{31}}, []string{sql}, "full")
			}
		}
		search("that team")
		return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"that team"}}}
	}
	return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindModel, Message: "the script has no such question"}}
}

func randHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
