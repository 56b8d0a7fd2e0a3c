package conformance

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/das-ask/ask/gen"
)

// session is one execution of the suite: its clients, what it recorded, and the fixtures (runs
// made once and examined by several checks). Fixtures are made lazily, so a filtered execution
// makes only the runs its checks need.
type session struct {
	cfg Config
	raw *gen.Client
	api *gen.ClientWithResponses
	rec *recorder

	tokA, tokB memo[string]
	tokOther   memo[string]
	contract   memo[*contract]
	normal     memo[*run]
	slow       memo[*slowRun]
	cancelled  memo[*cancelRun]
	ghost      memo[*ghostCalls]
	ghostOther memo[*ghostCalls]
	tenant     memo[*tenantRun]
	refusal    memo[*run]
	abstention memo[*run]
	catalog    memo[*run]
	followUp   memo[[2]*run]
	wrong      memo[*run]
	overflowed memo[*run]
	// overflowAt is the session against OverflowURL that made the overflowed run (set with it).
	overflowAt *session
	lim        limitsFixtures
	idem       memo[*idempotencyRun]
	asB        memo[*run]

	mu   sync.Mutex
	runs []*run
}

func newSession(cfg Config) (*session, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("conformance: BaseURL: %w", err)
	}
	rec := &recorder{basePath: u.Path}
	d := doer{hc: cfg.HTTPClient, rec: rec}
	raw, err := gen.NewClient(cfg.BaseURL, gen.WithHTTPClient(d))
	if err != nil {
		return nil, fmt.Errorf("conformance: client: %w", err)
	}
	api, err := gen.NewClientWithResponses(cfg.BaseURL, gen.WithHTTPClient(d))
	if err != nil {
		return nil, fmt.Errorf("conformance: client: %w", err)
	}
	return &session{cfg: cfg, raw: raw, api: api, rec: rec}, nil
}

// otherTenant is A's oid in another tenant (an OtherTenant token): to the target, a third
// identity, as foreign to A's work as B.
const otherTenant Identity = -1

// token returns who's valid bearer, minted once; otherTenant's is A's OtherTenant token, an
// error wrapping ErrCannotMint when the token source cannot make one.
func (s *session) token(ctx context.Context, who Identity) (string, error) {
	m, as, kind := &s.tokA, who, Valid
	switch who {
	case B:
		m = &s.tokB
	case otherTenant:
		m, as, kind = &s.tokOther, A, OtherTenant
	}
	return m.get(ctx, func(ctx context.Context) (string, error) {
		t, err := s.cfg.Tokens.Token(ctx, as, kind)
		if err == nil && t == "" {
			err = fmt.Errorf("the token source gave identity %s an empty token", who)
		}
		return t, err
	})
}

// String names an identity in details.
func (i Identity) String() string {
	switch i {
	case B:
		return "B"
	case otherTenant:
		return "A in another tenant"
	}
	return "A"
}

// bearer sets the Authorization header.
func bearer(token string) gen.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// finished records a run for the checks that examine every run.
func (s *session) finished(r *run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, r)
}

// allRuns returns every finished run so far, making the plain answer run and the slow run
// first if they are not made yet: the slow run's live stream is the one most likely to carry
// steps when the target retains few events.
func (s *session) allRuns(ctx context.Context) ([]*run, error) {
	if _, err := s.normalRun(ctx); err != nil {
		return nil, err
	}
	if _, err := s.slowRunFixture(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*run(nil), s.runs...), nil
}

// overflowRun is A asking the answer question at OverflowURL, followed to the end; nil when
// there is no OverflowURL.
func (s *session) overflowRun(ctx context.Context) (*run, error) {
	return s.overflowed.get(ctx, func(ctx context.Context) (*run, error) {
		if s.cfg.OverflowURL == "" {
			return nil, nil
		}
		cfg := s.cfg
		cfg.BaseURL, cfg.Tokens, cfg.MaxEvents = cfg.OverflowURL, cfg.OverflowTokens, cfg.OverflowMaxEvents
		o, err := newSession(cfg)
		if err != nil {
			return nil, err
		}
		r, err := o.fullRun(ctx, "answer at OverflowURL", A, "", s.cfg.Questions.Answer)
		if err != nil {
			return nil, fmt.Errorf("at OverflowURL: %w", err)
		}
		s.overflowAt = o
		return r, nil
	})
}
