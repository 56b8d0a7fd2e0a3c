package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
	askconfig "github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// scripted is a Runner that acts out the question it is asked.
type scripted struct {
	waiting chan struct{} // closed when "slow" is waiting for its cancel
	once    sync.Once

	mu      sync.Mutex
	convs   []string
	history []int
}

func (s *scripted) Run(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
	s.mu.Lock()
	s.convs = append(s.convs, req.ConversationID)
	s.history = append(s.history, len(req.History))
	s.mu.Unlock()
	step := func(tool string, refused bool) {
		emit.Step(gen.StepBody{CallId: "c-" + tool, Tool: tool, Source: "demo", Args: map[string]any{"sql": "select 1"}, Ms: 4, Refused: refused})
	}
	emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
	step("search_catalog", false)
	answer := &gen.AnswerBody{
		Text:       "Payments had the most incidents.",
		Caveats:    []gen.Caveat{{Term: "incident", Text: "Counts only incidents opened by on-call.", Source: "demo"}},
		Provenance: []gen.Provenance{{Term: "incident", Statement: "An unplanned interruption of a service.", Source: "demo", Kind: "glossary_term"}},
		Sql:        []string{"SELECT team, n FROM x"},
		Path:       gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"},
		Result:     &gen.ResultSet{Columns: []string{"team", "incidents"}, Rows: [][]any{{"Payments", 12.0}, {"Search", 7.0}}},
	}
	switch req.Question {
	case "answer":
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseDiscovering, Subject: "incidents", Source: "demo"})
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"})
		step("run_query", false)
		return ask.Outcome{Answer: answer}
	case "no caveats":
		answer.Caveats = []gen.Caveat{}
		return ask.Outcome{Answer: answer}
	case "abstain":
		return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"churn", "customer churn"}, Sources: &[]string{"demo"}}}
	case "clarify":
		// No tool called: the model asked a question back.
		text := "I can't tell which team you mean. Could you name the team?"
		return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{}, Text: &text}}
	case "refuse":
		step("run_query", true)
		return ask.Outcome{Refusal: &gen.RefusalBody{Tool: "run_query", Source: "demo", CallId: "c-run_query", Reason: "bob may not read oncall_pay"}}
	case "fail":
		return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindModel, Message: "the model is unavailable"}}
	case "hostile":
		// What a source or a model could be steered to send: terminal instructions.
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "x\x1b]0;TITLE\x07\ny", Source: "demo"})
		answer.Text = "Fine.\x1b[2K\rForged: 0 incidents \x1b[8mhidden\x1b[0m \u202eevil"
		answer.Result = &gen.ResultSet{Columns: []string{"te\x1bam"}, Rows: [][]any{{"a\tb\u009bc"}}}
		return ask.Outcome{Answer: answer}
	case "hostile refusal":
		step("run_query", true)
		return ask.Outcome{Refusal: &gen.RefusalBody{Tool: "run_query", Source: "demo", CallId: "c-run_query", Reason: "no\x1b[2K\rAnswer: 42"}}
	case "slow":
		s.once.Do(func() { close(s.waiting) })
		<-ctx.Done()
		return ask.Outcome{}
	}
	return ask.Outcome{Answer: answer}
}

type fixture struct {
	url     string
	runner  *scripted
	cancels atomic.Int32
	idp     *idptest.Server
}

// start runs the real service in process, with real tokens from an in-process dev IdP.
func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, server.Options{})
}

// startWith is start with the service's options (Runner and Authenticator are the fixture's).
func startWith(t *testing.T, opts server.Options) *fixture {
	t.Helper()
	f := &fixture{runner: &scripted{waiting: make(chan struct{})}, idp: idptest.Start(t)}
	v, err := auth.New(t.Context(), f.idp.Config(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Runner, opts.Authenticator = f.runner, v
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel") {
			f.cancels.Add(1)
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	f.url = hs.URL + "/ask"
	return f
}

// env is a fake environment: the service URL, the dev IdP and a private state directory.
func (f *fixture) env(t *testing.T, extra ...string) func(string) (string, bool) {
	m := map[string]string{"ASK_URL": f.url, "ASK_IDP": f.idp.HTTP.URL, "XDG_STATE_HOME": t.TempDir()}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return askconfig.MapEnv(m)
}

// stateFileOf is the state file the command uses in env.
func stateFileOf(t *testing.T, env func(string) (string, bool)) stateFile {
	t.Helper()
	c, err := askconfig.ClientFromEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	st, err := newStateFile(c.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fixture) run(ctx context.Context, env func(string) (string, bool), args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &stdout, &stderr, env)
	return code, stdout.String(), stderr.String()
}

func TestRunOutcomes(t *testing.T) {
	f := start(t)
	tests := []struct {
		question  string
		args      []string
		code      int
		stdout    []string
		notStdout []string
		stderr    []string
		notStderr []string
	}{
		{
			question: "answer", code: exitAnswer,
			stdout:    []string{"Payments had the most incidents.", "team", "Payments  12", "Caveats:", "incident: Counts only incidents opened by on-call. (demo)", "Based on:", "An unplanned interruption"},
			notStdout: []string{"SQL:", "Refused", "No answer"},
			stderr:    []string{"Looking up 'incident' in the catalog…", "Reading the incidents table…", "Running a query on incidents…"},
			notStderr: []string{"search_catalog"},
		},
		{
			question: "answer", args: []string{"--steps"}, code: exitAnswer,
			stdout: []string{"SQL:", "SELECT team, n FROM x", "Path: full (warehouse)"},
			stderr: []string{"Asked; ticket ", `· search_catalog on demo (sql="select 1") — 4 ms`, "· run_query on demo", "Looking up 'incident'"},
		},
		{question: "no caveats", code: exitAnswer, stdout: []string{"Caveats: none raised by the catalog."}},
		{
			question: "abstain", code: exitAbstention,
			stdout:    []string{"No answer: the catalog has nothing for: churn, customer churn"},
			notStdout: []string{"Caveats", "Payments"},
		},
		{
			question: "refuse", code: exitRefusal,
			stdout:    []string{"Refused by demo (run_query): bob may not read oncall_pay", "not an empty result"},
			notStdout: []string{"Caveats", "Payments", "No answer"},
		},
		{
			question: "refuse", args: []string{"--steps"}, code: exitRefusal,
			stderr: []string{"· run_query on demo (sql=\"select 1\") — 4 ms, refused"},
		},
		{
			question: "clarify", code: exitAbstention,
			stdout: []string{"No answer: nothing was looked up (the agent called no tool).",
				"The agent said: I can't tell which team you mean. Could you name the team?", "--continue"},
			notStdout: []string{"catalog", "Looked in"},
		},
		// The outcome goes to stdout whatever it is, a failed run's included.
		{question: "fail", code: exitError, stdout: []string{"The run failed (model): the model is unavailable"}, notStdout: []string{"Caveats"}, notStderr: []string{"The run failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.question+strings.Join(tt.args, ""), func(t *testing.T) {
			code, stdout, stderr := f.run(t.Context(), f.env(t), append(tt.args, tt.question)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.notStdout {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout has %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			for _, s := range tt.notStderr {
				if strings.Contains(stderr, s) {
					t.Errorf("stderr has %q:\n%s", s, stderr)
				}
			}
		})
	}
}

func TestRunJSON(t *testing.T) {
	f := start(t)
	code, stdout, _ := f.run(t.Context(), f.env(t), "--json", "-q", "refuse")
	if code != exitRefusal {
		t.Fatalf("exit %d, want %d", code, exitRefusal)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var types []string
	for i, line := range lines {
		var ev struct {
			Seq  int64  `json:"seq"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %q", i+1, line)
		}
		if ev.Seq != int64(i+1) {
			t.Errorf("line %d has seq %d", i+1, ev.Seq)
		}
		types = append(types, ev.Type)
	}
	if types[0] != "accepted" || types[len(types)-1] != "done" || types[len(types)-2] != "refusal" {
		t.Errorf("types %v, want accepted … refusal, done", types)
	}
}

// Ctrl-C (ctx cancelled) sends exactly one cancel, waits for the run's done, exits 4.
func TestRunCtrlCCancelsOnce(t *testing.T) {
	f := start(t)
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	go func() {
		select {
		case <-f.runner.waiting:
			interrupt()
		case <-t.Context().Done():
		}
	}()
	code, stdout, stderr := f.run(ctx, f.env(t), "slow")
	if code != exitError {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitError, stderr)
	}
	if n := f.cancels.Load(); n != 1 {
		t.Errorf("sent %d cancels, want exactly 1", n)
	}
	// The ticket is named: a second Ctrl-C leaves at once, and the ticket can be followed.
	if !strings.Contains(stderr, "Cancelling ticket t_") || !strings.Contains(stderr, "ask --follow t_") {
		t.Errorf("stderr:\n%s\nwant Cancelling ticket t_… and how to follow it (progress)", stderr)
	}
	if stdout != "Cancelled.\n" {
		t.Errorf("stdout %q, want the outcome: Cancelled.", stdout)
	}
}

func TestRunContinue(t *testing.T) {
	f := start(t)
	env := f.env(t)
	if code, _, stderr := f.run(t.Context(), env, "first"); code != exitAnswer {
		t.Fatalf("first ask: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := f.run(t.Context(), env, "--continue", "follow-up"); code != exitAnswer {
		t.Fatalf("follow-up: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := f.run(t.Context(), env, "unrelated"); code != exitAnswer {
		t.Fatalf("third ask: exit %d\n%s", code, stderr)
	}
	r := f.runner
	r.mu.Lock()
	convs, history := append([]string(nil), r.convs...), append([]int(nil), r.history...)
	r.mu.Unlock()
	if len(convs) != 3 || convs[0] != convs[1] || convs[2] == convs[0] {
		t.Errorf("conversations %v: want the follow-up in the first's, the third in a new one", convs)
	}
	if history[1] != 1 || history[2] != 0 {
		t.Errorf("history lengths %v, want the follow-up to carry the first turn", history)
	}
	// Another identity does not continue alice's conversation.
	if code, _, stderr := f.run(t.Context(), env, "--as", "bob", "--continue", "bob's"); code != exitAnswer || !strings.Contains(stderr, "No earlier conversation") {
		t.Fatalf("bob --continue: exit %d\n%s", code, stderr)
	}
}

// A run that outlives its deadline is an outcome like any other: on stdout, exit 4.
func TestRunTimeoutOnStdout(t *testing.T) {
	f := startWith(t, server.Options{Deadline: 300 * time.Millisecond})
	code, stdout, stderr := f.run(t.Context(), f.env(t), "slow")
	if code != exitError || !strings.HasPrefix(stdout, "The run took too long and was stopped") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 4 and the timeout on stdout", code, stdout, stderr)
	}
}

func TestRunTokenFromFlagAndFailures(t *testing.T) {
	f := start(t)
	tok := f.idp.Token(t, "alice")
	if code, _, stderr := f.run(t.Context(), f.env(t, "ASK_IDP", "http://127.0.0.1:1"), "--token", tok, "answer"); code != exitAnswer {
		t.Fatalf("--token: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := f.run(t.Context(), f.env(t, "ASK_IDP", "http://127.0.0.1:1", "ASK_TOKEN", tok), "answer"); code != exitAnswer {
		t.Fatalf("ASK_TOKEN: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := f.run(t.Context(), f.env(t), "--token", "forged.token.value", "answer")
	if code != exitFailure || !strings.Contains(stderr, "401") || strings.Contains(stderr+stdout, "forged.token.value") {
		t.Fatalf("forged token: exit %d, stderr %q; want 1, a 401, and the token never echoed", code, stderr)
	}
	if strings.Contains(stderr, "ask: ask") {
		t.Errorf("forged token: stderr %q says ask twice", stderr)
	}
	if !strings.Contains(stderr, "--token or $ASK_TOKEN was refused") {
		t.Errorf("forged token: stderr %q does not say which setting to change", stderr)
	}
	code, _, stderr = f.run(t.Context(), f.env(t, "ASK_IDP", "http://127.0.0.1:1"), "answer")
	if code != exitFailure || !strings.Contains(stderr, "no token") {
		t.Fatalf("no IdP: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = f.run(t.Context(), f.env(t, "ASK_URL", "http://127.0.0.1:1/ask"), "--token", tok, "answer")
	if code != exitFailure || !strings.HasPrefix(stderr, "ask: cannot reach the ask service at http://127.0.0.1:1/ask: ") || strings.Contains(stderr, "ask: ask") {
		t.Fatalf("no service: exit %d, stderr %q; want one ask: prefix naming the URL", code, stderr)
	}
}

func TestRunUsage(t *testing.T) {
	f := start(t)
	if code, _, stderr := f.run(t.Context(), f.env(t)); code != exitFailure || !strings.Contains(stderr, "usage: ask") || !strings.HasPrefix(stderr, "ask: no question given\n") {
		t.Errorf("no question: exit %d, stderr %q", code, stderr)
	}
	for _, args := range [][]string{{""}, {"  "}, {"-q", ""}} {
		if code, _, stderr := f.run(t.Context(), f.env(t), args...); code != exitFailure || !strings.HasPrefix(stderr, "ask: the question is empty\n") {
			t.Errorf("ask %q: exit %d, stderr %q; want 1 and the question named as empty", args, code, stderr)
		}
	}
	if code, _, stderr := f.run(t.Context(), f.env(t), "-h"); code != exitAnswer || !strings.Contains(stderr, "Exit status") {
		t.Errorf("-h: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := f.run(t.Context(), f.env(t), "-q", "a", "b"); code != exitFailure {
		t.Errorf("-q and arguments: exit %d, want 1", code)
	}
	// A URL that cannot be the service's is said as such, before the IdP is asked for a token.
	for _, u := range []string{"", "127.0.0.1:8080/ask", "ftp://host/ask", "http://"} {
		want := fmt.Sprintf("ask: --url (or $ASK_URL) is %q: give the service's absolute http(s) URL with its base path and no query or fragment, such as http://127.0.0.1:8080/ask\n", u)
		if code, _, stderr := f.run(t.Context(), f.env(t, "ASK_IDP", "http://127.0.0.1:1"), "--url", u, "answer"); code != exitFailure || stderr != want {
			t.Errorf("--url %q: exit %d, stderr %q; want 1 and %q", u, code, stderr, want)
		}
	}
	// A query or fragment is refused, its values shown as xxxxx: the service's paths are joined
	// to the base path, and with a query there they went to the origin's root, bearer and all
	// (found by an audit: …/ask?k=1 asked /v1/conversations).
	for u, shown := range map[string]string{f.url + "?key=s3cret": f.url + "?key=xxxxx", f.url + "#top": f.url + "#top", f.url + "?": f.url + "?"} {
		want := fmt.Sprintf("ask: --url (or $ASK_URL) is %q: give the service's absolute http(s) URL with its base path and no query or fragment, such as http://127.0.0.1:8080/ask\n", shown)
		if code, _, stderr := f.run(t.Context(), f.env(t, "ASK_IDP", "http://127.0.0.1:1"), "--url", u, "answer"); code != exitFailure || stderr != want {
			t.Errorf("--url %q: exit %d, stderr %q; want 1 and %q", u, code, stderr, want)
		}
	}
}

// A remembered conversation that the service no longer holds is replaced, and the user told.
func TestRunContinueExpired(t *testing.T) {
	f := start(t)
	dir := t.TempDir()
	env := f.env(t, "XDG_STATE_HOME", dir)
	st := stateFileOf(t, env)
	if err := st.remember(stateKey(f.url, "alice"), "c_gone"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := f.run(t.Context(), env, "--continue", "answer")
	if code != exitAnswer || !strings.Contains(stderr, "has expired; starting a new one") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if last, _ := st.last(stateKey(f.url, "alice")); last == "c_gone" || last == "" {
		t.Errorf("state still names %q, want the new conversation", last)
	}
}

// The same oid in two tenants is two identities (SECURITY.md), and --continue remembers each
// one's conversation apart: keyed by the oid alone, the second asked in the first's
// conversation (404, "has expired"), and its new one then took the first's place.
func TestRunContinueKeepsTenantsApart(t *testing.T) {
	f := start(t)
	env := f.env(t)
	tok := func(tid string) string {
		s, err := f.idp.Mint(idp.Claims{OID: "alice", Extra: map[string]any{"tid": tid}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := tok("tenant-a"), tok("tenant-b")
	for i, step := range []struct{ tok, want string }{
		{a, "No earlier conversation to continue"},
		{b, "No earlier conversation to continue"},
		{a, ""},
		{b, ""},
	} {
		code, _, stderr := f.run(t.Context(), env, "--token", step.tok, "--continue", "answer")
		if code != exitAnswer || !strings.Contains(stderr, step.want) || strings.Contains(stderr, "has expired") ||
			step.want == "" && strings.Contains(stderr, "starting a new one") {
			t.Fatalf("ask %d: exit %d, stderr %q; want an answer, %q, and no conversation replaced", i+1, code, stderr, step.want)
		}
	}
}

// A remembered conversation that is full is replaced, and the user told.
func TestRunContinueFull(t *testing.T) {
	f := startWith(t, server.Options{MaxTurns: 1})
	env := f.env(t)
	if code, _, stderr := f.run(t.Context(), env, "--continue", "answer"); code != exitAnswer {
		t.Fatalf("first ask: exit %d, stderr %q", code, stderr)
	}
	st := stateFileOf(t, env)
	first, _ := st.last(stateKey(f.url, "alice"))
	code, _, stderr := f.run(t.Context(), env, "--continue", "answer")
	if code != exitAnswer || !strings.Contains(stderr, "is full; starting a new one") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if last, _ := st.last(stateKey(f.url, "alice")); last == first || last == "" {
		t.Errorf("state names %q, want a conversation other than the full %q", last, first)
	}
}

func TestWriteLineCompacts(t *testing.T) {
	var b bytes.Buffer
	writeLine(&b, []byte("{\n  \"seq\": 1,\n  \"type\": \"x\"\n}"))
	if got := b.String(); got != `{"seq":1,"type":"x"}`+"\n" {
		t.Errorf("got %q", got)
	}
}

// TestRunRetriesALostReply: the gateway in front of the service loses the reply to the first
// createAsk (the service took it) and answers 504, as nginx does when a replica is too slow;
// the CLI retries with the same Idempotency-Key, follows the one ticket to its answer and
// says it retried.
func TestRunRetriesALostReply(t *testing.T) {
	f := start(t)
	target, err := url.Parse(strings.TrimSuffix(f.url, "/ask"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var asks atomic.Int32
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/asks") && asks.Add(1) == 1 {
			proxy.ServeHTTP(httptest.NewRecorder(), r) // the service creates the ticket...
			w.WriteHeader(http.StatusGatewayTimeout)   // ...and the reply is lost
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(gw.Close)
	code, stdout, stderr := f.run(t.Context(), f.env(t, "ASK_URL", gw.URL+"/ask"), "answer")
	if code != exitAnswer || !strings.Contains(stdout, "Payments had the most incidents.") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "The ask did not go through (ask createAsk: 504 ") || !strings.Contains(stderr, "trying again in ") {
		t.Errorf("the retry is not on stderr:\n%s", stderr)
	}
	if n := asks.Load(); n != 2 {
		t.Errorf("%d createAsk attempts, want 2", n)
	}
	f.runner.mu.Lock()
	defer f.runner.mu.Unlock()
	if len(f.runner.convs) != 1 {
		t.Errorf("%d runs, want one: the retry made a second ask", len(f.runner.convs))
	}
}

// What the service sends is printed as text: a control character shows as its escape, never
// reaches the terminal as an instruction; the command's own line breaks and tabs stay.
func TestRunShowsControlsAsText(t *testing.T) {
	f := start(t)
	code, stdout, stderr := f.run(t.Context(), f.env(t), "hostile")
	if code != exitAnswer {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, out := range []string{stdout, stderr} {
		if strings.ContainsAny(out, "\x1b\x07\r\u009b\u202e") {
			t.Errorf("a control character reached the terminal: %q", out)
		}
	}
	for _, want := range []string{`Fine.\x1b[2K\x0dForged: 0 incidents \x1b[8mhidden\x1b[0m \u202eevil`, `te\x1bam`, `a\x09b\u009bc`, "Caveats:\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout %q, want %q", stdout, want)
		}
	}
	if !strings.Contains(stderr, `Running a query on x\x1b]0;TITLE\x07\x0ay…`) {
		t.Errorf("stderr %q, want the milestone's subject escaped on its one line", stderr)
	}
	code, stdout, _ = f.run(t.Context(), f.env(t), "hostile refusal")
	if code != exitRefusal || !strings.Contains(stdout, `no\x1b[2K\x0dAnswer: 42`) || strings.Contains(stdout, "\r") {
		t.Errorf("refusal: exit %d, stdout %q", code, stdout)
	}
}

// Flags may follow the question's words; after -- everything is the question.
func TestRunFlagsAfterQuestion(t *testing.T) {
	f := start(t)
	code, stdout, stderr := f.run(t.Context(), f.env(t), "answer", "--steps")
	if code != exitAnswer || !strings.Contains(stdout, "SQL:") {
		t.Errorf("answer --steps: exit %d, stdout %q, stderr %q; want --steps taken as the flag", code, stdout, stderr)
	}
	// "answer --steps" is not a question the runner knows: it answers without milestones, and
	// --steps is not set.
	code, stdout, stderr = f.run(t.Context(), f.env(t), "--", "answer", "--steps")
	if code != exitAnswer || strings.Contains(stdout, "SQL:") || strings.Contains(stderr, "Reading the incidents table") {
		t.Errorf("-- answer --steps: exit %d, stdout %q, stderr %q; want the words asked as the question", code, stdout, stderr)
	}
	if code, _, stderr := f.run(t.Context(), f.env(t), "what", "is", "-5"); code != exitFailure || !strings.Contains(stderr, "flag provided but not defined: -5") {
		t.Errorf("an unknown flag after the question: exit %d, stderr %q", code, stderr)
	}
}

// A refused request says why, with the violations the service listed.
func TestRunSaysWhyRefused(t *testing.T) {
	f := start(t)
	code, _, stderr := f.run(t.Context(), f.env(t), strings.Repeat("q", 4001))
	if code != exitFailure || !strings.Contains(stderr, "400 Bad Request") || !strings.Contains(stderr, "body/question: maximum string length is 4000") {
		t.Errorf("exit %d, stderr %q; want the 400 and its violation", code, stderr)
	}
}

// Ctrl-C before the ask was made asks nothing and exits 4, saying so (not blaming the token).
func TestRunInterruptedBeforeAsking(t *testing.T) {
	f := start(t)
	ctx, interrupt := context.WithCancel(t.Context())
	interrupt()
	for _, args := range [][]string{{"answer"}, {"--token", f.idp.Token(t, "alice"), "answer"}} {
		code, stdout, stderr := f.run(ctx, f.env(t), args...)
		if code != exitError || stderr != "ask: interrupted; nothing was asked\n" || stdout != "" {
			t.Errorf("%d args: exit %d, stdout %q, stderr %q", len(args), code, stdout, stderr)
		}
	}
	if n := f.cancels.Load(); n != 0 {
		t.Errorf("%d cancels sent, want none", n)
	}
}

// The newcomer's mistake: the host without the service's base path, or the path of the API
// itself. The 404 says what --url should be, not only that there is no such resource.
func TestRunWrongURLSaysWhatURLIsWanted(t *testing.T) {
	f := start(t)
	host := strings.TrimSuffix(f.url, "/ask")
	for _, u := range []string{host, host + "/", f.url + "/v1"} {
		code, _, stderr := f.run(t.Context(), f.env(t, "ASK_URL", u), "answer")
		if code != exitFailure || !strings.Contains(stderr, "404") || !strings.Contains(stderr, "--url") || !strings.Contains(stderr, "/ask") {
			t.Errorf("--url %s: exit %d, stderr %q; want 1, the 404, and what --url should be", u, code, stderr)
		}
	}
}

// -q - reads the question from stdin, to its end (kept off the command line, which ps shows).
func TestRunQuestionFromStdin(t *testing.T) {
	f := start(t)
	for _, tc := range []struct {
		name, stdin string
		code        int
		stdout      string
		stderr      string
	}{
		{"a question", "  refuse\n", exitRefusal, "Refused by demo (run_query)", ""},
		{"nothing", "", exitFailure, "", "ask: the question is empty (stdin held none)\n"},
		{"blank", " \n\t\n", exitFailure, "", "ask: the question is empty (stdin held none)\n"},
		{"too long", "secret " + strings.Repeat("q", maxStdinQuestion), exitFailure, "", "ask: the question on stdin is over 160 KiB; a question is at most 4000 characters\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"-q", "-"}, strings.NewReader(tc.stdin), &stdout, &stderr, f.env(t))
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || (tc.stderr != "" && stderr.String() != tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q and %q", code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	// The service's own limit is still said with its reason.
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"-q", "-"}, strings.NewReader(strings.Repeat("q", 4001)), &stdout, &stderr, f.env(t)); code != exitFailure || !strings.Contains(stderr.String(), "maximum string length is 4000") {
		t.Errorf("4001 characters: exit %d, stderr %q", code, stderr.String())
	}
	// -q - and words: which is the question?
	if code, _, stderr := f.run(t.Context(), f.env(t), "-q", "-", "answer"); code != exitFailure || !strings.Contains(stderr, "either with -q or as arguments") {
		t.Errorf("-q - answer: exit %d, stderr %q", code, stderr)
	}
}

// A 429 says when to try again (its Retry-After), since it is not retried for the caller.
func TestRunTooManySaysWhen(t *testing.T) {
	f := startWith(t, server.Options{MaxInFlight: 1})
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	slow := make(chan int)
	go func() {
		code, _, _ := f.run(ctx, f.env(t), "slow")
		slow <- code
	}()
	<-f.runner.waiting
	code, stdout, stderr := f.run(t.Context(), f.env(t), "answer")
	if code != exitFailure || stdout != "" || !strings.Contains(stderr, "429 Too Many Requests") || !regexp.MustCompile(`\(try again in [1-9][0-9]*s\)\n$`).MatchString(stderr) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the 429 with when to try again", code, stdout, stderr)
	}
	interrupt()
	if code := <-slow; code != exitError {
		t.Errorf("the slow ask: exit %d, want 4 (cancelled)", code)
	}
}
