package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
)

// Config configures Run. Zero values mean defaults; BaseURL, Tokens and (for sets with SQL)
// Oracle are required.
type Config struct {
	// BaseURL is the service's base URL, gateway prefix included (http://127.0.0.1:8080/ask).
	BaseURL string
	// Tokens hands out a bearer per identity the set asks as.
	Tokens Tokens
	// Oracle computes the expected results of the set's SQL.
	Oracle Oracle
	// Concurrency bounds the conversations in flight. 0 means 4 (the service's default
	// in-flight limit per identity); an ask turned away with 429 waits its Retry-After.
	Concurrency int
	// AskTimeout bounds one ask from its POST to done. 0 means 3 minutes.
	AskTimeout time.Duration
	// HTTPClient makes every request. Nil means a plain client.
	HTTPClient *http.Client
	// Progress, when set, is called once per item as it finishes, never concurrently.
	Progress func(done, total int, r ItemResult)
	// Logger receives the harness's own trouble; nil discards. Questions are never logged.
	Logger *slog.Logger
}

// ItemResult is what came of one item. It never holds the question text: the report names
// items by id.
type ItemResult struct {
	ID           string `json:"id"`
	Category     string `json:"category"`
	As           string `json:"as"`
	Conversation string `json:"conversation,omitempty"`
	Expect       string `json:"expect"`
	// Got is the terminal event's type; "error" also when the harness could not get one.
	Got string `json:"got"`
	// ErrorKind is the error event's kind, or "harness" when no outcome was read.
	ErrorKind string `json:"error_kind,omitempty"`
	// Detail says, for people, what was wrong (rows that differ, terms missing, a failure).
	Detail string `json:"detail,omitempty"`
	// Correct, Attributed and CaveatsCarried are set only where the item makes them scoreable.
	Correct        *bool    `json:"correct,omitempty"`
	Attributed     *bool    `json:"attributed,omitempty"`
	MissingTerms   []string `json:"missing_terms,omitempty"`
	CaveatsCarried *bool    `json:"caveats_carried,omitempty"`
	// Latencies from the start of the POST of the ask, in milliseconds; a negative value means
	// the event never came.
	TicketMS         float64 `json:"ticket_ms"`
	FirstMilestoneMS float64 `json:"first_milestone_ms"`
	TerminalMS       float64 `json:"terminal_ms"`
	// Usage, from done.
	ModelCalls   int64 `json:"model_calls"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Steps        int64 `json:"steps"`
	HasDone      bool  `json:"has_done"`
	// Throttled counts the asks turned away with 429 before this one was admitted.
	Throttled int `json:"throttled,omitempty"`

	answer *gen.AnswerEvent
}

// Unread reports that the harness read no outcome for the item (no ticket, a stream that
// ended early, no token): it counts as an error, and is a harness error.
func (r ItemResult) Unread() bool { return r.ErrorKind == "harness" }

// AsExpected reports that the item ended in the kind of outcome it expects. An outcome the
// harness never read is never as expected, even for an item that expects an error.
func (r ItemResult) AsExpected() bool { return r.Got == r.Expect && !r.Unread() }

// expected is an item's expected result, computed before any question is asked.
type expected struct {
	rows [][]any
}

// Run asks every item of set through the service's published API (package client over the
// generated client) and judges each outcome. Items sharing a conversation are asked in file
// order in one conversation; everything else runs concurrently, at most Concurrency
// conversations at a time. The expected results are computed by the oracle first; an item whose
// SQL fails stops the run before anything is asked. Results come back in the set's order.
//
// When ctx is cancelled, the asks in flight are cancelled at the service and Run returns ctx's
// error; Progress is not told of the items the cancel cut short.
func Run(ctx context.Context, set *Set, cfg Config) ([]ItemResult, error) {
	if cfg.Tokens == nil {
		return nil, errors.New("eval: Config.Tokens is required")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = 3 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	want := make([]expected, len(set.Items))
	for i, it := range set.Items {
		if it.SQL == "" {
			continue
		}
		if cfg.Oracle == nil {
			return nil, fmt.Errorf("eval: item %s has sql but no oracle is configured", it.ID)
		}
		_, rows, err := cfg.Oracle.Query(ctx, it.SQL)
		if err != nil {
			return nil, fmt.Errorf("eval: item %s: computing the expected result: %w", it.ID, err)
		}
		want[i].rows = rows
	}

	clients := map[string]*client.Client{}
	for _, as := range set.Identities() {
		c, err := client.New(cfg.BaseURL, client.Options{
			Token:      client.TokenFunc(func(ctx context.Context) (string, error) { return cfg.Tokens.Token(ctx, as) }),
			HTTPClient: cfg.HTTPClient,
			Logger:     cfg.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		clients[as] = c
	}

	// The service must answer before any question is asked. A wrong URL, a refused token or a
	// service that is down is a run that could not happen, not one that scored nothing: without
	// this, every item would come back a harness error and the report would be all zeros. The
	// conversation opened here is the first unit's.
	first := set.Items[0].As
	// The client retries a service that does not answer (each try bounded by its header
	// timeout), so "failed" can come minutes after the start: say how long it was tried.
	probeStart := time.Now()
	probe, err := createConversation(ctx, clients[first])
	if err != nil {
		return nil, fmt.Errorf("eval: nothing was asked: opening a conversation at %s as %s failed after %s: %w",
			RedactURL(cfg.BaseURL), first, time.Since(probeStart).Round(time.Second), err)
	}

	// Units of work: one per conversation group, one per standalone item, in order of first use.
	var units [][]int
	group := map[string]int{}
	for i, it := range set.Items {
		if it.Conversation == "" {
			units = append(units, []int{i})
			continue
		}
		if u, ok := group[it.Conversation]; ok {
			units[u] = append(units[u], i)
			continue
		}
		group[it.Conversation] = len(units)
		units = append(units, []int{i})
	}

	results := make([]ItemResult, len(set.Items))
	var (
		mu       sync.Mutex
		finished int
		wg       sync.WaitGroup
	)
	work := make(chan []int)
	report := func(i int, r ItemResult) {
		mu.Lock()
		defer mu.Unlock()
		results[i] = r
		if r.Unread() && ctx.Err() != nil {
			return // cut by the caller's cancel, not an outcome: Run returns ctx's error
		}
		finished++
		if cfg.Progress != nil {
			cfg.Progress(finished, len(set.Items), r)
		}
	}
	for range min(cfg.Concurrency, len(units)) {
		wg.Go(func() {
			for u := range work {
				first := set.Items[u[0]]
				c := clients[first.As]
				var (
					conv    gen.Conversation
					convErr error
				)
				if u[0] == 0 {
					conv = probe
				} else {
					conv, convErr = createConversation(ctx, c)
				}
				for _, i := range u {
					it := set.Items[i]
					var r ItemResult
					if convErr != nil {
						r = base(it)
						harness(&r, fmt.Errorf("creating the conversation: %w", convErr))
					} else {
						r = ask(ctx, c, conv.Id, it, cfg.AskTimeout)
					}
					judge(&r, it, want[i])
					r.Detail = withoutQuestion(r.Detail, it.Question)
					report(i, r)
				}
			}
		})
	}
	for _, u := range units {
		select {
		case work <- u:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return results, err
	}
	return results, nil
}

// createConversation opens a conversation, and says what to do when the identity holds as many
// as the service allows: the harness opens one per item outside a conversation and one per
// conversation of the set, and the service keeps each for DAS_ASK_TTL_S after its last ask, so
// a large set, or runs back to back, reach the cap.
func createConversation(ctx context.Context, c *client.Client) (gen.Conversation, error) {
	conv, err := c.CreateConversation(ctx)
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests {
		err = fmt.Errorf("%w (each item outside a conversation opens one, held for DAS_ASK_TTL_S after its last ask: raise DAS_ASK_MAX_CONVERSATIONS_PER_ID on the service, spread the set over more identities, or wait for the last run's to expire)", err)
	}
	return conv, err
}

// RedactURL is u without its user information (user:password@, a gateway's basic auth) and
// query, for the report, the summary and error messages: the report is written to be committed.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	p.User, p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment = nil, "", false, "", ""
	return p.String()
}

func base(it Item) ItemResult {
	return ItemResult{ID: it.ID, Category: it.Category, As: it.As, Conversation: it.Conversation, Expect: it.Expect,
		TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1}
}

func harness(r *ItemResult, err error) {
	r.Got, r.ErrorKind, r.Detail = KindError, "harness", err.Error()
}

// ask puts one item's question and follows its events to done, timing the ticket, the first
// milestone and the terminal event from the start of the POST.
func ask(ctx context.Context, c *client.Client, convID string, it Item, timeout time.Duration) ItemResult {
	r := base(it)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ms := func(t0 time.Time) float64 { return float64(time.Since(t0).Microseconds()) / 1000 }

	var (
		tk  gen.Ticket
		err error
		t0  time.Time
	)
	for {
		t0 = time.Now()
		tk, err = c.Ask(ctx, convID, it.Question)
		var apiErr *client.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
			break
		}
		r.Throttled++
		wait := max(apiErr.RetryAfter, 200*time.Millisecond)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		harness(&r, fmt.Errorf("asking: %w", err))
		return r
	}
	r.TicketMS = ms(t0)

	var (
		outcomes []string // every terminal event's type: a run has exactly one
		leaked   []string // the events other than accepted that carried the question
	)
	for ev, err := range c.Events(ctx, tk.Ticket, client.EventsOptions{}) {
		if err != nil {
			// The harness gives up on the run, so the run must not go on: it would spend the
			// identity's quota and hold the conversation (the next item in it would get a 409).
			// Cancel is idempotent; after done it changes nothing.
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = c.Cancel(cctx, tk.Ticket)
			ccancel()
			// A stream cut after its outcome and before done ended early all the same; the reason
			// says which of the two never came, as the terminal latency shows the outcome did.
			switch {
			case r.Got != "" && ctx.Err() != nil:
				err = fmt.Errorf("the outcome (%s) came, but no done within %s: %w", r.Got, timeout, err)
			case r.Got != "":
				err = fmt.Errorf("the outcome (%s) came, but no done: %w", r.Got, err)
			case ctx.Err() != nil:
				err = fmt.Errorf("no outcome within %s: %w", timeout, err)
			}
			harness(&r, fmt.Errorf("following the events: %w", err))
			return r
		}
		if ev.Type != gen.EventTypeAccepted && carriesQuestion(ev.Data, it.Question) {
			// The event is named by its type only when the contract names that type: any other
			// type is the service's text, which may be the question itself, and the reason goes
			// into the report.
			typ := string(ev.Type)
			if !ev.Type.Valid() {
				typ = "(a type the contract does not name)"
			}
			leaked = append(leaked, fmt.Sprintf("%s %d", typ, ev.Seq))
		}
		if k := ev.Outcome(); k != client.NotTerminal {
			if outcomes = append(outcomes, k.String()); len(outcomes) == 1 {
				r.TerminalMS = ms(t0)
				r.Got = k.String()
			}
		}
		switch v := ev.Value.(type) {
		case gen.MilestoneEvent:
			if r.FirstMilestoneMS < 0 {
				r.FirstMilestoneMS = ms(t0)
			}
		case gen.AnswerEvent:
			r.answer = &v
		case gen.ErrorEvent:
			// A kind the contract does not name is the service's text: not written into the
			// report as it came (it could be the question, or "harness", the harness's own kind).
			r.ErrorKind, r.Detail = string(v.Kind), v.Message
			if !v.Kind.Valid() {
				r.ErrorKind = "(a kind the contract does not name)"
			}
		case gen.RefusalEvent:
			r.Detail = fmt.Sprintf("refused by %s (%s): %s", v.Source, v.Tool, v.Reason)
		case gen.AbstentionEvent:
			r.Detail = fmt.Sprintf("catalog terms tried: %v", v.Terms)
		case gen.DoneEvent:
			r.HasDone = true
			r.ModelCalls, r.InputTokens, r.OutputTokens, r.Steps = v.ModelCalls, v.InputTokens, v.OutputTokens, v.Steps
		}
	}
	if r.Got == "" || !r.HasDone {
		harness(&r, client.ErrIncomplete)
		return r
	}
	// Neither the first outcome nor the last is the run's: the stream broke the contract, and
	// there is nothing to score.
	if len(outcomes) > 1 {
		harness(&r, fmt.Errorf("the stream carried more than one outcome (%s), where a run ends in exactly one", strings.Join(outcomes, ", then ")))
		return r
	}
	// The question is the accepted event's alone (the contract's privacy promise): a service that
	// echoes it elsewhere broke the contract, and its outcome is not scored as if it had not.
	if len(leaked) > 0 {
		harness(&r, fmt.Errorf("the stream carried the question outside accepted (in %s), where only accepted may carry it", strings.Join(leaked, ", ")))
		return r
	}
	return r
}

// withoutQuestion is detail with the question, ignoring case, put as "(the question)": the detail
// goes into the report and the summary, and a service's refusal of the ask (a problem's detail
// that quotes the request, "cannot ask \"How many …\"") comes back in the client's error.
func withoutQuestion(detail, question string) string {
	if question == "" || !strings.Contains(strings.ToLower(detail), strings.ToLower(question)) {
		return detail
	}
	return regexp.MustCompile("(?i)"+regexp.QuoteMeta(question)).ReplaceAllLiteralString(detail, "(the question)")
}

// carriesQuestion reports whether any string in the event (a key or a value, decoded, so JSON
// escapes do not hide it) holds the whole question, ignoring case — the rule conformance's
// privacy check applies to a run's outcome.
func carriesQuestion(data json.RawMessage, question string) bool {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return strings.Contains(strings.ToLower(string(data)), strings.ToLower(question))
	}
	q := strings.ToLower(question)
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.Contains(strings.ToLower(x), q)
		case map[string]any:
			for k, e := range x {
				if walk(k) || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
