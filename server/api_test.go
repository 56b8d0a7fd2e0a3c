package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/openapi"
	"github.com/das-ask/ask/server"
)

// TestNotYours: for another identity every call on a ticket or conversation is the same 404
// as for one that does not exist.
func TestNotYours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		defer close(gate)
		h := newHarness(t, server.Options{Runner: gatedRunner(1, 0, gate)})
		cid := h.conv(alice)
		ticket := h.ask(alice, cid, "alice's question")
		const ghostTicket, ghostConv = "t_DOESNOTEXIST", "c_DOESNOTEXIST"

		type call func(tok, ticket, cid string) (int, string, []byte)
		calls := map[string]call{
			"status": func(tok, tk, _ string) (int, string, []byte) {
				r := h.status(tok, tk)
				return r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body
			},
			"cancel": func(tok, tk, _ string) (int, string, []byte) {
				r := h.cancel(tok, tk)
				return r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body
			},
			"events": func(tok, tk, _ string) (int, string, []byte) {
				resp := h.stream(context.Background(), tok, tk, nil)
				return resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp)
			},
			"ask": func(tok, _, c string) (int, string, []byte) {
				r := h.askRaw(tok, c, "bob's question")
				return r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body
			},
		}
		for name, do := range calls {
			code, ct, notYours := do(bob, ticket, cid)
			problemOf(t, code, ct, notYours, http.StatusNotFound)
			code, ct, missing := do(alice, ghostTicket, ghostConv)
			problemOf(t, code, ct, missing, http.StatusNotFound)
			if !bytes.Equal(notYours, missing) {
				t.Errorf("%s: not-yours body %s differs from not-found body %s", name, notYours, missing)
			}
			if bytes.Contains(notYours, []byte(ticket)) || bytes.Contains(notYours, []byte(cid)) {
				t.Errorf("%s: 404 body names the resource: %s", name, notYours)
			}
		}
		// bob's attempts changed nothing: alice's run is still running, uncancelled.
		if st := h.status(alice, ticket).JSON200; st.State != gen.AskStateRunning {
			t.Errorf("alice's ticket after bob's calls: %s", st.State)
		}
	})
}

// TestUnauthorized: without a valid bearer every secured call is 401 problem+json with a
// challenge, before validation; the schema is public.
func TestUnauthorized(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{})
		cid := h.conv(alice)
		for _, tok := range []string{"", "forged-token", "Basic x"} {
			for _, req := range []*http.Request{
				newReq(t, http.MethodPost, "/ask/v1/conversations", tok, `{}`),
				newReq(t, http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", tok, `{"question":"x"}`),
				newReq(t, http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", tok, `not even json`),
				newReq(t, http.MethodGet, "/ask/v1/asks/t_X", tok, ""),
				newReq(t, http.MethodGet, "/ask/v1/asks/t_X/events", tok, ""),
				newReq(t, http.MethodPost, "/ask/v1/asks/t_X/cancel", tok, ""),
			} {
				resp := h.do(req)
				body := readBody(t, resp)
				problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusUnauthorized)
				if c := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer ") {
					t.Errorf("%s %s: WWW-Authenticate %q", req.Method, req.URL.Path, c)
				}
				if tok != "" && bytes.Contains(body, []byte(tok)) {
					t.Errorf("401 body echoes the token: %s", body)
				}
			}
		}
		h.secret("forged-token")
		for _, p := range []string{"/ask/v1/openapi.yaml", "/ask/v1/openapi.json"} {
			resp := h.do(newReq(t, http.MethodGet, p, "", ""))
			body := readBody(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d", p, resp.StatusCode)
			}
			if strings.HasSuffix(p, ".yaml") && !bytes.Equal(body, openapi.YAML) {
				t.Errorf("openapi.yaml is not the embedded document byte for byte")
			}
			if strings.HasSuffix(p, ".json") {
				var doc map[string]any
				if err := json.Unmarshal(body, &doc); err != nil || doc["openapi"] != "3.0.3" {
					t.Errorf("openapi.json: %v %v", err, doc["openapi"])
				}
			}
		}
	})
}

// TestValidation: requests that break the contract are refused before any handler runs.
func TestValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{MaxBodyBytes: 8192, Runner: ask.RunnerFunc(func(_ context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
			if req.Question != "after refusals" {
				t.Error("a refused request started a run")
			}
			return ask.Outcome{Answer: answer("ok")}
		})})
		cid := h.conv(alice)
		asks := "/ask/v1/conversations/" + cid + "/asks"
		long := strings.Repeat("q", 4001)
		h.secret(long)
		cases := []struct {
			name, body, ct string
			want           int
			violation      string
		}{
			{"empty question", `{"question":""}`, "application/json", 400, "body/question: minimum string length is 1"},
			{"blank question", `{"question":" \t\n "}`, "application/json", 400, ""},
			{"blank question, Unicode spaces", `{"question":"\u3000\u00a0\u2003"}`, "application/json", 400, ""},
			{"missing question", `{}`, "application/json", 400, "body/question: property \"question\" is missing"},
			{"unknown field", `{"question":"ok?","extra":1}`, "application/json", 400, "body: property \"extra\" is unsupported"},
			{"wrong type", `{"question":7}`, "application/json", 400, "body/question: value must be a string"},
			{"null question", `{"question":null}`, "application/json", 400, "body/question: value must be a string"},
			{"number beyond float64", `{"question":1e999}`, "application/json", 400, "body/question: value must be a string"},
			{"webhook url beyond float64", `{"question":"ok?","webhook":{"url":1e999}}`, "application/json", 400, "body/webhook/url: value must be a string"},
			{"null webhook", `{"question":"ok?","webhook":null}`, "application/json", 400, "body/webhook: value must be an object"},
			{"null body", `null`, "application/json", 400, "body: value must be an object"},
			{"too long question", `{"question":"` + long + `"}`, "application/json", 400, "body/question: maximum string length is 4000"},
			{"not json", `{"question":`, "application/json", 400, "body: not well-formed"},
			{"no body", ``, "application/json", 400, "body: required"},
			{"wrong content type", `question=hi`, "text/plain", 415, ""},
			{"too large", `{"question":"` + strings.Repeat("x", 9000) + `"}`, "application/json", 413, ""},
		}

		for _, tc := range cases {
			req := newReq(t, http.MethodPost, asks, alice, tc.body)
			req.Header.Set("Content-Type", tc.ct)
			resp := h.do(req)
			body := readBody(t, resp)
			p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.want)
			if tc.violation != "" && (p.Errors == nil || !slices.Contains(*p.Errors, tc.violation)) {
				t.Errorf("%s: violations %v, want %q among them", tc.name, p.Errors, tc.violation)
			}
			if bytes.Contains(body, []byte(long[:100])) {
				t.Errorf("%s: the problem echoes the question", tc.name)
			}
		}
		for _, path := range []string{"/ask/v1/asks/bad.ticket", "/ask/v1/asks/" + strings.Repeat("a", 65)} {
			resp := h.do(newReq(t, http.MethodGet, path, alice, ""))
			problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusBadRequest)
		}
		resp := h.do(newReq(t, http.MethodGet, "/ask/v1/nowhere", alice, ""))
		problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusNotFound)
		// The refused asks created nothing: the conversation takes an ask (no 409).
		if r := h.askRaw(alice, cid, "after refusals"); r.StatusCode() != http.StatusAccepted {
			t.Errorf("ask after refused asks: %d %s", r.StatusCode(), r.Body)
		}
	})
}

// TestAdmissionLimits: 409, 429 and 503 are problem+json, name what they must, and create
// nothing.
func TestAdmissionLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		h := newHarness(t, server.Options{MaxInFlight: 1, Runner: gatedRunner(0, 0, gate)})
		c1, c2 := h.conv(alice), h.conv(alice)
		running := h.ask(alice, c1, "first")

		r := h.askRaw(alice, c1, "second in the same conversation")
		p := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusConflict)
		if p.Ticket == nil || *p.Ticket != running {
			t.Errorf("409 names %v, want %s", p.Ticket, running)
		}
		// It says what to do next: not "start a new one" (the full conversation's 409), but
		// wait for the running ask (or cancel it) and ask again.
		if p.Detail == nil || !strings.Contains(*p.Detail, "cancel it") || !strings.Contains(*p.Detail, "ask again") {
			t.Errorf("409 detail %s: want it to say to wait for the running ask or cancel it, then ask again", r.Body)
		}
		r = h.askRaw(alice, c2, "second for the same identity")
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusTooManyRequests)
		if r.HTTPResponse.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		// bob is not limited by alice's in-flight ask.
		h.ask(bob, h.conv(bob), "bob's first")
		close(gate)
		synctest.Wait()
		// Nothing was half-created: both of alice's conversations take an ask now.
		h.ask(alice, c1, "after the first ended")
		synctest.Wait()
		h.ask(alice, c2, "the other conversation")
	})
}

// TestCapacity: the global caps on tickets and conversations answer 503 with Retry-After, and
// finished tickets count until they are evicted.
func TestCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{MaxTickets: 1, TTL: time.Minute})
		cid := h.conv(alice)
		req := newReq(t, http.MethodPost, "/ask/v1/conversations", bob, `{}`)
		resp := h.do(req)
		problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusServiceUnavailable)
		if resp.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		h.ask(alice, cid, "one")
		synctest.Wait()
		r := h.askRaw(alice, cid, "two")
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
		if r.HTTPResponse.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		time.Sleep(time.Minute + time.Second) // the finished ticket and the conversation are evicted
		h.ask(alice, h.conv(alice), "three")
	})
}

// TestRetention: finished tickets and idle conversations are gone TTL later, and a
// conversation's turns reach the runner in full until then.
func TestRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var histories [][]ask.Turn
		h := newHarness(t, server.Options{TTL: 60 * time.Second, Runner: ask.RunnerFunc(func(_ context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
			mu.Lock()
			histories = append(histories, req.History)
			mu.Unlock()
			if req.Identity.Token != alice {
				t.Errorf("the runner got token %q, want the caller's", req.Identity.Token)
			}
			switch req.Question {
			case "which team?":
				return ask.Outcome{Answer: answer("Payments")}
			case "churn?":
				return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"churn"}}}
			}
			time.Sleep(90 * time.Second) // longer than the TTL: the conversation must survive
			return ask.Outcome{Answer: answer("12")}
		})})
		cid := h.conv(alice)
		t1 := h.ask(alice, cid, "which team?")
		synctest.Wait()
		time.Sleep(59 * time.Second)
		h.ask(alice, cid, "churn?") // 59 s after the first: the conversation is still there
		synctest.Wait()
		t3 := h.ask(alice, cid, "how many deployments did that team ship?")
		time.Sleep(91 * time.Second)
		mu.Lock()
		if len(histories) != 3 || len(histories[2]) != 2 || histories[2][0].Question != "which team?" ||
			histories[2][0].Text != "Payments" || histories[2][1].Outcome != gen.EventTypeAbstention {
			t.Errorf("histories: %+v", histories)
		}
		mu.Unlock()
		// t1 ended ~150 s ago: evicted. t3 ended 1 s ago: kept.
		if r := h.status(alice, t1); r.StatusCode() != http.StatusNotFound {
			t.Errorf("t1 after its TTL: %d", r.StatusCode())
		}
		if r := h.status(alice, t3); r.StatusCode() != http.StatusOK {
			t.Errorf("t3 within its TTL: %d", r.StatusCode())
		}
		time.Sleep(60 * time.Second)
		if r := h.status(alice, t3); r.StatusCode() != http.StatusNotFound {
			t.Errorf("t3 after its TTL: %d", r.StatusCode())
		}
		if r := h.askRaw(alice, cid, "still there?"); r.StatusCode() != http.StatusNotFound {
			t.Errorf("conversation after its TTL: %d", r.StatusCode())
		}
		// A conversation never used expires TTL after creation.
		idle := h.conv(alice)
		time.Sleep(61 * time.Second)
		if r := h.askRaw(alice, idle, "late"); r.StatusCode() != http.StatusNotFound {
			t.Errorf("idle conversation after its TTL: %d", r.StatusCode())
		}
	})
}

// TestStatusLongPoll: Prefer: wait=N answers as soon as the run ends, or after N seconds.
func TestStatusLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
			emit.Step(step(0))
			time.Sleep(5 * time.Second)
			emit.Step(step(1))
			if req.Question == "long" {
				time.Sleep(100 * time.Second)
			}
			return ask.Outcome{Answer: answer("done")}
		})})
		cid := h.conv(alice)
		ticket := h.ask(alice, cid, "short")
		start := time.Now()
		r := h.status(alice, ticket, header("Prefer", "respond-async, wait=30"))
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("long poll took %v, want 5s (the end of the run)", took)
		}
		if r.HTTPResponse.Header.Get("Preference-Applied") != "wait=30" {
			t.Errorf("Preference-Applied %q", r.HTTPResponse.Header.Get("Preference-Applied"))
		}
		st := r.JSON200
		if st == nil || st.State != gen.AskStateAnswer || st.Done == nil || st.Terminal == nil || st.Done.Steps != 2 || st.LastSeq != 7 {
			t.Fatalf("status after the wait: %s", r.Body)
		}
		if v, err := st.Terminal.ValueByDiscriminator(); err != nil {
			t.Error(err)
		} else if a, ok := v.(gen.AnswerEvent); !ok || a.Text != "done" || a.Seq != 6 {
			t.Errorf("terminal %+v", v)
		}

		long := h.ask(alice, cid, "long")
		start = time.Now()
		r = h.status(alice, long, header("Prefer", "wait=600"))
		if took := time.Since(start); took != 60*time.Second {
			t.Errorf("capped long poll took %v, want 60s", took)
		}
		if r.HTTPResponse.Header.Get("Preference-Applied") != "wait=60" || r.JSON200.State != gen.AskStateRunning {
			t.Errorf("capped wait: %q %s", r.HTTPResponse.Header.Get("Preference-Applied"), r.Body)
		}
		start = time.Now()
		r = h.status(alice, long, header("Prefer", "wait=soon"))
		if time.Since(start) != 0 || r.HTTPResponse.Header.Get("Preference-Applied") != "" || r.StatusCode() != http.StatusOK {
			t.Errorf("malformed wait is not ignored: %d %q", r.StatusCode(), r.HTTPResponse.Header.Get("Preference-Applied"))
		}
	})
}

// TestShutdown: admission stops at once; a short run finishes within the grace, a long one is
// ended with error{shutdown}; streams close.
func TestShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{ShutdownGrace: 10 * time.Second, Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
			d := 3 * time.Second
			if req.Question == "long" {
				d = time.Hour
			}
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			return ask.Outcome{Answer: answer("ok")}
		})})
		short := h.ask(alice, h.conv(alice), "short")
		long := h.ask(alice, h.conv(alice), "long")
		longStream := h.stream(context.Background(), alice, long, nil)
		cidBob := h.conv(bob)
		shutdown := make(chan error)
		start := time.Now()
		go func() { shutdown <- h.srv.Shutdown(context.Background()) }()
		synctest.Wait()
		r := h.askRaw(bob, cidBob, "during shutdown")
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
		if r.HTTPResponse.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		frames := readAll(t, longStream.Body)
		if took := time.Since(start); took != 10*time.Second {
			t.Errorf("long ask ended %v after shutdown began, want the 10s grace", took)
		}
		term, _ := checkLifecycle(t, frames, gen.EventTypeError)
		if term.Kind != "shutdown" {
			t.Errorf("long ask ended with %q", term.Kind)
		}
		if err := <-shutdown; err != nil {
			t.Fatal(err)
		}
		checkLifecycle(t, h.events(alice, short), gen.EventTypeAnswer)
	})
}

// TestShutdownGraceEnded: EndGrace (an operator's second SIGTERM) cuts the grace short: the
// run still going ends at once with error{shutdown} and done, and Shutdown returns.
func TestShutdownGraceEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{ShutdownGrace: time.Hour, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
			<-ctx.Done()
			return ask.Outcome{Answer: answer("too late")}
		})})
		long := h.ask(alice, h.conv(alice), "long")
		stream := h.stream(context.Background(), alice, long, nil)
		shutdown := make(chan error)
		go func() { shutdown <- h.srv.Shutdown(context.Background()) }()
		synctest.Wait()
		time.Sleep(5 * time.Second) // the grace runs, the ask with it
		select {
		case err := <-shutdown:
			t.Fatalf("Shutdown returned within its grace: %v", err)
		default:
		}
		start := time.Now()
		h.srv.EndGrace()
		frames := readAll(t, stream.Body)
		if took := time.Since(start); took != 0 {
			t.Errorf("the ask ended %v after EndGrace, want at once", took)
		}
		if term, _ := checkLifecycle(t, frames, gen.EventTypeError); term.Kind != "shutdown" {
			t.Errorf("ended with %q, want shutdown", term.Kind)
		}
		if err := <-shutdown; err != nil {
			t.Fatal(err)
		}
		h.srv.EndGrace() // again: no panic
	})
}

func newReq(t testing.TB, method, path, tok, body string) *http.Request {
	t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, "http://ask.test"+path, rd)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, err = http.NewRequest(method, "http://ask.test"+path, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		if strings.HasPrefix(tok, "Basic ") {
			req.Header.Set("Authorization", tok)
		} else {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return req
}

// TestShutdownWithARunnerLeft: a run that does not return when its ask is ended (a tool call
// in flight, which the agent lets complete, bounded by the tool timeout) has its end stored all
// the same, and Shutdown's error says that only runners were left (ErrRunnersLeft), where it
// was its context's error alone, which askd reported as "the running asks' ends were not all
// stored".
func TestShutdownWithARunnerLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{ShutdownGrace: 10 * time.Second, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
			time.Sleep(time.Minute) // a tool call in flight, deaf to ctx
			return ask.Outcome{Answer: answer("too late")}
		})})
		long := h.ask(alice, h.conv(alice), "long")
		stream := h.stream(context.Background(), alice, long, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := h.srv.Shutdown(ctx)
		if term, _ := checkLifecycle(t, readAll(t, stream.Body), gen.EventTypeError); term.Kind != "shutdown" {
			t.Errorf("ended with %q, want shutdown", term.Kind)
		}
		if !errors.Is(err, server.ErrRunnersLeft) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want ErrRunnersLeft and the deadline", err)
		}
		time.Sleep(time.Minute) // the runner returns
	})
}
