package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/eval"
	"github.com/das-ask/ask/internal/leaktest"
	"github.com/das-ask/ask/internal/loopback"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.IgnoreTestServers()...) }

func noenv(string) (string, bool) { return "", false }

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give --url"},
		{[]string{"--url", "http://x/ask"}, "give --idp"},
		{[]string{"--dev-stack", "--url", "http://x/ask"}, "drop --url"},
		{[]string{"--dev-stack", "--concurrency", "0"}, "at least 1"},
		{[]string{"--dev-stack", "--progress", "fancy"}, "--progress"},
		// A bound that is not one: -1s was taken as the default, 3 minutes, unsaid.
		{[]string{"--url", "http://127.0.0.1:1/ask", "--idp", "http://127.0.0.1:1", "--ask-timeout", "-1s"}, "--ask-timeout -1s: want a positive duration"},
		{[]string{"--url", "http://127.0.0.1:1/ask", "--idp", "http://127.0.0.1:1", "--ask-timeout", "0s"}, "--ask-timeout 0s: want a positive duration"},
		{[]string{"--dev-stack", "--token", "alice"}, "oid=TOKEN"},
		{[]string{"--dev-stack", "extra"}, "unexpected arguments"},
		{[]string{"--dev-stack", "--set", "does-not-exist.yaml"}, "does-not-exist.yaml"},
		// The fixture asks as alice and bob: bob's items could not be asked, so nothing is.
		{[]string{"--url", "http://127.0.0.1:1/ask", "--token", "alice=t", "--set", filepath.Join("..", "..", "eval", "testdata", "fixture.yaml")}, "no --token for bob (the set asks as alice, bob)"},
		{[]string{"diff", "one.json"}, "usage"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), tc.args, &out, &errb, noenv); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: stderr %q, want it to say %q", tc.args, errb.String(), tc.want)
		}
	}
}

// A --token without its oid= is a bare bearer: the refusal says what is wrong without repeating
// it (the flag package's own message quotes the value, and stderr ends up in CI logs).
func TestTokenFlagRefusalDoesNotEchoTheBearer(t *testing.T) {
	const bearer = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.c2ln"
	for _, v := range []string{bearer, "=" + bearer, "alice="} {
		var out, errb bytes.Buffer
		args := []string{"--url", "http://127.0.0.1:1/ask", "--token", "bob=" + bearer + "2", "--token", v}
		if code := run(t.Context(), args, &out, &errb, noenv); code != 2 {
			t.Errorf("--token %q: exit %d, want 2", v, code)
		}
		if all := out.String() + errb.String(); strings.Contains(all, bearer) {
			t.Errorf("--token %q: the output repeats the bearer: %q", v, all)
		}
		if !strings.Contains(errb.String(), "oid=TOKEN") {
			t.Errorf("--token %q: stderr %q, want it to say oid=TOKEN", v, errb.String())
		}
	}
	// The same from $ASK_EVAL_TOKENS, which is read: a set asking as bob needs bob's token there.
	set := filepath.Join("..", "..", "eval", "testdata", "fixture.yaml")
	for v, want := range map[string]string{bearer: "oid=TOKEN", "alice=" + bearer: "no --token for bob"} {
		var out, errb bytes.Buffer
		env := func(k string) (string, bool) { return v, k == "ASK_EVAL_TOKENS" }
		if code := run(t.Context(), []string{"--url", "http://127.0.0.1:1/ask", "--set", set}, &out, &errb, env); code != 2 {
			t.Errorf("ASK_EVAL_TOKENS=%q: exit %d, want 2", v, code)
		}
		if all := out.String() + errb.String(); strings.Contains(all, bearer) || !strings.Contains(errb.String(), want) {
			t.Errorf("ASK_EVAL_TOKENS=%q: stderr %q, want it to say %q and not the bearer", v, all, want)
		}
	}
}

// The whole command against the dev stack: the fixture's known scores, a report in three files
// (the chart a real PNG), no question text in any of them, and the baseline difference.
func TestFixtureAgainstTheDevStack(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join("..", "..", "eval", "testdata", "fixture.yaml")
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"--dev-stack", "--set", set, "--out", dir, "--progress", "lines",
		"--expect", filepath.Join("..", "..", "eval", "testdata", "fixture.expect.yaml")}, &out, &errb, noenv)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"outcome accuracy     82% (9/11)", "scores as expected by"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(errb.String(), "\n"); n != 11 {
		t.Errorf("want one progress line per item (11), got %d:\n%s", n, errb.String())
	}

	s, err := eval.LoadSet(set)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"REPORT.md", "report.json", "report.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range s.Items {
			if bytes.Contains(b, []byte(it.Question)) {
				t.Errorf("%s holds the question of %s", name, it.ID)
			}
		}
	}
	f, err := os.Open(filepath.Join(dir, "report.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("report.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 {
		t.Errorf("report.png is %v, too small to read", b)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	for _, want := range []string{"| model | llm-stub", "| commit |", "| set | fixture", "![latency distribution", "| f-off-script |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}

	// The same report against itself changes nothing; against a worse copy it says what moved.
	cur := filepath.Join(dir, "report.json")
	out.Reset()
	if code := run(t.Context(), []string{"diff", cur, cur}, &out, &errb, noenv); code != 0 || !strings.Contains(out.String(), "no item changed") {
		t.Fatalf("diff of a report with itself: exit %d\n%s", code, out.String())
	}
	rep, err := eval.ReadReport(cur)
	if err != nil {
		t.Fatal(err)
	}
	rep.Items[0].Got = eval.KindError
	rep.Scores = eval.Score(rep.Items)
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	worse := filepath.Join(dir, "worse.json")
	if err := os.WriteFile(worse, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"diff", cur, worse}, &out, &errb, noenv); code != 0 {
		t.Fatalf("diff: exit %d", code)
	}
	for _, want := range []string{"outcome_accuracy", "worse", rep.Items[0].ID + ": answer"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, out.String())
		}
	}
}

// A wrong expectation fails the run with exit 1 and says which score differs.
func TestExpectationMismatch(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(exp, []byte("scores: {outcome_accuracy: 1, no_such_score: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"--dev-stack", "--no-write", "--progress", "none", "--set", filepath.Join("..", "..", "eval", "testdata", "fixture.yaml"), "--expect", exp}, &out, &errb, noenv)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"outcome_accuracy: 0.8182, expected 1", "no_such_score: no such score"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
}

// A running service, a set the repository has never seen: identities minted by the IdP the
// service trusts, or tokens handed in.
func TestRunningServiceWithANewSet(t *testing.T) {
	st, err := stack.Start(t.Context(), stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	set := filepath.Join(dir, "my-set.yaml")
	if err := os.WriteFile(set, []byte(`name: mine
items:
  - id: q3-sev1
    question: How many sev1 incidents did we have in 2025-Q3?
    expect: answer
    sql: SELECT COUNT(*) FROM incidents WHERE quarter = '2025-Q3' AND severity = 'sev1'
    terms: [incident]
  - id: dave-pay
    as: dave
    question: What was the on-call pay per team in 2025-Q3?
    expect: refusal
`), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(exp, []byte("scores: {outcome_accuracy: 1, answer_correctness: 1, attribution: 1, refusal_recall: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := eval.IdPTokens{URL: st.IdPURL}
	alice, err := tokens.Token(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	dave, err := tokens.Token(t.Context(), "dave")
	if err != nil {
		t.Fatal(err)
	}
	for name, auth := range map[string][]string{
		"idp":    {"--idp", st.IdPURL},
		"tokens": {"--token", "alice=" + alice, "--token", "dave=" + dave},
		// The expected results read through the running source as alice, not the embedded data.
		"truth through the source": {"--idp", st.IdPURL, "--truth-source", st.SourceURL + "/mcp"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--url", st.AskURL, "--set", set, "--out", t.TempDir(), "--progress", "none", "--model", "stub-under-test", "--expect", exp}, auth...)
			if code := run(t.Context(), args, &out, &errb, noenv); code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), "against "+st.AskURL+", model stub-under-test") {
				t.Errorf("the summary does not name the target and model:\n%s", out.String())
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var out, errb bytes.Buffer
		args := []string{"--url", st.AskURL, "--set", set, "--no-write", "--progress", "none", "--idp", st.IdPURL, "--json"}
		if code := run(t.Context(), args, &out, &errb, noenv); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		var rep eval.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("stdout is not one JSON report: %v\n%s", err, out.String())
		}
		if len(rep.Items) != 2 || rep.Scores.Items != 2 || rep.Set.Name != "mine" {
			t.Errorf("report: %d items, scores of %d, set %q", len(rep.Items), rep.Scores.Items, rep.Set.Name)
		}
	})
	// The newcomer's mistake: the host without the service's base path. Nothing can be asked,
	// so nothing is scored and no report replaces the last one.
	t.Run("a URL without the base path", func(t *testing.T) {
		var out, errb bytes.Buffer
		dir := t.TempDir()
		bare := strings.TrimSuffix(st.AskURL, "/ask")
		args := []string{"--url", bare, "--set", set, "--out", dir, "--progress", "none", "--idp", st.IdPURL}
		if code := run(t.Context(), args, &out, &errb, noenv); code != 2 {
			t.Fatalf("exit %d, want 2\n%s%s", code, out.String(), errb.String())
		}
		if !strings.Contains(errb.String(), "nothing was asked") || !strings.Contains(errb.String(), "404") {
			t.Errorf("stderr should say nothing was asked, and why: %s", errb.String())
		}
		if !strings.Contains(errb.String(), "base URL with its path, such as http://127.0.0.1:8080/ask") {
			t.Errorf("stderr should say what --url wants: %s", errb.String())
		}
		if files, _ := os.ReadDir(dir); len(files) != 0 {
			t.Errorf("a run that asked nothing wrote %d files to --out", len(files))
		}
	})
	// A gateway's basic auth in --url is the operator's secret: the report, which is written to
	// be committed, names the target without it.
	t.Run("a URL with credentials", func(t *testing.T) {
		var out, errb bytes.Buffer
		dir := t.TempDir()
		withAuth := strings.Replace(st.AskURL, "http://", "http://op:S3CRET-PASS@", 1)
		args := []string{"--url", withAuth, "--set", set, "--out", dir, "--progress", "none", "--idp", st.IdPURL}
		if code := run(t.Context(), args, &out, &errb, noenv); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "against "+st.AskURL+",") || strings.Contains(out.String()+errb.String(), "S3CRET") {
			t.Errorf("the summary does not name the target without its password:\n%s%s", out.String(), errb.String())
		}
		for _, name := range []string{"REPORT.md", "report.json"} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || bytes.Contains(b, []byte("S3CRET")) {
				t.Errorf("%s holds the password in --url (%v)", name, err)
			}
		}
	})
	t.Run("a truth identity the source refuses", func(t *testing.T) {
		var out, errb bytes.Buffer
		args := []string{"--url", st.AskURL, "--set", filepath.Join("..", "..", "eval", "testdata", "fixture.yaml"), "--no-write", "--progress", "none",
			"--idp", st.IdPURL, "--truth-source", st.SourceURL + "/mcp", "--truth-as", "bob"}
		if code := run(t.Context(), args, &out, &errb, noenv); code != 2 {
			t.Fatalf("exit %d, want 2\n%s%s", code, out.String(), errb.String())
		}
		if !strings.Contains(errb.String(), "f-alice-oncall") || !strings.Contains(errb.String(), "refused") {
			t.Errorf("stderr should name the item whose truth was refused: %s", errb.String())
		}
	})
	// Known before anything is asked: dave's items could only be harness errors, in a run that
	// would exit 0 and replace the report.
	t.Run("a token missing for an identity", func(t *testing.T) {
		var out, errb bytes.Buffer
		dir := t.TempDir()
		args := []string{"--url", st.AskURL, "--set", set, "--out", dir, "--progress", "none", "--token", "alice=" + alice}
		if code := run(t.Context(), args, &out, &errb, noenv); code != 2 {
			t.Fatalf("exit %d, want 2\n%s%s", code, out.String(), errb.String())
		}
		if !strings.Contains(errb.String(), "no --token for dave") {
			t.Errorf("stderr should name the identity without a token: %s", errb.String())
		}
		if files, _ := os.ReadDir(dir); len(files) != 0 {
			t.Errorf("a run that asked nothing wrote %d files to --out", len(files))
		}
	})
}

// TestHelpExits0: the usage asked for is printed and is not an error. It names the diff
// subcommand beside the flags (docs/eval.md's "ask-eval diff old.json new.json"), which -h
// left out.
func TestHelpExits0(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), []string{arg}, &out, &errb, noenv); code != 0 {
			t.Errorf("%s: exit %d, want 0", arg, code)
		}
		if !strings.Contains(errb.String(), "-dev-stack") || !strings.Contains(errb.String(), "ask-eval diff OLD.json NEW.json") {
			t.Errorf("%s: stderr %q, want the usage, the diff subcommand named", arg, errb.String())
		}
	}
}

// ASK_STUB_SCRIPT, which make ask-serve reads, is the stub the dev stack runs and the report
// names: a script that knows no question scores no answer, not the default script's.
func TestDevStackHonoursTheStubScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "knows-nothing.yaml")
	if err := os.WriteFile(script, []byte("fallback: I know nothing.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return script, k == "ASK_STUB_SCRIPT" }
	var out, errb bytes.Buffer
	set := filepath.Join("..", "..", "eval", "testdata", "fixture.yaml")
	if code := run(t.Context(), []string{"--dev-stack", "--set", set, "--no-write", "--progress", "none", "--json"}, &out, &errb, env); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	var rep eval.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if got := rep.Scores.Confusion["answer"]["answer"]; got != 0 {
		t.Errorf("%d items answered by a script that knows no question: the default script ran", got)
	}
	if !strings.Contains(rep.Model, "knows-nothing.yaml") {
		t.Errorf("model %q, want it to name the script", rep.Model)
	}

	missing := filepath.Join(t.TempDir(), "missing.yaml")
	bad := func(k string) (string, bool) { return missing, k == "ASK_STUB_SCRIPT" }
	errb.Reset()
	if code := run(t.Context(), []string{"--dev-stack", "--set", set, "--no-write", "--progress", "none"}, &out, &errb, bad); code != 2 || !strings.Contains(errb.String(), "ASK_STUB_SCRIPT") {
		t.Errorf("a missing script: exit %d, stderr %q; want 2 naming ASK_STUB_SCRIPT", code, errb.String())
	}
}

// ASK_PHASE=2 make eval scores phase 2, as ASK_PHASE=2 make ask-serve serves it: the split demo
// (a catalog and a warehouse), a branch per source and divergence, and the report says so.
func TestDevStackHonoursThePhase(t *testing.T) {
	set := filepath.Join("..", "..", "eval", "testdata", "fixture.yaml")
	report := func(env func(string) (string, bool)) eval.Report {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(t.Context(), []string{"--dev-stack", "--set", set, "--no-write", "--progress", "none", "--json"}, &out, &errb, env); code != 0 {
			t.Fatalf("exit %d\n%s", code, errb.String())
		}
		var rep eval.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	one := report(noenv)
	two := report(func(k string) (string, bool) { return "2", k == "ASK_PHASE" })
	if !strings.Contains(two.Target, "phase 2") || strings.Contains(one.Target, "phase 2") {
		t.Errorf("targets %q (phase 1) and %q (ASK_PHASE=2): want only the second to name phase 2", one.Target, two.Target)
	}
	// Phase 2 asks each source in a branch of its own and the catalog-withheld branch besides.
	if p1, p2 := one.Scores.PerAsk.ModelCalls, two.Scores.PerAsk.ModelCalls; p2 <= p1 {
		t.Errorf("model calls per ask %.2f with ASK_PHASE=2, %.2f without: phase 2 was not run", p2, p1)
	}
}

// A target that fails every ask — here phase 2 with a source that is down — scores 0% and the
// summary says why, once per reason with how many items: a broken target must not read as a
// model that answers nothing right. (The run itself ran, so the exit status is 0; --expect
// turns the scores into a failure.)
func TestSummarySaysWhyAsksFailed(t *testing.T) {
	down := "http://" + loopback.Refused(t) + "/mcp" // nothing listens there
	env := map[string]string{"ASK_PHASE": "2", "DAS_SOURCES": "catalog=" + down + ",warehouse=" + down}
	set := filepath.Join("..", "..", "eval", "testdata", "fixture.yaml")
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"--dev-stack", "--set", set, "--no-write", "--progress", "none"}, &out, &errb, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	if want := "error{transport}: source catalog: connect: unreachable or broke the protocol"; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "ended in an error they do not expect") {
		t.Errorf("summary does not say why every ask failed (want %q):\n%s", want, out.String())
	}
}

// A service that opens the conversation and then refuses every ask (here 401: a token it takes
// for one call and not the next) gives no outcome to score: exit 2, the reason said, and the last
// report left as it was, not replaced by one of 0%.
func TestNoOutcomeReadIsNotAScore(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ask/v1/conversations", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"c_1","asks_url":"/ask/v1/conversations/c_1/asks","created_at":"2026-12-01T00:00:00Z"}`)
	})
	mux.HandleFunc("POST /ask/v1/conversations/c_1/asks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"title":"Unauthorized","status":401,"detail":"the token has expired"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	set := filepath.Join(dir, "set.yaml")
	if err := os.WriteFile(set, []byte("name: s\nitems:\n  - {id: a, question: q, expect: abstention}\n  - {id: b, question: r, expect: error}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"--url", srv.URL + "/ask", "--token", "alice=t", "--set", set, "--out", out, "--progress", "none"}, &stdout, &stderr, noenv)
	if code != 2 {
		t.Errorf("exit %d, want 2\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no outcome was read for any of the 2 items") || !strings.Contains(stderr.String(), "401") {
		t.Errorf("stderr does not say that nothing was read, and why:\n%s", stderr.String())
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the output folder: %v, want nothing written", err)
	}
}

// The three files of a report are written all or none: when one of them cannot be put in place,
// the others are not replaced either, and no temporary file is left behind.
func TestWriteIsAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte("the last run's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// report.png is a folder with something in it: no file can be renamed over it.
	if err := os.MkdirAll(filepath.Join(dir, "report.png", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := []eval.ItemResult{{ID: "a", Expect: "abstention", Got: "abstention", TicketMS: 1, FirstMilestoneMS: 1, TerminalMS: 1, HasDone: true}}
	rep := &eval.Report{Model: "m", Set: eval.Set{Name: "s"}, Scores: eval.Score(res), Items: res}
	if err := write(dir, rep); err == nil || !strings.Contains(err.Error(), "report.png") {
		t.Fatalf("write: %v, want an error naming report.png", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "report.json")); err != nil || string(b) != "the last run's\n" {
		t.Errorf("report.json is %q (%v): replaced although the report could not be written whole", b, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"report.json", "report.png"}; !slices.Equal(names, want) {
		t.Errorf("the folder holds %v, want %v (no REPORT.md of this run, no temporary file)", names, want)
	}
}

// cancelAfter is stderr that cancels the run (as Ctrl-C does) once it has seen a line holding
// mark.
type cancelAfter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	mark   string
	cancel context.CancelFunc
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if strings.Contains(w.b.String(), w.mark) {
		w.cancel()
	}
	return n, err
}

func (w *cancelAfter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Ctrl-C mid-run: the asks in flight are cancelled, the operator is told how far it got (not
// "context canceled"), the items the interrupt cut short are not reported as wrong, and no
// report replaces the last one (often the baseline).
func TestInterruptedRun(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "set.yaml")
	if err := os.WriteFile(set, []byte(`name: slow
items:
  - id: quick
    question: What is our customer churn rate?
    expect: abstention
  - id: slow
    question: "take your time: How many sev1 incidents did we have in 2026-Q2?"
    expect: answer
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errw := &cancelAfter{mark: "[1/2]", cancel: cancel}
	var stdout bytes.Buffer
	code := run(ctx, []string{"--dev-stack", "--set", set, "--out", out, "--progress", "lines", "--concurrency", "1"}, &stdout, errw, noenv)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	got := errw.String()
	if !strings.Contains(got, "ask-eval: interrupted after 1 of 2 items; the asks in flight were cancelled; no report written") {
		t.Errorf("stderr does not say the run was interrupted, and how far it got:\n%s", got)
	}
	if strings.Contains(got, "[2/2]") || strings.Contains(got, "context canceled") {
		t.Errorf("stderr reports the item the interrupt cut short as an outcome:\n%s", got)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("an interrupted run wrote its report folder (%v)", err)
	}
}

// Each item outside a conversation opens one, and the service holds it for DAS_ASK_TTL_S: a set
// larger than the identity's cap, or a run right after another, is turned away with 429 on
// the conversation, and the summary says what to do about it, not only that it happened; the
// exit status (3) says the scores are not the target's alone.
func TestConversationCapSaysWhatToDo(t *testing.T) {
	set := filepath.Join(t.TempDir(), "set.yaml")
	var b strings.Builder
	b.WriteString("name: cap\nitems:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  - id: churn-%d\n    question: What is our customer churn rate?\n    expect: abstention\n", i)
	}
	if err := os.WriteFile(set, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return "2", k == "DAS_ASK_MAX_CONVERSATIONS_PER_ID" }
	var out, errb bytes.Buffer
	// Two items judged, two never: the run says so with exit 3, not 0 as a run judged whole.
	if code := run(t.Context(), []string{"--dev-stack", "--set", set, "--no-write", "--progress", "none", "--concurrency", "1"}, &out, &errb, env); code != 3 {
		t.Fatalf("exit %d, want 3 (items gave no outcome)\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"harness errors       2 item(s)", "429 Too Many Requests", "raise DAS_ASK_MAX_CONVERSATIONS_PER_ID on the service"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "2 of 4 items gave no outcome") {
		t.Errorf("stderr does not say why the exit is 3:\n%s", errb.String())
	}
}

// --dev-stack is the eval's own service: a set that opens more conversations as one identity
// than the service's default cap (100) runs whole, rather than the items past the cap coming
// back as harness errors.
func TestDevStackTakesALargeSet(t *testing.T) {
	set := filepath.Join(t.TempDir(), "set.yaml")
	var b strings.Builder
	b.WriteString("name: large\nitems:\n")
	for i := range 103 {
		fmt.Fprintf(&b, "  - id: churn-%d\n    question: What is our customer churn rate?\n    expect: abstention\n", i)
	}
	if err := os.WriteFile(set, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"--dev-stack", "--set", set, "--no-write", "--progress", "none"}, &out, &errb, noenv); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "outcome accuracy     100% (103/103)") || strings.Contains(out.String(), "harness errors") {
		t.Errorf("the set did not run whole:\n%s", out.String())
	}
}

// TestIdPFromTheEnvironment: ASK_IDP, the IdP's name for the ask CLI and make token, is
// ask-eval's --idp too; it read only ASK_IDP_URL, and a caller who had exported ASK_IDP was
// told "give --idp". ASK_IDP_URL still works and wins beside it; --idp wins over both.
func TestIdPFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"ASK_IDP", nil, map[string]string{"ASK_IDP": "http://idp"}, "http://idp"},
		{"ASK_IDP_URL", nil, map[string]string{"ASK_IDP_URL": "http://old"}, "http://old"},
		{"both", nil, map[string]string{"ASK_IDP": "http://idp", "ASK_IDP_URL": "http://old"}, "http://old"},
		{"--idp", []string{"--idp", "http://flag"}, map[string]string{"ASK_IDP": "http://idp", "ASK_IDP_URL": "http://old"}, "http://flag"},
	} {
		o, err := parse(append([]string{"--url", "http://x/ask"}, c.args...), io.Discard, config.MapEnv(c.env))
		if err != nil || o.idp != c.want {
			t.Errorf("%s: --idp %q (%v), want %q", c.name, o.idp, err, c.want)
		}
	}
}

// TestDevStackIgnoresTheTargetInTheEnvironment: ASK_URL and ASK_IDP are the defaults of --url and
// --idp, and the ask CLI's settings too, which a shell that talks to a running stack exports;
// `make eval` (--dev-stack) then refused to run, telling a caller who had given neither to drop
// --url and --idp. Given on the command line beside --dev-stack, they are still refused.
func TestDevStackIgnoresTheTargetInTheEnvironment(t *testing.T) {
	env := config.MapEnv(map[string]string{"ASK_URL": "http://127.0.0.1:1/ask", "ASK_IDP": "http://127.0.0.1:1", "ASK_IDP_URL": "http://127.0.0.1:2"})
	o, err := parse([]string{"--dev-stack"}, io.Discard, env)
	if err != nil {
		t.Fatalf("--dev-stack with ASK_URL and ASK_IDP exported: %v", err)
	}
	if o.url != "" || o.idp != "" {
		t.Errorf("--dev-stack kept --url %q and --idp %q from the environment", o.url, o.idp)
	}
	for _, args := range [][]string{{"--url", "http://x/ask"}, {"--idp", "http://idp"}} {
		if _, err := parse(append([]string{"--dev-stack"}, args...), io.Discard, env); err == nil || !strings.Contains(err.Error(), "drop --url") {
			t.Errorf("--dev-stack %v: %v, want it refused", args, err)
		}
	}
}
