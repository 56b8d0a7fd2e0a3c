package conformance

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/das-ask/ask/internal/httpurl"
)

// Config says what to check and how to reach it. Zero values mean defaults.
type Config struct {
	// BaseURL is the service root, the prefix the contract's paths are appended to, e.g.
	// http://127.0.0.1:8080/ask or https://gateway.example/ask. Required.
	BaseURL string
	// Tokens mints or hands out the bearers of identities A and B. Required.
	Tokens TokenSource
	// OverflowURL is the base URL of the same implementation started with a buffer smaller
	// than one run's events (e.g. DAS_ASK_MAX_EVENTS=8), for the overflow check. With a small
	// buffer most steps are evicted before any reader sees them, which starves the checks that
	// examine steps; so the other checks run against BaseURL, with a buffer that holds a run.
	// "" means the overflow check looks for overflow in the runs made against BaseURL, and is
	// skipped when there is none.
	OverflowURL string
	// OverflowTokens hands out bearers OverflowURL accepts; nil means Tokens.
	OverflowTokens TokenSource
	// MaxEvents is the bound BaseURL holds per ticket (its DAS_ASK_MAX_EVENTS); 0 means the
	// contract's default, 1000. A stream may skip a seq only where the run emitted more events
	// than this, so a gap in a shorter run is a lost event, not an evicted step.
	MaxEvents int
	// OverflowMaxEvents is OverflowURL's bound (its DAS_ASK_MAX_EVENTS); 0 means 8.
	OverflowMaxEvents int
	// LimitsURL is the base URL of the same implementation started with small limits and a
	// short deadline and TTL (Limits says which), for the checks of 413, 429, 503, the deadline
	// and the TTL; they would take minutes, or thousands of asks, at the defaults. "" skips them.
	LimitsURL string
	// LimitsTokens hands out bearers LimitsURL accepts; nil means Tokens.
	LimitsTokens TokenSource
	// Limits are LimitsURL's settings.
	Limits Limits
	// AuditURL is the root of a source's audit log (GET {AuditURL}/audit?call_id=...). Without
	// it the checks that compare the stream with the audit log are skipped.
	AuditURL string
	// AuditURLs are the audit roots of further sources (a target with several sources audits
	// each call at the source that made it); a call_id is looked up at AuditURL and at each.
	AuditURLs []string
	// Phase2 says the target runs phase 2: a branch per configured source, and divergence.
	// Without it the phase checks hold the target to phase 1 (one supervisor branch, no
	// branch_id, divergence null).
	Phase2 bool
	// Sources are the names of the target's configured sources (DAS_SOURCES), for the check
	// that phase 2 opens one branch per source; empty means the names are not checked, only
	// that each source branch names a distinct source.
	Sources []string
	// Behaviour adds the behaviour checks (refusal, abstention, path, conversation memory),
	// which depend on the model's judgement (or, with the llm-stub, on its script).
	Behaviour bool
	// Only, when set, runs only the checks whose name it matches.
	Only *regexp.Regexp
	// Questions are the questions the checks ask; empty fields take DefaultQuestions.
	Questions Questions
	// KeepAlive is the keep-alive interval the target is configured with (DAS_ASK_KEEPALIVE_S);
	// 0 means the contract's default, 10 s. The keep-alive check needs a silence longer than it.
	KeepAlive time.Duration
	// SlowWait is how long the slow question's first model turn is silent; 0 means 3 s.
	SlowWait time.Duration
	// RunTimeout bounds one run, from ask to done; 0 means 60 s.
	RunTimeout time.Duration
	// StepMsTolerance is how much longer a step's ms may be than its audit line's ms (the
	// service measures the round trip, the source only its work); 0 means 250 ms.
	StepMsTolerance time.Duration
	// Webhooks configure the suite's webhook receiver; the delivery checks are skipped unless
	// the target admits it and Secrets holds the target's signing secret.
	Webhooks WebhookConfig
	// HTTPClient makes every call; nil means a client without a timeout (streams are long).
	HTTPClient *http.Client
	// Logger receives progress; nil means discard.
	Logger *slog.Logger
}

// Questions are the questions the checks ask. The defaults fit the demo stack's llm-stub script.
type Questions struct {
	// Answer is answered with one figure (a headline), from a query.
	Answer string
	// Slow is answered like Answer, but its first model turn is silent for SlowWait: it keeps a
	// run open for the keep-alive, cancel, conflict and during-run replay checks.
	Slow string
	// Refusal is refused by the source for identity B.
	Refusal string
	// Abstention cannot be answered: the catalog has no such term and nothing is queried.
	Abstention string
	// CatalogOnly is answered from the catalog alone.
	CatalogOnly string
	// WrongWinner is answered differently with the catalog withheld (phase 2: a divergence);
	// Answer is one the catalog does not change (divergence null).
	WrongWinner string
	// FollowUpFirst names an entity (its answer's first result cell) that FollowUpSecond
	// refers to as "that team".
	FollowUpFirst  string
	FollowUpSecond string
}

// DefaultQuestions returns the README's example questions, which the llm-stub's default script
// answers.
func DefaultQuestions() Questions {
	return Questions{
		Answer:         "How many sev1 incidents did we have in 2026-Q2?",
		Slow:           "Take your time: how many sev1 incidents did we have in 2026-Q2?",
		Refusal:        "What was the on-call pay per team in 2026-Q3?",
		Abstention:     "What is our customer churn rate?",
		CatalogOnly:    "What does change failure rate mean?",
		WrongWinner:    "Which team had the highest change failure rate in 2026-Q3?",
		FollowUpFirst:  "Which team had the most incidents in 2026-Q3?",
		FollowUpSecond: "How many deployments did that team ship in 2026-Q3?",
	}
}

// withDefaults returns c with every zero value replaced by its default, or an error naming what
// is missing or malformed.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if _, err := httpurl.Parse(c.BaseURL); err != nil {
		errs = append(errs, errors.New("conformance: BaseURL: want an absolute http(s) URL"))
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Tokens == nil {
		errs = append(errs, errors.New("conformance: Tokens: want a token source"))
	}
	for i, ts := range []TokenSource{c.Tokens, c.OverflowTokens, c.LimitsTokens} {
		if f, ok := ts.(FixedTokens); ok && (i == 0 || ts != c.Tokens) {
			for _, err := range f.expired(time.Now()) {
				errs = append(errs, fmt.Errorf("%w%s", err, []string{"", " (OverflowTokens, for OverflowURL)", " (LimitsTokens, for LimitsURL)"}[i]))
			}
		}
	}
	if c.OverflowURL != "" {
		if _, err := httpurl.Parse(c.OverflowURL); err != nil {
			errs = append(errs, errors.New("conformance: OverflowURL: want an absolute http(s) URL"))
		}
		c.OverflowURL = strings.TrimRight(c.OverflowURL, "/")
		if c.OverflowTokens == nil {
			c.OverflowTokens = c.Tokens
		}
	}
	if c.LimitsURL != "" {
		if _, err := httpurl.Parse(c.LimitsURL); err != nil {
			errs = append(errs, errors.New("conformance: LimitsURL: want an absolute http(s) URL"))
		}
		c.LimitsURL = strings.TrimRight(c.LimitsURL, "/")
		if c.LimitsTokens == nil {
			c.LimitsTokens = c.Tokens
		}
	}
	if c.AuditURL != "" {
		if _, err := httpurl.Parse(c.AuditURL); err != nil {
			errs = append(errs, errors.New("conformance: AuditURL: want an absolute http(s) URL"))
		}
		c.AuditURL = strings.TrimRight(c.AuditURL, "/")
	}
	for i, a := range c.AuditURLs {
		if _, err := httpurl.Parse(a); err != nil {
			errs = append(errs, errors.New("conformance: AuditURLs: want absolute http(s) URLs"))
		}
		c.AuditURLs[i] = strings.TrimRight(a, "/")
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	q, d := &c.Questions, DefaultQuestions()
	for _, p := range []struct {
		field *string
		def   string
	}{
		{&q.Answer, d.Answer}, {&q.Slow, d.Slow}, {&q.Refusal, d.Refusal}, {&q.Abstention, d.Abstention},
		{&q.CatalogOnly, d.CatalogOnly}, {&q.WrongWinner, d.WrongWinner}, {&q.FollowUpFirst, d.FollowUpFirst}, {&q.FollowUpSecond, d.FollowUpSecond},
	} {
		if *p.field == "" {
			*p.field = p.def
		}
	}
	if c.MaxEvents <= 0 {
		c.MaxEvents = 1000
	}
	if c.OverflowMaxEvents <= 0 {
		c.OverflowMaxEvents = 8
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 10 * time.Second
	}
	if c.SlowWait <= 0 {
		c.SlowWait = 3 * time.Second
	}
	if c.RunTimeout <= 0 {
		c.RunTimeout = 60 * time.Second
	}
	if c.StepMsTolerance <= 0 {
		c.StepMsTolerance = 250 * time.Millisecond
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
