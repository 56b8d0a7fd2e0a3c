package eval

import (
	"math"
	"slices"
	"sort"
)

// Ratio is N of Of. Value is nil when Of is 0: nothing to score is not a score.
type Ratio struct {
	N     int      `json:"n"`
	Of    int      `json:"of"`
	Value *float64 `json:"value"`
}

func ratio(n, of int) Ratio {
	r := Ratio{N: n, Of: of}
	if of > 0 {
		v := float64(n) / float64(of)
		r.Value = &v
	}
	return r
}

// PR is the precision and recall of one outcome kind: of the items that got it, how many
// expected it; of the items that expected it, how many got it.
type PR struct {
	Precision Ratio `json:"precision"`
	Recall    Ratio `json:"recall"`
}

// Quantiles of one latency, in milliseconds, over the items where the event came.
type Quantiles struct {
	N   int      `json:"n"`
	P50 *float64 `json:"p50_ms"`
	P95 *float64 `json:"p95_ms"`
	Max *float64 `json:"max_ms"`
}

// Latency is time to ticket, to the first milestone and to the terminal event, each from the
// start of the ask's POST.
type Latency struct {
	Ticket         Quantiles `json:"ticket"`
	FirstMilestone Quantiles `json:"first_milestone"`
	Terminal       Quantiles `json:"terminal"`
}

// PerAsk is the mean usage of one ask, from done, over the asks that reached done.
type PerAsk struct {
	Asks         int     `json:"asks"`
	ModelCalls   float64 `json:"model_calls"`
	InputTokens  float64 `json:"input_tokens"`
	OutputTokens float64 `json:"output_tokens"`
	Steps        float64 `json:"steps"`
}

// CategoryScore is the judgement scores of one category of items.
type CategoryScore struct {
	Name              string `json:"name"`
	Items             int    `json:"items"`
	OutcomeAccuracy   Ratio  `json:"outcome_accuracy"`
	AnswerCorrectness Ratio  `json:"answer_correctness"`
}

// Scores summarise a run.
type Scores struct {
	Items int `json:"items"`
	// OutcomeAccuracy: items whose terminal event is the kind they expect (an item whose
	// outcome the harness could not read never is, whatever it expects).
	OutcomeAccuracy Ratio `json:"outcome_accuracy"`
	// Confusion counts items by expected kind, then by the kind they got.
	Confusion map[string]map[string]int `json:"confusion"`
	// AnswerCorrectness: of the items that expect an answer with something to check, those
	// whose answer matched (an item that did not answer is not correct).
	AnswerCorrectness Ratio `json:"answer_correctness"`
	// CorrectWhenAnswered: the same, over the items that did answer.
	CorrectWhenAnswered Ratio `json:"correct_when_answered"`
	// Attribution: of the answers to items naming terms, those whose provenance covers them.
	Attribution Ratio `json:"attribution"`
	// CaveatsCarried: of the answers to items naming caveat terms, those carrying a caveat for each.
	CaveatsCarried Ratio `json:"caveats_carried"`
	Abstention     PR    `json:"abstention"`
	Refusal        PR    `json:"refusal"`
	// HarnessErrors: items for which no outcome could be read (counted as error above).
	HarnessErrors int `json:"harness_errors"`
	// Throttled: asks the service turned away with 429 before admitting them (waited out).
	Throttled  int             `json:"throttled"`
	Latency    Latency         `json:"latency"`
	PerAsk     PerAsk          `json:"per_ask"`
	Categories []CategoryScore `json:"categories"`
}

// Score computes the scores of a run's results.
func Score(results []ItemResult) Scores {
	s := Scores{Items: len(results), Confusion: map[string]map[string]int{}}
	for _, k := range Kinds {
		s.Confusion[k] = map[string]int{}
		for _, g := range Kinds {
			s.Confusion[k][g] = 0
		}
	}
	var (
		right, checked, correct, checkedAnswered, correctAnswered int
		attrN, attrOf, cavN, cavOf                                int
		ticket, milestone, terminal                               []float64
		cats                                                      = map[string]*CategoryScore{}
		catRight, catChecked, catCorrect                          = map[string]int{}, map[string]int{}, map[string]int{}
		catOrder                                                  []string
	)
	for _, r := range results {
		s.Confusion[r.Expect][r.Got]++
		if r.Unread() {
			s.HarnessErrors++
		}
		s.Throttled += r.Throttled
		c := cats[r.Category]
		if c == nil {
			c = &CategoryScore{Name: r.Category}
			cats[r.Category] = c
			catOrder = append(catOrder, r.Category)
		}
		c.Items++
		if r.AsExpected() {
			right++
			catRight[r.Category]++
		}
		if r.Correct != nil {
			checked++
			catChecked[r.Category]++
			if *r.Correct {
				correct++
				catCorrect[r.Category]++
			}
			if r.Got == KindAnswer {
				checkedAnswered++
				if *r.Correct {
					correctAnswered++
				}
			}
		}
		if r.Attributed != nil {
			attrOf++
			if *r.Attributed {
				attrN++
			}
		}
		if r.CaveatsCarried != nil {
			cavOf++
			if *r.CaveatsCarried {
				cavN++
			}
		}
		if r.TicketMS >= 0 {
			ticket = append(ticket, r.TicketMS)
		}
		if r.FirstMilestoneMS >= 0 {
			milestone = append(milestone, r.FirstMilestoneMS)
		}
		if r.TerminalMS >= 0 {
			terminal = append(terminal, r.TerminalMS)
		}
		if r.HasDone {
			s.PerAsk.Asks++
			s.PerAsk.ModelCalls += float64(r.ModelCalls)
			s.PerAsk.InputTokens += float64(r.InputTokens)
			s.PerAsk.OutputTokens += float64(r.OutputTokens)
			s.PerAsk.Steps += float64(r.Steps)
		}
	}
	if n := float64(s.PerAsk.Asks); n > 0 {
		s.PerAsk.ModelCalls /= n
		s.PerAsk.InputTokens /= n
		s.PerAsk.OutputTokens /= n
		s.PerAsk.Steps /= n
	}
	s.OutcomeAccuracy = ratio(right, len(results))
	s.AnswerCorrectness = ratio(correct, checked)
	s.CorrectWhenAnswered = ratio(correctAnswered, checkedAnswered)
	s.Attribution = ratio(attrN, attrOf)
	s.CaveatsCarried = ratio(cavN, cavOf)
	s.Abstention = s.pr(KindAbstention)
	s.Refusal = s.pr(KindRefusal)
	s.Latency = Latency{Ticket: quantiles(ticket), FirstMilestone: quantiles(milestone), Terminal: quantiles(terminal)}
	for _, name := range catOrder {
		c := cats[name]
		c.OutcomeAccuracy = ratio(catRight[name], c.Items)
		c.AnswerCorrectness = ratio(catCorrect[name], catChecked[name])
		s.Categories = append(s.Categories, *c)
	}
	return s
}

func (s Scores) pr(kind string) PR {
	got, want := 0, 0
	for _, e := range Kinds {
		got += s.Confusion[e][kind]
		want += s.Confusion[kind][e]
	}
	tp := s.Confusion[kind][kind]
	return PR{Precision: ratio(tp, got), Recall: ratio(tp, want)}
}

// quantiles by nearest rank.
func quantiles(v []float64) Quantiles {
	q := Quantiles{N: len(v)}
	if len(v) == 0 {
		return q
	}
	v = slices.Clone(v)
	sort.Float64s(v)
	at := func(p float64) *float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		x := v[max(0, min(i, len(v)-1))]
		return &x
	}
	q.P50, q.P95, q.Max = at(0.50), at(0.95), at(1)
	return q
}

// Metric is one named figure of a report, for the baseline difference and score expectations.
type Metric struct {
	Name  string
	Value *float64
	// HigherIsBetter says which way is an improvement.
	HigherIsBetter bool
	// Percent says the value is a share (shown as a percentage).
	Percent bool
}

// Metrics lists the scores as named figures, in a fixed order.
func (s Scores) Metrics() []Metric {
	f := func(v float64) *float64 { return &v }
	share := func(name string, r Ratio) Metric {
		return Metric{Name: name, Value: r.Value, HigherIsBetter: true, Percent: true}
	}
	ms := func(name string, v *float64) Metric { return Metric{Name: name, Value: v} }
	return []Metric{
		share("outcome_accuracy", s.OutcomeAccuracy),
		share("answer_correctness", s.AnswerCorrectness),
		share("correct_when_answered", s.CorrectWhenAnswered),
		share("attribution", s.Attribution),
		share("caveats_carried", s.CaveatsCarried),
		share("abstention_precision", s.Abstention.Precision),
		share("abstention_recall", s.Abstention.Recall),
		share("refusal_precision", s.Refusal.Precision),
		share("refusal_recall", s.Refusal.Recall),
		{Name: "harness_errors", Value: f(float64(s.HarnessErrors))},
		ms("ticket_p50_ms", s.Latency.Ticket.P50),
		ms("ticket_p95_ms", s.Latency.Ticket.P95),
		ms("first_milestone_p50_ms", s.Latency.FirstMilestone.P50),
		ms("first_milestone_p95_ms", s.Latency.FirstMilestone.P95),
		ms("terminal_p50_ms", s.Latency.Terminal.P50),
		ms("terminal_p95_ms", s.Latency.Terminal.P95),
		{Name: "model_calls_per_ask", Value: f(s.PerAsk.ModelCalls)},
		{Name: "input_tokens_per_ask", Value: f(s.PerAsk.InputTokens)},
		{Name: "output_tokens_per_ask", Value: f(s.PerAsk.OutputTokens)},
		{Name: "steps_per_ask", Value: f(s.PerAsk.Steps)},
	}
}
