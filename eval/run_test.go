package eval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/eval"
)

// A service the harness cannot use — a base URL without the gateway prefix, a refused token —
// is a run that could not happen: Run says so before any question is asked, rather than
// returning every item as a harness error for a report of zeros.
func TestRunStopsWhenTheServiceDoesNotAnswer(t *testing.T) {
	set, err := eval.ParseSet([]byte(`
name: t
items:
  - id: a
    question: How many sev1 incidents did we have in 2026-Q2?
    expect: abstention
  - id: b
    question: What is our customer churn rate?
    expect: abstention
`), "inline")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		status int
		want   string
	}{
		{"wrong base URL", http.StatusNotFound, "404"},
		{"refused token", http.StatusUnauthorized, "401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asks atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/asks") {
					asks.Add(1)
				}
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"title":"no","status":` + strconv.Itoa(tc.status) + `}`))
			}))
			defer srv.Close()
			res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: srv.URL, Tokens: eval.FixedTokens{"alice": "t"}})
			if err == nil {
				t.Fatalf("Run returned %d results and no error; want an error saying the service did not answer", len(res))
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("error %q, want it to name the target and the status %s", err, tc.want)
			}
			if n := asks.Load(); n != 0 {
				t.Errorf("%d questions asked; want none", n)
			}
		})
	}
}

// fakeService answers the calls the harness makes: a conversation, a ticket, events (the
// stream it is given; a 404 for none) and cancel, which it counts.
func fakeService(t *testing.T, events string, cancels *atomic.Int32) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/conversations", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"c_1","asks_url":"/v1/conversations/c_1/asks","created_at":"2026-12-01T00:00:00Z"}`)
	})
	mux.HandleFunc("POST /v1/conversations/c_1/asks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"ticket":"t_1","conversation_id":"c_1","created_at":"2026-12-01T00:00:00Z",`+
			`"events_url":"/v1/asks/t_1/events","status_url":"/v1/asks/t_1","cancel_url":"/v1/asks/t_1/cancel"}`)
	})
	mux.HandleFunc("GET /v1/asks/t_1/events", func(w http.ResponseWriter, r *http.Request) {
		if events == "" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"title":"Not Found","status":404}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events)
	})
	mux.HandleFunc("POST /v1/asks/t_1/cancel", func(w http.ResponseWriter, r *http.Request) {
		cancels.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"ticket":"t_1","state":"running"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A harness that gives up on a run's stream cancels the run: it would go on spending the
// identity's quota, and hold the conversation so that the next item in it gets a 409.
func TestRunCancelsARunItGivesUpOn(t *testing.T) {
	set := oneItem(t, "")
	var cancels atomic.Int32
	res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: fakeService(t, "", &cancels), Tokens: eval.FixedTokens{"alice": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Unread() {
		t.Fatalf("got %s (%s), want a harness error: the stream was refused", res[0].Got, res[0].Detail)
	}
	if n := cancels.Load(); n != 1 {
		t.Errorf("%d cancels, want 1: the run the harness gave up on was left running", n)
	}
}

// oneItem is a set of one question that expects an answer, with extra lines for its item.
func oneItem(t *testing.T, extra string) *eval.Set {
	t.Helper()
	set, err := eval.ParseSet([]byte("name: t\nitems:\n  - id: a\n    question: How many sev1 incidents did we have in 2026-Q2?\n    expect: answer\n"+extra), "inline")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// sse renders events as the stream's frames, seq from 1.
func sse(events ...string) string {
	var b strings.Builder
	for i, e := range events {
		typ, body, _ := strings.Cut(e, " ")
		fmt.Fprintf(&b, "id: %d\nevent: %s\ndata: {\"seq\":%d,\"ticket\":\"t_1\",\"conversation_id\":\"c_1\",\"ts\":\"2026-12-01T00:00:00Z\",\"type\":%q%s}\n\n",
			i+1, typ, i+1, typ, body)
	}
	return b.String()
}

// A run ends in exactly one outcome. A stream that carries two has no outcome to score: the
// harness does not pick the last one (nor the first), it says what it saw.
func TestRunDoesNotScoreAStreamWithTwoOutcomes(t *testing.T) {
	set := oneItem(t, "")
	const (
		answer = `answer ,"text":"10","result":{"columns":["n"],"rows":[[10]],"truncated":false},"caveats":[],"provenance":[],"sql":[],"path":{"speed":"full","detail":"warehouse"},"divergence":null`
		failed = `error ,"kind":"internal","message":"failed"`
		done   = `done ,"outcome":"answer","steps":0,"model_calls":1,"input_tokens":1,"output_tokens":1,"elapsed_ms":1`
	)
	for name, stream := range map[string]string{
		"an error, then an answer": sse(`accepted ,"question":"q"`, failed, answer, done),
		"an answer, then an error": sse(`accepted ,"question":"q"`, answer, failed, done),
		"an answer twice":          sse(`accepted ,"question":"q"`, answer, answer, done),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: fakeService(t, stream, new(atomic.Int32)), Tokens: eval.FixedTokens{"alice": "t"}})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.AsExpected() || !r.Unread() {
				t.Errorf("got %s (kind %q), as expected %v: want no outcome scored (a harness error)", r.Got, r.ErrorKind, r.AsExpected())
			}
			if !strings.Contains(r.Detail, "more than one outcome") {
				t.Errorf("detail %q, want it to say the stream had more than one outcome", r.Detail)
			}
		})
	}
}

// An error's kind is the contract's: one the contract does not name is not written into the
// report as the service sent it, so a service cannot pass its own failure off as the harness's
// ("harness", the harness's own kind) nor write its own words into it. (A kind holding the
// question is a leak, and a harness error: TestReportHoldsNoQuestionTheServiceLeaked.)
func TestRunKeepsAnErrorKindTheContractDoesNotNameOutOfTheReport(t *testing.T) {
	set := oneItem(t, "")
	const done = `done ,"outcome":"error","steps":0,"model_calls":1,"input_tokens":1,"output_tokens":1,"elapsed_ms":1`
	for _, kind := range []string{"harness", "exploded"} {
		t.Run(kind, func(t *testing.T) {
			failed := `error ,"kind":"` + kind + `","message":"failed"`
			res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: fakeService(t, sse(`accepted ,"question":"q"`, failed, done), new(atomic.Int32)), Tokens: eval.FixedTokens{"alice": "t"}})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.Got != "error" || r.Unread() || r.ErrorKind == kind {
				t.Errorf("got %s, kind %q, unread %v: want the service's error, not a harness error, under a kind of the harness's words", r.Got, r.ErrorKind, r.Unread())
			}
			if s := eval.Score(res); s.HarnessErrors != 0 {
				t.Errorf("%d harness errors, want 0: the service ended the run", s.HarnessErrors)
			}
		})
	}
}

// oracle is a fixed expected result.
type oracle [][]any

func (o oracle) Query(context.Context, string) ([]string, [][]any, error) {
	return []string{"n"}, o, nil
}

// The judge reads the answer's fields, never its prose: an answer whose text says the expected
// figure but whose result does not hold it is not correct.
func TestJudgeIsNotFooledByProse(t *testing.T) {
	set := oneItem(t, "    sql: SELECT 10\n")
	const done = `done ,"outcome":"answer","steps":0,"model_calls":1,"input_tokens":1,"output_tokens":1,"elapsed_ms":1`
	for name, tc := range map[string]struct {
		result, headline string
		want             bool
	}{
		"the figure in the result":                {`{"columns":["n"],"rows":[[10]],"truncated":false}`, ``, true},
		"the figure in the result and headline":   {`{"columns":["n"],"rows":[[10]],"truncated":false}`, `,"headline":{"label":"n","value":10}`, true},
		"the figure only in prose":                {`{"columns":["n"],"rows":[[11]],"truncated":false}`, ``, false},
		"the right rows under a wrong headline":   {`{"columns":["n"],"rows":[[10]],"truncated":false}`, `,"headline":{"label":"n","value":11}`, false},
		"the right rows under a headline of text": {`{"columns":["n"],"rows":[[10]],"truncated":false}`, `,"headline":{"label":"n","value":"ten"}`, false},
		"no result at all":                        {`null`, ``, false},
		"the figure as text in the headline":      {`{"columns":["n"],"rows":[[10]],"truncated":false}`, `,"headline":{"label":"n","value":"10.0"}`, true},
		"a headline over no result":               {`null`, `,"headline":{"label":"n","value":10}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			answer := `answer ,"text":"We had 10 sev1 incidents in 2026-Q2: 10.","result":` + tc.result + tc.headline +
				`,"caveats":[],"provenance":[],"sql":[],"path":{"speed":"full","detail":"warehouse"},"divergence":null`
			res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: fakeService(t, sse(`accepted ,"question":"q"`, answer, done), new(atomic.Int32)),
				Tokens: eval.FixedTokens{"alice": "t"}, Oracle: oracle{{int64(10)}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := res[0]; r.Correct == nil || *r.Correct != tc.want {
				t.Errorf("correct %v (%s), want %v", r.Correct, r.Detail, tc.want)
			}
		})
	}
}

// A headline is for a result that is one figure (the contract's Headline): over a result of
// one row of several values, or of several rows, it names one figure of many as the answer,
// and the answer is not correct even when its rows are.
func TestJudgeRefusesAHeadlineOverMoreThanOneFigure(t *testing.T) {
	set := oneItem(t, "    sql: SELECT 'Payments', 50\n")
	const done = `done ,"outcome":"answer","steps":0,"model_calls":1,"input_tokens":1,"output_tokens":1,"elapsed_ms":1`
	for name, tc := range map[string]struct {
		result, headline string
		want             bool
	}{
		"the right row, no headline":      {`{"columns":["team","n"],"rows":[["Payments",50]],"truncated":false}`, ``, true},
		"the right row under a headline":  {`{"columns":["team","n"],"rows":[["Payments",50]],"truncated":false}`, `,"headline":{"label":"n","value":50}`, false},
		"the right row under a wrong one": {`{"columns":["team","n"],"rows":[["Payments",50]],"truncated":false}`, `,"headline":{"label":"n","value":999}`, false},
		"the wrong row, no headline":      {`{"columns":["team","n"],"rows":[["Payments",51]],"truncated":false}`, ``, false},
	} {
		t.Run(name, func(t *testing.T) {
			answer := `answer ,"text":"Payments, with 50.","result":` + tc.result + tc.headline +
				`,"caveats":[],"provenance":[],"sql":[],"path":{"speed":"full","detail":"warehouse"},"divergence":null`
			res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: fakeService(t, sse(`accepted ,"question":"q"`, answer, done), new(atomic.Int32)),
				Tokens: eval.FixedTokens{"alice": "t"}, Oracle: oracle{{"Payments", int64(50)}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := res[0]; r.Correct == nil || *r.Correct != tc.want {
				t.Errorf("correct %v (%s), want %v", r.Correct, r.Detail, tc.want)
			}
		})
	}
}

// A service that takes the request and never answers: the client retries it, each try bounded
// by its header timeout, and Run says after how long it gave up, not only the one try's bound.
func TestRunSaysHowLongASilentServiceWasTried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set, err := eval.ParseSet([]byte("name: t\nitems: [{id: a, question: q, expect: abstention}]\n"), "inline")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = eval.Run(t.Context(), set, eval.Config{BaseURL: "http://ask.test/ask", Tokens: eval.FixedTokens{"alice": "t"},
			HTTPClient: &http.Client{Transport: hangingTransport{}}})
		waited := time.Since(start).Round(time.Second)
		if err == nil || !strings.Contains(err.Error(), "failed after "+waited.String()+":") {
			t.Errorf("gave up after %v with %v; want the error to say how long", waited, err)
		}
		if waited <= 15*time.Second {
			t.Errorf("gave up after %v: the client's retries were not tried", waited)
		}
	})
}

// handlerTransport serves every request from h in memory, so that a test in a synctest bubble
// has no network and its clock (the client's reconnect backoff, the ask timeout) is the bubble's.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	res := rec.Result()
	res.Request = r
	return res, nil
}

// A stream cut after its outcome and before done (every time it is resumed) ended early: a
// harness error, whose reason says that the outcome came and done did not — not "no outcome",
// beside a terminal latency that shows one came.
func TestRunSaysDoneNeverCameAfterTheOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const answer = `answer ,"text":"10","result":{"columns":["n"],"rows":[[10]],"truncated":false},"caveats":[],"provenance":[],"sql":[],"path":{"speed":"full","detail":"warehouse"},"divergence":null`
		stream := sse(`accepted ,"question":"q"`, answer)
		mux := http.NewServeMux()
		mux.HandleFunc("POST /ask/v1/conversations", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"c_1","asks_url":"/v1/conversations/c_1/asks","created_at":"2026-12-01T00:00:00Z"}`)
		})
		mux.HandleFunc("POST /ask/v1/conversations/c_1/asks", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"ticket":"t_1","conversation_id":"c_1","created_at":"2026-12-01T00:00:00Z",`+
				`"events_url":"/v1/asks/t_1/events","status_url":"/v1/asks/t_1","cancel_url":"/v1/asks/t_1/cancel"}`)
		})
		mux.HandleFunc("GET /ask/v1/asks/t_1/events", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
		})
		mux.HandleFunc("POST /ask/v1/asks/t_1/cancel", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"ticket":"t_1","state":"finished"}`)
		})
		for _, timeout := range []time.Duration{time.Second, time.Hour} { // the ask's bound first, then the client's reconnects
			res, err := eval.Run(t.Context(), oneItem(t, ""), eval.Config{BaseURL: "http://ask.test/ask", Tokens: eval.FixedTokens{"alice": "t"},
				HTTPClient: &http.Client{Transport: handlerTransport{mux}}, AskTimeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if !r.Unread() || r.TerminalMS < 0 {
				t.Fatalf("timeout %v: got %s (kind %q), terminal %v ms: want a harness error after the outcome was read", timeout, r.Got, r.ErrorKind, r.TerminalMS)
			}
			if !strings.Contains(r.Detail, "the outcome (answer) came, but no done") {
				t.Errorf("timeout %v: detail %q, want it to say the outcome came and done did not", timeout, r.Detail)
			}
		}
	})
}

// A service that refuses the ask with a problem whose detail quotes the request (the question)
// has the client's error carry it: the harness error says why without it, as the detail goes
// into the report, which is written to be committed and names items by id only.
func TestHarnessErrorHoldsNoQuestionTheServiceQuoted(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/conversations", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"c_1","asks_url":"/v1/conversations/c_1/asks","created_at":"2026-12-01T00:00:00Z"}`)
	})
	mux.HandleFunc("POST /v1/conversations/c_1/asks", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Question string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"title": "Bad Request", "status": 400, "detail": "cannot ask " + strings.ToUpper(body.Question)})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	set := oneItem(t, "")
	res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: srv.URL, Tokens: eval.FixedTokens{"alice": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if !r.Unread() || !strings.Contains(r.Detail, "cannot ask (the question)") {
		t.Errorf("got %s (%s), want a harness error saying the ask was refused", r.Got, r.Detail)
	}
	if strings.Contains(strings.ToLower(r.Detail), strings.ToLower(set.Items[0].Question)) {
		t.Errorf("detail %q holds the question", r.Detail)
	}
}
