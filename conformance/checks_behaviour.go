package conformance

import (
	"context"
	"fmt"
	"strings"
)

func (s *session) refusalRun(ctx context.Context) (*run, error) {
	return s.refusal.get(ctx, func(ctx context.Context) (*run, error) {
		return s.fullRun(ctx, "refusal", B, "", s.cfg.Questions.Refusal)
	})
}

func (s *session) abstentionRun(ctx context.Context) (*run, error) {
	return s.abstention.get(ctx, func(ctx context.Context) (*run, error) {
		return s.fullRun(ctx, "abstention", A, "", s.cfg.Questions.Abstention)
	})
}

func (s *session) catalogRun(ctx context.Context) (*run, error) {
	return s.catalog.get(ctx, func(ctx context.Context) (*run, error) {
		return s.fullRun(ctx, "catalog-only", A, "", s.cfg.Questions.CatalogOnly)
	})
}

func (s *session) followUpRuns(ctx context.Context) ([2]*run, error) {
	return s.followUp.get(ctx, func(ctx context.Context) ([2]*run, error) {
		first, err := s.fullRun(ctx, "follow-up 1", A, "", s.cfg.Questions.FollowUpFirst)
		if err != nil {
			return [2]*run{}, err
		}
		second, err := s.fullRun(ctx, "follow-up 2", A, first.conv, s.cfg.Questions.FollowUpSecond)
		return [2]*run{first, second}, err
	})
}

// outcome returns a run's terminal event from the stream after done, or a reason there is none.
func outcome(r *run) (event, string) {
	if why := streamOK(r.final); why != "" {
		return event{}, why
	}
	t, ok := r.final.terminal()
	if !ok {
		return event{}, "no terminal event: " + typesOf(r.final.Events)
	}
	return t, ""
}

// terminalOfType makes (or reuses) a run with get and returns it with its terminal event when
// that event is of type want. Otherwise ok is false and v is the verdict: broken without a run,
// expected expect without a terminal event, and expected expectTyped with one of another type.
func terminalOfType(ctx context.Context, get func(context.Context) (*run, error), want, expect, expectTyped string) (r *run, t event, v verdict, ok bool) {
	r, err := get(ctx)
	if err != nil {
		return nil, event{}, broken(err), false
	}
	t, why := outcome(r)
	switch {
	case why != "":
		return nil, event{}, fail(expect, why), false
	case t.Type != want:
		return nil, event{}, fail(expectTyped, t.Type), false
	}
	return r, t, verdict{}, true
}

func checkAnswerHeadline(ctx context.Context, s *session) verdict {
	_, t, v, ok := terminalOfType(ctx, s.normalRun, "answer", "an answer", "an answer")
	if !ok {
		return v
	}
	var found []string
	if _, ok := t.Obj["headline"].(map[string]any); !ok {
		found = append(found, "no headline")
	}
	if p, _ := t.Obj["path"].(map[string]any); p["speed"] != "full" {
		found = append(found, fmt.Sprintf("path.speed %v", p["speed"]))
	}
	if sql, _ := t.Obj["sql"].([]any); len(sql) == 0 {
		found = append(found, "sql empty")
	}
	if res, _ := t.Obj["result"].(map[string]any); res == nil {
		found = append(found, "no result")
	}
	return problems("a one-figure answer: headline, result, sql and path.speed full", found,
		"an answer with a headline, a result, sql and path.speed full")
}

func checkRefusal(ctx context.Context, s *session) verdict {
	r, t, v, ok := terminalOfType(ctx, s.refusalRun, "refusal", "a refusal", "a refusal as identity B")
	if !ok {
		return v
	}
	switch {
	case len(r.final.ofType("answer")) > 0:
		return fail("no answer event", "an answer as well")
	case t.str("tool") == "" || t.str("reason") == "":
		return fail("the refusal to name the tool and the reason", "an empty tool or reason")
	}
	return pass("refusal by %s, and no answer", t.str("tool"))
}

func checkAbstention(ctx context.Context, s *session) verdict {
	r, t, v, ok := terminalOfType(ctx, s.abstentionRun, "abstention", "an abstention", "an abstention")
	if !ok {
		return v
	}
	terms, _ := t.Obj["terms"].([]any)
	if len(terms) == 0 {
		return fail("the terms tried", "none")
	}
	if containsText(t.Obj, r.question) {
		return fail("no question text in the abstention", "the question")
	}
	return pass("abstention with %d terms tried and no question text", len(terms))
}

func checkCatalogFast(ctx context.Context, s *session) verdict {
	_, t, v, ok := terminalOfType(ctx, s.catalogRun, "answer", "an answer", "an answer from the catalog")
	if !ok {
		return v
	}
	p, _ := t.Obj["path"].(map[string]any)
	sql, isList := t.Obj["sql"].([]any)
	if p["speed"] != "fast" || !isList || len(sql) != 0 {
		return fail("path.speed fast and sql []", fmt.Sprintf("path.speed %v and %d statements", p["speed"], len(sql)))
	}
	return pass("path.speed fast (detail %v), sql []", p["detail"])
}

func checkFollowUp(ctx context.Context, s *session) verdict {
	runs, err := s.followUpRuns(ctx)
	if err != nil {
		return broken(err)
	}
	first, why := outcome(runs[0])
	if why != "" || first.Type != "answer" {
		return fail("an answer to the first question", first.Type+why)
	}
	res, _ := first.Obj["result"].(map[string]any)
	rows, _ := res["rows"].([]any)
	var entity string
	if len(rows) > 0 {
		if row, _ := rows[0].([]any); len(row) > 0 {
			entity, _ = row[0].(string)
		}
	}
	if entity == "" {
		return fail("the first answer's result to name an entity in its first cell", "none")
	}
	second, why := outcome(runs[1])
	if why != "" || second.Type != "answer" {
		return fail("an answer to the follow-up", second.Type+why)
	}
	sql, _ := second.Obj["sql"].([]any)
	var parts []string
	for _, q := range sql {
		if str, ok := q.(string); ok {
			parts = append(parts, str)
		}
	}
	hay := strings.ToLower(strings.Join(parts, "\n") + "\n" + second.str("text"))
	if !strings.Contains(hay, strings.ToLower(entity)) {
		return fail(fmt.Sprintf("the follow-up to resolve \"that team\" to %q", entity), "neither its sql nor its text names it")
	}
	return pass("the follow-up resolved \"that team\" to %q", entity)
}
