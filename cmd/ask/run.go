package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/das-ask/ask/client"
	askconfig "github.com/das-ask/ask/config"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/httpstatus"
	"github.com/das-ask/ask/internal/redact"
)

// Exit statuses; see the package doc.
const (
	exitAnswer     = 0
	exitFailure    = 1
	exitAbstention = 2
	exitRefusal    = 3
	exitError      = 4
	// exitInterrupted is Ctrl-C while following a ticket with --follow: ask stopped watching,
	// and the run goes on (128 + SIGINT, as a shell reports a command ended by Ctrl-C).
	exitInterrupted = 130
)

const (
	// cancelGrace is how long ask waits for the run to confirm a cancel before it leaves.
	cancelGrace = 5 * time.Second
	// askTimeout bounds the request that creates an ask, which Ctrl-C does not interrupt.
	askTimeout = 30 * time.Second
)

const usage = `usage: ask [flags] QUESTION...
       ask [flags] -q QUESTION        (-q - reads it from stdin)
       ask [flags] --follow TICKET
       ask [flags] --cancel TICKET

Asks the ask service a question and prints the outcome. Progress goes to stderr;
the outcome (or, with --json, every event as NDJSON) to stdout. Flags may come
before or after the question's words; everything after -- is the question
(ask -- what is -5 squared). Ctrl-C (SIGTERM, the terminal closing, or the output's
reader going away during the run, as in ask --json … | head -1) cancels the run
and waits up to 5 s for it to confirm; a second Ctrl-C leaves at once
(nohup ask … leaves the run going when the terminal closes). --follow prints how an ask
made earlier goes on and ends (its events from the start): after a lost stream, or
a run another terminal made; Ctrl-C then stops watching and leaves the run alone.
--cancel cancels an ask made earlier (one cancel), then prints how it ended: the
cancel's error, or the outcome it had reached first.

Exit status: 0 answer, 2 abstention, 3 refusal, 4 error (the run failed, timed out
or was cancelled), 1 usage error or the service could not be reached or refused,
130 Ctrl-C while following a ticket (the run goes on).

Flags:
`

// config is what the flags and the environment ask for.
type config struct {
	url, token, oid, idp string
	// shown is url as this command says it, in its messages and its state file: any password
	// in it (http://user:password@host/ask) replaced by "xxxxx", as net/http's errors do.
	shown             string
	question          string
	webhook           string
	fromStdin         bool   // -q -: the question is stdin's
	follow            string // a ticket to follow instead of asking
	cancel            bool   // --cancel: cancel the ticket in follow first
	cont, steps, json bool
	branches          bool
	env               askconfig.Client // the environment, under the flags
}

// parseArgs reads flags over the environment (package config reads it). A nil config with code
// 0 means help was shown.
func parseArgs(args []string, stderr io.Writer, lookup func(string) (string, bool)) (*config, int) {
	env, err := askconfig.ClientFromEnv(lookup)
	if err != nil {
		fmt.Fprintln(stderr, "ask:", err)
		return nil, exitFailure
	}
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{env: env}
	c.url = env.URL
	fs.Var(urlValue{&c.url}, "url", "the service, gateway prefix included ($ASK_URL)")
	// The token and the webhook (whose URL may hold a credential) take their environment values
	// after parsing, not as the flags' defaults: a default is printed in the usage, which every
	// mistyped flag writes to stderr (a CI log), the bearer with it.
	fs.StringVar(&c.token, "token", "", "the bearer token ($ASK_TOKEN); default: mint one from the dev IdP ($ASK_IDP)")
	fs.StringVar(&c.oid, "as", env.OID, "the identity to mint a dev token for ($ASK_OID)")
	fs.StringVar(&c.question, "q", "", "the question (or give it as arguments); - reads it from stdin")
	fs.BoolVar(&c.cont, "continue", false, "ask in the last conversation used with this URL and identity")
	fs.BoolVar(&c.steps, "steps", false, "also show every tool call, the SQL and the path")
	fs.BoolVar(&c.json, "json", false, "print the events as NDJSON on stdout")
	fs.StringVar(&c.webhook, "webhook", "", "also have the run's end POSTed, signed, to this URL (one the operator allows; $ASK_WEBHOOK)")
	fs.BoolVar(&c.branches, "branches", false, "show every branch's progress (phase 2), not one line per branch")
	fs.StringVar(&c.follow, "follow", "", "follow this `ticket` (an ask made earlier) to its end instead of asking")
	cancel := fs.String("cancel", "", "cancel this `ticket` (an ask made earlier), then print how it ended")
	fs.Usage = func() {
		_, _ = io.WriteString(stderr, usage)
		fs.PrintDefaults()
	}
	words, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitAnswer
		}
		return nil, exitFailure
	}
	// A URL that cannot be the service's is a usage error, said before any token is minted.
	if err := client.CheckBaseURL(c.url); err != nil {
		fmt.Fprintf(stderr, "ask: --url (or $ASK_URL) is %q: give the service's absolute http(s) URL with its base path and no query or fragment, such as %s\n", redacted(c.url), askconfig.DefaultClientURL)
		return nil, exitFailure
	}
	c.shown = redacted(c.url)
	given := len(words) > 0
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["token"] {
		c.token = env.Token
	}
	// A token that cannot be a bearer is a usage error, said now: sent, it failed each request
	// as "ask createConversation: client: token source: …", and --follow's advice was to try again.
	if c.token != "" {
		if err := client.CheckBearer(c.token); err != nil {
			fmt.Fprintf(stderr, "ask: the token from --token (or $ASK_TOKEN): %v (give the token alone, as make -s token prints it)\n", err)
			return nil, exitFailure
		}
	}
	// --as names whom to mint a token for; with a token given, the token's identity asks. An
	// --as that names someone else was ignored, and the ask made as the token's owner.
	if o := oidOf(c.token); set["as"] && o != "" && o != c.oid {
		fmt.Fprintf(stderr, "ask: --as %s, but the token from --token (or $ASK_TOKEN) is %s's, and a token asks as its own identity: drop --as, or give %s's token\n", c.oid, o, c.oid)
		return nil, exitFailure
	}
	if !set["webhook"] {
		c.webhook = env.Webhook
	}
	given = given || set["q"]
	if set["follow"] && set["cancel"] {
		fmt.Fprintln(stderr, "ask: give --follow or --cancel, not both (--cancel prints how the ask ended)")
		return nil, exitFailure
	}
	if set["follow"] || set["cancel"] {
		// --follow watches an ask that exists, --cancel cancels it and then watches it end:
		// nothing here would be asked, or remembered.
		name := "--follow"
		if set["cancel"] {
			name, c.follow, c.cancel = "--cancel", *cancel, true
		}
		switch c.follow = strings.TrimSpace(c.follow); {
		case c.follow == "":
			fmt.Fprintf(stderr, "ask: %s needs a ticket, such as t_T5ULAGSQ7BZLGTARGIZHRSL33G\n", name)
			return nil, exitFailure
		case !isTicket(c.follow):
			// Not echoed: what was typed where a ticket goes may be a question.
			fmt.Fprintf(stderr, "ask: %s needs a ticket, such as t_T5ULAGSQ7BZLGTARGIZHRSL33G; what was given is not one (letters, digits, _ and -, at most 64)\n", name)
			return nil, exitFailure
		case given:
			fmt.Fprintf(stderr, "ask: %s names a ticket and asks nothing: give it no question\n", name)
			return nil, exitFailure
		case set["continue"] || set["webhook"]:
			fmt.Fprintf(stderr, "ask: --continue and --webhook are for a new ask, not for %s\n", name)
			return nil, exitFailure
		}
		c.idp = env.IdP
		return c, 0
	}
	if rest := strings.TrimSpace(strings.Join(words, " ")); rest != "" {
		if c.question != "" {
			fmt.Fprintln(stderr, "ask: give the question either with -q or as arguments, not both")
			return nil, exitFailure
		}
		c.question = rest
	}
	if set["q"] && c.question == "-" {
		c.fromStdin = true // read by runWith, which can be interrupted
		c.idp = env.IdP
		return c, 0
	}
	c.question = strings.TrimSpace(c.question)
	if c.question == "" {
		if given {
			// ask "" or ask -q '  ': say what is wrong before the whole usage.
			fmt.Fprintln(stderr, "ask: the question is empty")
		} else {
			fmt.Fprintln(stderr, "ask: no question given")
		}
		fs.Usage()
		return nil, exitFailure
	}
	c.idp = env.IdP
	return c, 0
}

// urlValue is the --url flag. Its default, $ASK_URL, is printed in the usage (which a mistyped
// flag writes to stderr, a CI log), so it shows as redacted.
type urlValue struct{ p *string }

func (v urlValue) String() string {
	if v.p == nil {
		return ""
	}
	return redacted(*v.p)
}

func (v urlValue) Set(s string) error { *v.p = s; return nil }

// redacted is a URL as this command shows it: any password replaced by "xxxxx", in a URL
// url.Parse refuses too.
func redacted(s string) string { return redact.URL(s) }

// maxStdinQuestion bounds what -q - reads: ten times the contract's 4000 characters of the
// longest UTF-8, so that a longer question is still the service's to refuse, with its reason.
const maxStdinQuestion = 160 << 10

// readQuestion reads the question from stdin (-q -), to its end: a question kept out of the
// command line, where any user's ps shows it, and free of the shell's quoting. On a terminal
// it says how to end it. Ctrl-C stops the wait. "" means the command ends with the code.
func readQuestion(ctx context.Context, stdin io.Reader, stderr io.Writer) (string, int) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintln(stderr, "Type the question, then Ctrl-D on a line of its own.")
	}
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(stdin, maxStdinQuestion+1))
		got <- read{b, err}
	}()
	var r read
	select {
	case r = <-got:
	case <-ctx.Done():
		return "", interruptedEarly(stderr)
	}
	switch q := strings.TrimSpace(string(r.b)); {
	case r.err != nil:
		fmt.Fprintf(stderr, "ask: reading the question from stdin: %v\n", r.err)
	case len(r.b) > maxStdinQuestion:
		fmt.Fprintf(stderr, "ask: the question on stdin is over %d KiB; a question is at most 4000 characters\n", maxStdinQuestion>>10)
	case q == "":
		fmt.Fprintln(stderr, "ask: the question is empty (stdin held none)")
	default:
		return q, 0
	}
	return "", exitFailure
}

// isTicket reports whether s can be a ticket: the contract's pattern ^[A-Za-z0-9_-]+$, at most
// 64 characters.
func isTicket(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// parseInterspersed parses args with fs, flags and the question's words in any order, and
// returns the words: `ask "How many?" --steps` is the question with --steps, not the question
// "How many? --steps" (package flag alone stops at the first word, so a flag after the
// question was silently asked as part of it). After "--" everything is words; an unknown flag
// among the words is an error, as before them.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return words, nil
		}
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(words, left...), nil
		}
		words, args = append(words, left[0]), left[1:]
	}
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// run is the whole command, callable from tests: it returns the exit status. Cancelling ctx is
// Ctrl-C: it sends exactly one cancel for the running ask, then waits for done (at most
// cancelGrace) and returns exitError.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	return runWith(ctx, args, stdin, stdout, stderr, lookup, &http.Client{})
}

// runWith is run over the given HTTP client (tests pass an in-memory transport).
func runWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookup func(string) (string, bool), httpClient *http.Client) int {
	cfg, code := parseArgs(args, stderr, lookup)
	if cfg == nil {
		return code
	}
	if cfg.fromStdin {
		q, code := readQuestion(ctx, stdin, stderr)
		if q == "" {
			return code
		}
		cfg.question = q
	}
	fail := func(format string, a ...any) int {
		// A failure may quote the service (a problem's detail): shown as text (safe.go).
		fmt.Fprintf(stderr, "ask: %s\n", text(fmt.Sprintf(format, a...)))
		return exitFailure
	}
	failed := func(err error) int { return fail("%s", cfg.explain(err)) }

	var tokens client.TokenSource
	oid := cfg.oid
	if cfg.token != "" {
		tokens = client.StaticToken(cfg.token)
		oid = firstOf(identityOf(cfg.token), oid)
	} else {
		src := &idpSource{url: cfg.idp, oid: cfg.oid, http: httpClient}
		if _, err := src.Token(ctx); err != nil {
			if ctx.Err() != nil {
				return interruptedEarly(stderr)
			}
			return fail("%v (%v)", errNoToken, err)
		}
		tokens = src
	}
	// The client retries what a retry can cure (a lost connection, a 502/503/504, a frozen
	// replica) and reconnects streams; it says so on stderr, in sentences, never silently.
	logger := slog.New(newNoticeHandler(stderr))
	c, err := client.New(cfg.url, client.Options{Token: tokens, HTTPClient: httpClient, Logger: logger})
	if err != nil {
		return fail("%v", err)
	}
	if cfg.cancel {
		return cancelTicket(ctx, c, cfg, stdout, stderr)
	}
	if cfg.follow != "" {
		return follow(ctx, c, gen.Ticket{Ticket: cfg.follow}, cfg, stdout, stderr)
	}

	tk, err := startAsk(ctx, c, cfg, oid, stderr)
	if errors.Is(err, errInterrupted) {
		return interruptedEarly(stderr)
	}
	if errors.Is(err, errAskUnknown) {
		fmt.Fprintf(stderr, "ask: %v\n", err)
		return exitError
	}
	var mayExist *askMayExist
	if errors.As(err, &mayExist) {
		return fail("%s; but an earlier attempt's reply was lost, so the ask may have been made all the same and be running in conversation %s (ask --continue asks there, and names a run still going)", cfg.explain(mayExist.err), mayExist.conv)
	}
	if err != nil {
		return failed(err)
	}
	return follow(ctx, c, tk, cfg, stdout, stderr)
}

// startAsk asks in the remembered conversation (--continue) or a new one, and remembers it.
func startAsk(ctx context.Context, c *client.Client, cfg *config, oid string, stderr io.Writer) (gen.Ticket, error) {
	state, stateErr := newStateFile(cfg.env.StateDir)
	key := stateKey(cfg.shown, oid)
	conv := ""
	if cfg.cont {
		if stateErr != nil {
			return gen.Ticket{}, fmt.Errorf("--continue: %w", stateErr)
		}
		last, err := state.last(key)
		if err != nil {
			return gen.Ticket{}, fmt.Errorf("--continue: %w", err)
		}
		if last == "" {
			fmt.Fprintln(stderr, "No earlier conversation to continue; starting a new one.")
		}
		conv = last
	}
	for {
		if conv == "" {
			cv, err := c.CreateConversation(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return gen.Ticket{}, errInterrupted
				}
				return gen.Ticket{}, err
			}
			conv = cv.Id
		}
		// Once the ask may exist, Ctrl-C must not abandon it: the request completes (bounded)
		// so that follow can cancel the ticket it returns. After Ctrl-C it has the cancel's
		// grace, not the whole askTimeout, and the wait is said at once.
		askCtx, cancelAsk := context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
		var grace *time.Timer
		noticed := make(chan struct{})
		stopNotice := context.AfterFunc(ctx, func() {
			defer close(noticed)
			fmt.Fprintln(stderr, "Cancelling… (waiting for the service to answer the ask, so that it can be cancelled)")
			grace = time.AfterFunc(cancelGrace, cancelAsk)
		})
		tk, err := c.AskWith(askCtx, conv, cfg.question, client.AskOptions{Webhook: cfg.webhook})
		if !stopNotice() {
			<-noticed // the notice is written, and grace set, before anything else is
			grace.Stop()
		}
		graceOver := askCtx.Err() != nil && ctx.Err() != nil
		cancelAsk()
		var apiErr *client.APIError
		switch {
		case err != nil && graceOver:
			return gen.Ticket{}, errAskUnknown
		case errors.Is(err, client.ErrMayHaveBeenMade):
			// Remembered, so that --continue asks there: a run still going is then named.
			if stateErr == nil {
				_ = state.remember(key, conv)
			}
			return gen.Ticket{}, &askMayExist{err: err, conv: conv}
		case err == nil:
			if stateErr == nil {
				if err := state.remember(key, conv); err != nil {
					fmt.Fprintf(stderr, "ask: could not remember the conversation for --continue: %v\n", err)
				}
			}
			return tk, nil
		case cfg.cont && errors.Is(err, client.ErrNotFound):
			fmt.Fprintln(stderr, "The earlier conversation has expired; starting a new one, without its context.")
			cfg.cont, conv = false, ""
			continue
		case cfg.cont && errors.Is(err, client.ErrConversationFull):
			fmt.Fprintln(stderr, "The earlier conversation is full; starting a new one, without its context.")
			cfg.cont, conv = false, ""
			continue
		case errors.Is(err, client.ErrConversationFull):
			return gen.Ticket{}, errors.New("this conversation is full; start a new one")
		case errors.As(err, &apiErr) && errors.Is(err, client.ErrConflict):
			t := apiErr.RunningTicket()
			return gen.Ticket{}, fmt.Errorf("an ask is already running in this conversation (ticket %s; ask --follow %s watches it)", t, t)
		}
		return gen.Ticket{}, err
	}
}

// askMayExist is a createAsk that failed for good after an attempt whose reply was lost
// (client.ErrMayHaveBeenMade): the ask may have been made in conv.
type askMayExist struct {
	err  error
	conv string
}

func (e *askMayExist) Error() string { return e.err.Error() }
func (e *askMayExist) Unwrap() error { return e.err }

// errInterrupted is Ctrl-C before the ask was made.
var errInterrupted = errors.New("interrupted before the ask was made")

// errAskUnknown is Ctrl-C while the service did not answer the ask within the cancel's grace:
// the ask may have been made, and there is no ticket to cancel.
var errAskUnknown = fmt.Errorf("interrupted; the service did not answer the ask within %s: it may have been made, and without its ticket it could not be cancelled", cancelGrace)

// interruptedEarly ends the command after a Ctrl-C that came before there was an ask to
// cancel: nothing was asked (a conversation may have been made, which holds no question).
func interruptedEarly(stderr io.Writer) int {
	fmt.Fprintln(stderr, "ask: interrupted; nothing was asked")
	return exitError
}

// explain is describe, and for a bearer the caller gave that the service refuses, which
// setting to change: it is most often an old one (the dev IdP's last an hour), and the service
// cannot say so.
func (c *config) explain(err error) string {
	msg := describe(err, c.shown)
	var apiErr *client.APIError
	if c.token != "" && errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized {
		msg += " (the bearer from --token or $ASK_TOKEN was refused: give a valid one, such as a fresh make -s token on the dev stack, or set neither and one is minted from the dev IdP)"
	}
	return msg
}

// describe words a failure to start an ask for a person, once: the client library's errors
// name their operation ("ask createAsk: …"), which after this command's own "ask:" prefix
// would read twice.
func describe(err error, serviceURL string) string {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		msg := fmt.Sprintf("the service refused the request: %d %s", apiErr.StatusCode, httpstatus.Text(apiErr.StatusCode))
		if r := apiErr.Reason(); r != "" {
			msg += ": " + r
		}
		// A 429 or 503 is not retried for the caller (decisions.md): say when to try again.
		if apiErr.RetryAfter > 0 {
			msg += fmt.Sprintf(" (try again in %s)", apiErr.RetryAfter.Round(time.Second))
		}
		// Opening a conversation names nothing that could be missing or another's: its 404 is
		// the URL, most often the host without the service's base path.
		if apiErr.StatusCode == http.StatusNotFound && apiErr.Op == "createConversation" {
			msg += fmt.Sprintf(" (no ask service at %s: --url, or $ASK_URL, is the service's base URL with its path, such as %s)", serviceURL, askconfig.DefaultClientURL)
		}
		return msg
	}
	var unexp *client.UnexpectedResponseError
	if errors.As(err, &unexp) {
		return fmt.Sprintf("what answered at %s is not the ask service: a %d %s with Content-Type %q, not its JSON (--url, or $ASK_URL, is the service's base URL with its path, such as %s; or a proxy between rewrote the reply)",
			serviceURL, unexp.StatusCode, httpstatus.Text(unexp.StatusCode), unexp.ContentType, askconfig.DefaultClientURL)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the service did not answer in time"
	case errors.Is(err, context.Canceled):
		return "interrupted"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return fmt.Sprintf("cannot reach the ask service at %s: %v (is it running? make ask-serve starts the dev stack)", serviceURL, urlErr.Err)
	}
	return err.Error()
}
