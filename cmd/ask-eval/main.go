// Command ask-eval scores an implementation of the ask service, and the model behind it, on a
// question set (package eval): it asks every question through the published API, judges each
// outcome against the set (expected results computed by SQL against the demo dataset when it
// runs), prints the scores and writes a report — Markdown, JSON and a chart — to --out
// (docs/eval/ by default).
//
// Against the development stack, started in process (llm-stub unless ASK_LLM names a model):
//
//	ask-eval --dev-stack
//	ASK_LLM=anthropic ANTHROPIC_API_KEY=… ask-eval --dev-stack
//
// Against a running service, identities minted by the dev IdP or passed in:
//
//	ask-eval --url http://127.0.0.1:8080/ask --idp http://127.0.0.1:8090 --set my-set.yaml
//	ask-eval --url https://ask.example/ask --token alice="$A" --token bob="$B" --model gpt-4o
//
// Compare with an earlier report (--baseline, or without running: ask-eval diff OLD NEW):
//
//	ask-eval --dev-stack --baseline docs/eval/report.json
//
// Exit status: 0 the set ran, 1 the scores differ from --expect, 2 it could not run, 3 it ran but
// some items gave no outcome (harness errors, counted as wrong; the report is written). Ctrl-C (or
// SIGTERM) cancels the asks in flight and exits 2 without writing a report.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/eval"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, config.Process)
	stop()
	os.Exit(code)
}

// tokenFlags collects --token oid=TOKEN. A malformed value is counted, not refused: the flag
// package's refusal quotes the value, and a --token without its oid= is a bare bearer.
type tokenFlags struct {
	tokens eval.FixedTokens
	bad    int
}

func (t *tokenFlags) String() string {
	if t == nil {
		return "0 token(s)"
	}
	return fmt.Sprintf("%d token(s)", len(t.tokens))
}

func (t *tokenFlags) Set(v string) error {
	oid, tok, ok := strings.Cut(v, "=")
	if !ok || oid == "" || tok == "" {
		t.bad++
		return nil
	}
	t.tokens[oid] = tok
	return nil
}

type options struct {
	url, idp, set, out, model, baseline, expect, progress string
	truthSource, truthAs                                  string
	devStack, verbose, noWrite, jsonOut                   bool
	concurrency                                           int
	askTimeout                                            time.Duration
	tokens                                                *tokenFlags
}

func parse(args []string, stderr io.Writer, lookup func(string) (string, bool)) (options, error) {
	o := options{tokens: &tokenFlags{tokens: eval.FixedTokens{}}}
	env, err := config.EvalFromEnv(lookup)
	if err != nil {
		return o, err
	}
	fs := flag.NewFlagSet("ask-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The usage names the diff subcommand too (docs/eval.md): -h listed the flags alone.
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: ask-eval [flags]\n       ask-eval diff OLD.json NEW.json   (compare two reports without running anything)\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.url, "url", env.URL, "the service's base URL, gateway prefix included (env ASK_URL)")
	fs.BoolVar(&o.devStack, "dev-stack", false, "start the development stack in process (llm-stub unless ASK_LLM names a model) and evaluate it")
	fs.StringVar(&o.idp, "idp", env.IdP, "a development identity provider's root, to mint a token per identity of the set (env ASK_IDP, or ASK_IDP_URL, which wins)")
	fs.Var(o.tokens, "token", "oid=TOKEN: the bearer for one identity of the set, instead of --idp (repeatable; env ASK_EVAL_TOKENS, \"alice=T bob=T\", keeps them off the command line)")
	fs.StringVar(&o.set, "set", "", "the question set (YAML); default the demo set, eval/sets/demo.yaml")
	fs.StringVar(&o.out, "out", filepath.Join("docs", "eval"), "the folder REPORT.md, report.json and report.png are written to")
	fs.BoolVar(&o.noWrite, "no-write", false, "print the scores only; write no report")
	fs.BoolVar(&o.jsonOut, "json", false, "print the whole report as JSON on stdout instead of the summary")
	fs.StringVar(&o.model, "model", "", "the model's name for the report; default from ASK_LLM/ASK_LLM_MODEL")
	fs.StringVar(&o.baseline, "baseline", "", "an earlier report.json: print how this run differs from it")
	fs.StringVar(&o.expect, "expect", "", "a YAML file of scores this run must have (the CI fixture); exit 1 when they differ")
	fs.StringVar(&o.truthSource, "truth-source", "", "compute expected results through this MCP source's run_query (e.g. http://127.0.0.1:8091/mcp) instead of the embedded demo dataset")
	fs.StringVar(&o.truthAs, "truth-as", "alice", "with --truth-source: the identity the expected SQL runs as (it must be allowed to read what the set reads)")
	fs.IntVar(&o.concurrency, "concurrency", 4, "conversations asked at the same time")
	fs.DurationVar(&o.askTimeout, "ask-timeout", 3*time.Minute, "bound on one ask, POST to done, and on one expected result through --truth-source")
	fs.StringVar(&o.progress, "progress", "auto", "auto (a bar on a terminal, lines otherwise), bar, lines or none")
	fs.BoolVar(&o.verbose, "v", false, "log the dev stack's and the harness's trouble to stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	// $ASK_EVAL_TOKENS is read after the flags, not as a flag's default: the usage a mistyped
	// flag prints would show it. A --token given wins over all of it; the dev stack mints its own.
	if !o.devStack && len(o.tokens.tokens) == 0 && o.tokens.bad == 0 {
		for _, v := range strings.Fields(env.Tokens) {
			_ = o.tokens.Set(v)
		}
	}
	if o.tokens.bad > 0 {
		// The value is not repeated: it may be the bearer itself.
		return o, fmt.Errorf("%d --token (or $ASK_EVAL_TOKENS) value(s) not of the form oid=TOKEN (not shown: a value may be a bearer)", o.tokens.bad)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	// Only what was given on the command line conflicts with --dev-stack: ASK_URL and ASK_IDP,
	// which the ask CLI and make token read too and a shell often exports, are defaults of
	// --url and --idp, and the dev stack has its own (as $ASK_EVAL_TOKENS is ignored above).
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if o.devStack {
		if given["url"] || given["idp"] || len(o.tokens.tokens) > 0 {
			return o, errors.New("--dev-stack starts its own service and IdP: drop --url, --idp and --token")
		}
		o.url, o.idp = "", ""
	}
	switch {
	case !o.devStack && o.url == "":
		return o, errors.New("give --url (or --dev-stack)")
	case !o.devStack && o.idp == "" && len(o.tokens.tokens) == 0:
		return o, errors.New("give --idp, or a --token oid=TOKEN for each identity of the set")
	case o.concurrency < 1:
		return o, errors.New("--concurrency must be at least 1")
	case o.askTimeout <= 0:
		// eval.Config reads 0 or less as its default, 3 minutes: not what was asked for.
		return o, fmt.Errorf("--ask-timeout %v: want a positive duration", o.askTimeout)
	}
	switch o.progress {
	case "auto", "bar", "lines", "none":
	default:
		return o, fmt.Errorf("--progress must be auto, bar, lines or none, not %q", o.progress)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	if len(args) > 0 && args[0] == "diff" {
		return diff(args[1:], stdout, stderr)
	}
	o, err := parse(args, stderr, lookup)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the usage was asked for, and printed
	}
	if err != nil {
		fmt.Fprintln(stderr, "ask-eval:", err)
		return 2
	}
	fail := func(err error) int {
		if ctx.Err() != nil {
			// Ctrl-C or SIGTERM: say so, not "context canceled".
			err = errors.New("interrupted: no report written")
		}
		fmt.Fprintln(stderr, "ask-eval:", err)
		return 2
	}
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}

	var set *eval.Set
	if o.set == "" {
		set, err = eval.DefaultSet()
	} else {
		set, err = eval.LoadSet(o.set)
	}
	if err != nil {
		return fail(err)
	}
	var (
		base *eval.Report
		exp  *eval.Expectation
	)
	// Read the baseline before anything is written: it is often the report this run replaces.
	if o.baseline != "" {
		if base, err = eval.ReadReport(o.baseline); err != nil {
			return fail(err)
		}
	}
	if o.expect != "" {
		if exp, err = eval.LoadExpectation(o.expect); err != nil {
			return fail(err)
		}
	}

	all, err := config.FromEnv(lookup)
	if err != nil {
		return fail(fmt.Errorf("model: %w", err))
	}
	model := all.Agent
	// The dev stack is the eval's own service, started afresh: a set that opens more
	// conversations as one identity than its cap would have them turned away with 429, which
	// says nothing of the model. An operator's own DAS_ASK_MAX_CONVERSATIONS_PER_ID stands.
	if _, given := lookup("DAS_ASK_MAX_CONVERSATIONS_PER_ID"); o.devStack && !given {
		all.Service.MaxConversationsPerID = max(all.Service.MaxConversationsPerID, set.MostConversations())
	}
	cfg := eval.Config{Concurrency: o.concurrency, AskTimeout: o.askTimeout, Logger: log}
	target := eval.RedactURL(o.url)
	if o.devStack {
		// The dev stack reads the same settings as make ask-serve's (the model, ASK_PHASE,
		// ASK_DIVERGENCE_TURNS, the service's DAS_ASK_*), so the eval scores what it serves.
		opts := stack.Options{Logger: log, Config: &all}
		if all.StubScript != "" && model.LLM == agent.LLMStub {
			// make ask-serve's ASK_STUB_SCRIPT: a stub of one's own is what is scored, and the
			// report says so (it would name the default script while scoring another).
			if opts.StubScript, err = llmstub.LoadScript(all.StubScript); err != nil {
				return fail(fmt.Errorf("ASK_STUB_SCRIPT: %w", err))
			}
		}
		demo := "demo source"
		if model.Phase == 2 {
			opts.Split, opts.Phase = true, 2
			demo = "the demo as a catalog and a warehouse, phase 2"
		}
		st, err := stack.Start(ctx, opts)
		if err != nil {
			return fail(fmt.Errorf("start the dev stack: %w", err))
		}
		defer func() {
			if err := st.Close(); err != nil {
				fmt.Fprintln(stderr, "ask-eval: stopping the dev stack:", err)
			}
		}()
		cfg.BaseURL, cfg.Tokens = st.AskURL, &eval.IdPTokens{URL: st.IdPURL}
		target = "dev stack (in process, " + demo + ")"
	} else {
		cfg.BaseURL = o.url
		if len(o.tokens.tokens) > 0 {
			// An identity without a token would make every item it asks a harness error, in a run
			// that exits 0: that is known before anything is asked.
			var without []string
			for _, as := range set.Identities() {
				if _, ok := o.tokens.tokens[as]; !ok {
					without = append(without, as)
				}
			}
			if len(without) > 0 {
				return fail(fmt.Errorf("no --token for %s (the set asks as %s)", strings.Join(without, ", "), strings.Join(set.Identities(), ", ")))
			}
			cfg.Tokens = o.tokens.tokens
		} else {
			cfg.Tokens = &eval.IdPTokens{URL: o.idp}
		}
	}
	if o.model == "" {
		o.model = modelName(model, o.devStack, all.StubScript)
	}
	if o.truthSource != "" {
		tokens, as := cfg.Tokens, o.truthAs
		cfg.Oracle = &eval.SourceOracle{URL: o.truthSource, Token: func(ctx context.Context) (string, error) { return tokens.Token(ctx, as) }, Timeout: o.askTimeout}
	} else {
		truth, err := source.OpenTruth(ctx, nil)
		if err != nil {
			return fail(fmt.Errorf("the demo dataset: %w", err))
		}
		defer truth.Close()
		cfg.Oracle = truth
	}

	prog := newProgress(o.progress, stderr, len(set.Items))
	cfg.Progress = prog.item
	start := time.Now()
	results, err := eval.Run(ctx, set, cfg)
	prog.stop()
	if err != nil && ctx.Err() != nil {
		// The report this run would replace (often the baseline) stays as it was: a partial run
		// is not a score of the set.
		fmt.Fprintf(stderr, "ask-eval: interrupted after %d of %d items; the asks in flight were cancelled; no report written\n", prog.finished(), len(set.Items))
		return 2
	}
	if err != nil {
		// Opening a conversation names nothing that could be missing: its 404 is the URL, most
		// often the host without the service's base path (as the ask CLI says too).
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && apiErr.Op == "createConversation" {
			err = fmt.Errorf("%w (no ask service at %s: --url, or $ASK_URL, is the service's base URL with its path, such as %s)", err, eval.RedactURL(cfg.BaseURL), config.DefaultClientURL)
		}
		return fail(err)
	}
	rep := &eval.Report{
		Date: start.UTC(), Commit: commit(), Model: o.model, Target: target, Set: *set,
		Concurrency: o.concurrency, ElapsedMS: float64(time.Since(start).Milliseconds()),
		Scores: eval.Score(results), Items: results,
	}
	if rep.Scores.HarnessErrors == len(results) {
		// Not one outcome was read (every ask refused, every stream lost): that is a run that
		// could not happen, not a score of 0%, and it must not replace the last report.
		_ = rep.WriteSummary(stderr)
		return fail(fmt.Errorf("no outcome was read for any of the %d items (reasons above): no report written", len(results)))
	}
	if o.jsonOut {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteSummary(stdout)
	}
	if err != nil {
		return fail(err)
	}
	// With --json, stdout is the report alone; everything else goes to stderr.
	info := stdout
	if o.jsonOut {
		info = stderr
	}
	if !o.noWrite {
		if err := write(o.out, rep); err != nil {
			return fail(err)
		}
		fmt.Fprintf(info, "report: %s, %s, %s\n", filepath.Join(o.out, "REPORT.md"), filepath.Join(o.out, "report.json"), filepath.Join(o.out, "report.png"))
	}
	if base != nil {
		if err := eval.Diff(info, base, rep); err != nil {
			return fail(err)
		}
	}
	if exp != nil {
		if diffs := exp.Check(rep.Scores); len(diffs) > 0 {
			fmt.Fprintf(info, "scores differ from %s:\n  %s\n", o.expect, strings.Join(diffs, "\n  "))
			return 1
		}
		fmt.Fprintf(info, "scores as expected by %s\n", o.expect)
	}
	if n := rep.Scores.HarnessErrors; n > 0 {
		// Some items were never judged (the service went away mid-run, asks refused): the
		// scores count them as wrong, which is the report's to say and a script's to notice.
		fmt.Fprintf(stderr, "ask-eval: %d of %d items gave no outcome (harness errors, named above): the scores count them as wrong; exit 3\n", n, len(results))
		return 3
	}
	return 0
}

// write puts REPORT.md, report.json and report.png in dir, all three or none: each is written
// whole to a temporary file first, and only when all three are written, and none of their names
// is taken by something a file cannot replace, are they renamed into place. A report.json beside
// the REPORT.md of another run would be a baseline that says what the page does not.
func write(dir string, rep *eval.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := []struct {
		name string
		fn   func(io.Writer) error
		tmp  string
	}{
		{name: "report.json", fn: rep.WriteJSON},
		{name: "REPORT.md", fn: func(w io.Writer) error { return rep.WriteMarkdown(w, "report.png") }},
		{name: "report.png", fn: func(w io.Writer) error { return eval.WriteChart(w, rep) }},
	}
	defer func() {
		for _, f := range files {
			if f.tmp != "" {
				os.Remove(f.tmp) // gone already once renamed
			}
		}
	}()
	for i := range files {
		f := &files[i]
		tmp, err := os.CreateTemp(dir, "."+f.name+"-*")
		if err != nil {
			return err
		}
		f.tmp = tmp.Name()
		err = errors.Join(tmp.Chmod(0o644), f.fn(tmp))
		if err = errors.Join(err, tmp.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	for _, f := range files {
		if fi, err := os.Lstat(filepath.Join(dir, f.name)); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("writing %s: %s is not a file; no report written", f.name, filepath.Join(dir, f.name))
		}
	}
	for _, f := range files {
		if err := os.Rename(f.tmp, filepath.Join(dir, f.name)); err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return nil
}

// diff compares two reports without running anything.
func diff(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: ask-eval diff OLD.json NEW.json")
		return 2
	}
	base, err := eval.ReadReport(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "ask-eval:", err)
		return 2
	}
	cur, err := eval.ReadReport(args[1])
	if err != nil {
		fmt.Fprintln(stderr, "ask-eval:", err)
		return 2
	}
	if err := eval.Diff(stdout, base, cur); err != nil {
		fmt.Fprintln(stderr, "ask-eval:", err)
		return 2
	}
	return 0
}

// modelName is what the report says about the model: the dev stack's configuration, or for a
// remote service what ASK_LLM and ASK_LLM_MODEL say here (the API does not tell).
func modelName(m agent.Config, dev bool, stubScript string) string {
	switch {
	case dev && m.LLM == agent.LLMStub && stubScript != "":
		return "llm-stub (script " + filepath.Base(stubScript) + ")"
	case dev && m.LLM == agent.LLMStub:
		return "llm-stub (default script)"
	case m.LLM == agent.LLMStub:
		return "unknown (give --model)"
	case m.BaseURL != "":
		return fmt.Sprintf("%s %s at %s", m.LLM, m.Model, m.BaseURL)
	}
	return m.LLM + " " + m.Model
}

// commit is the working tree's commit (with -dirty when it has changes), or the binary's.
func commit() string {
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		c := strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			c += "-dirty"
		}
		return c
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
