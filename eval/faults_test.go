package eval_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/eval"
)

// fault is a way the service can be wrong, played by a relay in front of a real dev stack:
// rewrite changes events on their way to the client; the delays hold the ticket's response and
// the terminal event back.
type fault struct {
	rewrite                    func(typ string, ev map[string]any) string
	delayTicket, delayTerminal time.Duration
}

// relay serves target (a base URL with its path) through a reverse proxy that applies f, and
// returns the relay's base URL.
func relay(t *testing.T, target string, f fault) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.ModifyResponse = func(resp *http.Response) error {
		req := resp.Request
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/asks") && f.delayTicket > 0 {
			wait(req.Context(), f.delayTicket)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &rewriter{src: resp.Body, br: bufio.NewReader(resp.Body), f: f, ctx: req.Context()}
		}
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

// wait holds for d or until ctx ends: the injected slowness itself, not a synchronisation.
func wait(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// rewriter passes an SSE body through frame by frame, applying the fault to each event.
type rewriter struct {
	src   io.ReadCloser
	br    *bufio.Reader
	out   bytes.Buffer
	frame []string
	f     fault
	ctx   context.Context
}

func (r *rewriter) Read(p []byte) (int, error) {
	for r.out.Len() == 0 {
		line, err := r.br.ReadString('\n')
		if line != "" {
			r.line(strings.TrimRight(line, "\r\n"))
		}
		if err != nil {
			if r.out.Len() > 0 {
				break
			}
			return 0, err
		}
	}
	return r.out.Read(p)
}

func (r *rewriter) Close() error { return r.src.Close() }

func (r *rewriter) line(l string) {
	switch {
	case l == "":
		r.flush()
	case strings.HasPrefix(l, ":") && len(r.frame) == 0:
		r.out.WriteString(l + "\n")
	default:
		r.frame = append(r.frame, l)
	}
}

func (r *rewriter) flush() {
	var ev map[string]any
	data := -1
	for i, l := range r.frame {
		if rest, ok := strings.CutPrefix(l, "data: "); ok && json.Unmarshal([]byte(rest), &ev) == nil {
			data = i
		}
	}
	if data >= 0 {
		typ, _ := ev["type"].(string)
		switch typ {
		case "answer", "abstention", "refusal", "error":
			if r.f.delayTerminal > 0 {
				wait(r.ctx, r.f.delayTerminal)
			}
		}
		if r.f.rewrite != nil {
			if nt := r.f.rewrite(typ, ev); nt != typ {
				ev["type"] = nt
				for i, l := range r.frame {
					if strings.HasPrefix(l, "event:") {
						r.frame[i] = "event: " + nt
					}
				}
			}
			b, _ := json.Marshal(ev)
			r.frame[data] = "data: " + string(b)
		}
	}
	for _, l := range r.frame {
		r.out.WriteString(l + "\n")
	}
	r.out.WriteString("\n")
	r.frame = nil
}

// run evaluates the fixture set against base and returns the scores.
func run(t *testing.T, st *stack.Stack, base string) eval.Scores {
	t.Helper()
	set, err := eval.LoadSet("testdata/fixture.yaml")
	if err != nil {
		t.Fatal(err)
	}
	truth, err := source.OpenTruth(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer truth.Close()
	res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: base, Tokens: &eval.IdPTokens{URL: st.IdPURL}, Oracle: truth, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	return eval.Score(res)
}

func startStack(t *testing.T, script *llmstub.Script) *stack.Stack {
	t.Helper()
	st, err := stack.Start(t.Context(), stack.Options{StubScript: script})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close the stack: %v", err)
		}
	})
	return st
}

func metric(t *testing.T, s eval.Scores, name string) float64 {
	t.Helper()
	for _, m := range s.Metrics() {
		if m.Name == name {
			if m.Value == nil {
				t.Fatalf("%s: nothing scored", name)
			}
			return *m.Value
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The fixture's scores against the real stack are the ones worked out by hand, and each score
// moves when the service is wrong in the way that score measures.
func TestScoresMoveWhenTheServiceIsWrong(t *testing.T) {
	st := startStack(t, nil)
	exp, err := eval.LoadExpectation("testdata/fixture.expect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := run(t, st, st.AskURL)
	for _, d := range exp.Check(base) {
		t.Errorf("fixture against the stub: %s", d)
	}
	if t.Failed() {
		t.FailNow()
	}

	answers := func(edit func(ev map[string]any)) func(string, map[string]any) string {
		return func(typ string, ev map[string]any) string {
			if typ == "answer" {
				edit(ev)
			}
			return typ
		}
	}
	const slow = 300 * time.Millisecond
	type move struct {
		metric string
		// lower: the score must fall below the baseline; otherwise it must rise above it and
		// reach atLeast (a latency cannot be less than the delay injected into it).
		lower   bool
		atLeast float64
	}
	cases := []struct {
		name  string
		fault fault
		moves []move
		same  []string
	}{
		{
			name: "answers wrongly",
			fault: fault{rewrite: answers(func(ev map[string]any) {
				if res, ok := ev["result"].(map[string]any); ok {
					for _, row := range res["rows"].([]any) {
						for i, v := range row.([]any) {
							if f, ok := v.(float64); ok {
								row.([]any)[i] = f + 1
							}
						}
					}
				}
			})},
			moves: []move{{metric: "answer_correctness", lower: true}, {metric: "correct_when_answered", lower: true}},
			same:  []string{"outcome_accuracy", "attribution", "caveats_carried"},
		},
		{
			name: "refuses wrongly",
			fault: fault{rewrite: func(typ string, ev map[string]any) string {
				switch typ {
				case "answer":
					for k := range ev {
						switch k {
						case "seq", "ticket", "conversation_id", "ts":
						default:
							delete(ev, k)
						}
					}
					ev["tool"], ev["source"], ev["reason"], ev["call_id"] = "run_query", "demo", "refused by the relay", "relay"
					return "refusal"
				case "done":
					if ev["outcome"] == "answer" {
						ev["outcome"] = "refusal"
					}
				}
				return typ
			}},
			moves: []move{{metric: "outcome_accuracy", lower: true}, {metric: "refusal_precision", lower: true}, {metric: "answer_correctness", lower: true}},
		},
		{
			name:  "drops provenance",
			fault: fault{rewrite: answers(func(ev map[string]any) { ev["provenance"] = []any{} })},
			moves: []move{{metric: "attribution", lower: true}},
			same:  []string{"outcome_accuracy", "answer_correctness", "caveats_carried"},
		},
		{
			name:  "drops caveats",
			fault: fault{rewrite: answers(func(ev map[string]any) { ev["caveats"] = []any{} })},
			moves: []move{{metric: "caveats_carried", lower: true}},
			same:  []string{"outcome_accuracy", "answer_correctness", "attribution"},
		},
		{
			name: "fails instead of abstaining",
			fault: fault{rewrite: func(typ string, ev map[string]any) string {
				if typ != "abstention" {
					return typ
				}
				delete(ev, "terms")
				delete(ev, "sources")
				ev["kind"], ev["message"] = "internal", "failed in the relay"
				return "error"
			}},
			moves: []move{{metric: "abstention_recall", lower: true}, {metric: "outcome_accuracy", lower: true}},
		},
		{
			name: "costs more",
			fault: fault{rewrite: func(typ string, ev map[string]any) string {
				if typ == "done" {
					for _, k := range []string{"model_calls", "input_tokens", "output_tokens"} {
						ev[k] = ev[k].(float64)*2 + 1
					}
				}
				return typ
			}},
			moves: []move{{metric: "model_calls_per_ask"}, {metric: "input_tokens_per_ask"}, {metric: "output_tokens_per_ask"}},
			same:  []string{"outcome_accuracy", "answer_correctness", "attribution", "caveats_carried", "steps_per_ask"},
		},
		{
			// The question is the accepted event's alone: a service that echoes it in any other
			// event (here every branch event) broke the contract, and none of its outcomes counts.
			name: "leaks the question",
			fault: fault{rewrite: func() func(string, map[string]any) string {
				var mu sync.Mutex
				asked := map[any]any{}
				return func(typ string, ev map[string]any) string {
					mu.Lock()
					defer mu.Unlock()
					switch typ {
					case "accepted":
						asked[ev["ticket"]] = ev["question"]
					case "branch":
						ev["note"] = asked[ev["ticket"]]
					}
					return typ
				}
			}()},
			moves: []move{{metric: "outcome_accuracy", lower: true}, {metric: "harness_errors", atLeast: 11}},
		},
		{
			name:  "is slow",
			fault: fault{delayTicket: slow, delayTerminal: slow},
			moves: []move{
				// The run works while its ticket is held back, so the first milestone is already
				// there when the stream opens; the terminal event is held back once more.
				{metric: "ticket_p50_ms", atLeast: float64(slow.Milliseconds())},
				{metric: "first_milestone_p50_ms", atLeast: float64(slow.Milliseconds())},
				{metric: "terminal_p50_ms", atLeast: float64(2 * slow.Milliseconds())},
			},
			same: []string{"outcome_accuracy", "answer_correctness", "attribution", "caveats_carried"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, st, relay(t, st.AskURL, tc.fault))
			for _, m := range tc.moves {
				b, g := metric(t, base, m.metric), metric(t, got, m.metric)
				switch {
				case m.lower && g >= b:
					t.Errorf("%s: %.4g, expected below the baseline %.4g", m.metric, g, b)
				case !m.lower && (g <= b || g < m.atLeast):
					t.Errorf("%s: %.4g, expected above the baseline %.4g and at least %.4g", m.metric, g, b, m.atLeast)
				}
			}
			for _, name := range tc.same {
				if b, g := metric(t, base, name), metric(t, got, name); b != g {
					t.Errorf("%s: %.4g, expected the baseline's %.4g (this fault should not move it)", name, g, b)
				}
			}
		})
	}

	// A service at its in-flight limit turns asks away with 429: the harness waits and asks
	// again, so the scores are the baseline's and every turned-away ask is counted.
	t.Run("429 is waited out, not scored", func(t *testing.T) {
		u, _ := url.Parse(st.AskURL)
		rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
		var mu sync.Mutex
		turnAway := 3
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			refuse := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/asks") && turnAway > 0
			if refuse {
				turnAway--
			}
			mu.Unlock()
			if refuse {
				w.Header().Set("Content-Type", "application/problem+json")
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"title":"too many asks in flight","status":429}`))
				return
			}
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		set, err := eval.LoadSet("testdata/fixture.yaml")
		if err != nil {
			t.Fatal(err)
		}
		truth, err := source.OpenTruth(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer truth.Close()
		res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: srv.URL + u.Path, Tokens: &eval.IdPTokens{URL: st.IdPURL}, Oracle: truth, Concurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		throttled := 0
		for _, r := range res {
			throttled += r.Throttled
		}
		if throttled != 3 {
			t.Errorf("%d asks counted as turned away, want 3", throttled)
		}
		for _, d := range exp.Check(eval.Score(res)) {
			t.Errorf("with 429s: %s", d)
		}
	})

	// A model that writes the wrong SQL, played by the llm-stub with a changed script.
	t.Run("a model that writes wrong SQL", func(t *testing.T) {
		yaml := bytes.ReplaceAll(llmstub.DefaultScriptYAML(), []byte("WHERE severity = 'sev1'"), []byte("WHERE severity = 'sev3'"))
		if bytes.Equal(yaml, llmstub.DefaultScriptYAML()) {
			t.Fatal("the default script has no sev1 query to falsify")
		}
		script, err := llmstub.ParseScript(yaml)
		if err != nil {
			t.Fatal(err)
		}
		wrong := startStack(t, script)
		got := run(t, wrong, wrong.AskURL)
		if b, g := metric(t, base, "answer_correctness"), metric(t, got, "answer_correctness"); g >= b {
			t.Errorf("answer_correctness: %.4g, expected below the baseline %.4g", g, b)
		}
		if b, g := metric(t, base, "outcome_accuracy"), metric(t, got, "outcome_accuracy"); g != b {
			t.Errorf("outcome_accuracy: %.4g, expected the baseline's %.4g", g, b)
		}
	})
}

// A service that puts the question where the eval keeps what it said for people (an error's
// message, a refusal's reason, the terms an abstention tried, an event's type) does not get it into the report,
// which is written to be committed and names items by id only.
func TestReportHoldsNoQuestionTheServiceLeaked(t *testing.T) {
	st := startStack(t, nil)
	var mu sync.Mutex
	asked := map[any]string{}
	base := relay(t, st.AskURL, fault{rewrite: func(typ string, ev map[string]any) string {
		mu.Lock()
		defer mu.Unlock()
		q := asked[ev["ticket"]]
		switch typ {
		case "accepted":
			asked[ev["ticket"]], _ = ev["question"].(string)
		case "refusal":
			ev["reason"] = "refused: " + q
		case "abstention":
			ev["terms"] = []any{q}
		case "step":
			return q // an event whose type is the question: the harness names the event it leaked in
		case "answer":
			for k := range ev {
				switch k {
				case "seq", "ticket", "conversation_id", "ts":
				default:
					delete(ev, k)
				}
			}
			ev["kind"], ev["message"] = "internal", "failed on "+q
			return "error"
		}
		return typ
	}})
	set, err := eval.LoadSet("testdata/fixture.yaml")
	if err != nil {
		t.Fatal(err)
	}
	truth, err := source.OpenTruth(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer truth.Close()
	res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: base, Tokens: &eval.IdPTokens{URL: st.IdPURL}, Oracle: truth, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	rep := &eval.Report{Set: *set, Scores: eval.Score(res), Items: res}
	var js, md, sum bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md, "report.png"); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	for _, it := range set.Items {
		for name, b := range map[string]string{"report.json": js.String(), "REPORT.md": md.String(), "the summary": sum.String()} {
			if strings.Contains(strings.ToLower(b), strings.ToLower(it.Question)) {
				t.Errorf("%s holds the question of %s", name, it.ID)
			}
		}
	}
}
