package eval

import (
	"fmt"
	"strings"
)

// judge scores one result against its item. Correctness is judged for every item that expects
// an answer and names something to check (an item that did not answer is not correct);
// attribution and caveats only for items that expected and got an answer, since a refusal or
// an abstention carries no provenance to judge.
func judge(r *ItemResult, it Item, want expected) {
	answered := r.Got == KindAnswer && r.answer != nil
	if it.Checked() {
		ok := false
		if answered {
			var why string
			if ok, why = checkAnswer(r, it, want); !ok {
				r.Detail = why
			}
		}
		r.Correct = &ok
	}
	if !answered || it.Expect != KindAnswer {
		return
	}
	if len(it.Terms) > 0 {
		var have []string
		for _, p := range r.answer.Provenance {
			have = append(have, p.Term)
		}
		miss := missing(have, it.Terms)
		ok := len(miss) == 0
		r.Attributed, r.MissingTerms = &ok, miss
		if !ok {
			r.Detail = strings.TrimPrefix(r.Detail+"; provenance lacks "+strings.Join(miss, ", "), "; ")
		}
	}
	if ct := it.CaveatTerms(); len(ct) > 0 {
		var have []string
		for _, c := range r.answer.Caveats {
			have = append(have, c.Term)
		}
		miss := missing(have, ct)
		ok := len(miss) == 0
		r.CaveatsCarried = &ok
		if !ok {
			r.Detail = strings.TrimPrefix(r.Detail+"; no caveat for "+strings.Join(miss, ", "), "; ")
		}
	}
}

// checkAnswer compares an answer with what the item expects: the rows of its SQL, its path,
// whether it has a headline.
func checkAnswer(r *ItemResult, it Item, want expected) (bool, string) {
	a := r.answer
	var wrong []string
	if it.SQL != "" {
		if a.Result == nil {
			wrong = append(wrong, "no result rows")
		} else if ok, why := sameRows(a.Result.Rows, want.rows, it.Ordered, it.Tolerance); !ok {
			wrong = append(wrong, "result: "+why)
		}
	}
	if it.Path != "" && string(a.Path.Speed) != it.Path {
		wrong = append(wrong, fmt.Sprintf("path %s, expected %s", a.Path.Speed, it.Path))
	}
	// The contract gives a headline only to a result that is one figure: one over anything else
	// (or over no result) names one figure of many as the answer.
	if a.Headline != nil && (a.Result == nil || len(a.Result.Rows) != 1 || len(a.Result.Rows[0]) != 1) {
		shape := "no result"
		if a.Result != nil {
			shape = fmt.Sprintf("a result of %d rows", len(a.Result.Rows))
			if len(a.Result.Rows) == 1 {
				shape = fmt.Sprintf("a result of one row of %d values", len(a.Result.Rows[0]))
			}
		}
		wrong = append(wrong, "a headline over "+shape+", where only a one-figure result has one")
	}
	// The headline is the figure people read first: when the expected result is one figure, a
	// headline that is not it is a wrong answer, whatever the rows under it say.
	if it.SQL != "" && a.Headline != nil && len(want.rows) == 1 && len(want.rows[0]) == 1 &&
		!sameValue(a.Headline.Value, want.rows[0][0], it.Tolerance) {
		wrong = append(wrong, fmt.Sprintf("headline %s, expected %s", canon(a.Headline.Value), canon(want.rows[0][0])))
	}
	if it.Headline != nil && (a.Headline != nil) != *it.Headline {
		if *it.Headline {
			wrong = append(wrong, "no headline, expected one")
		} else {
			wrong = append(wrong, "a headline, expected none")
		}
	}
	return len(wrong) == 0, strings.Join(wrong, "; ")
}
