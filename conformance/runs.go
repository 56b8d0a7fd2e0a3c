package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/das-ask/ask/gen"
)

// run is one ask followed to its end.
type run struct {
	label    string
	who      Identity
	question string
	conv     string
	ticket   gen.Ticket
	// bound is the target's DAS_ASK_MAX_EVENTS, as configured for the suite.
	bound int
	// sent and admitted are when the ask was sent and when its 202 arrived.
	sent, admitted time.Time
	// live is the stream read from the start while the run worked.
	live *capture
	// final is the stream read from the start after done: what the service retains.
	final *capture
	// status is GET /v1/asks/{ticket} after done; statusBody its body as sent.
	status     *gen.AskStatus
	statusCode int
	statusBody []byte
}

// conversation opens a conversation as who.
func (s *session) conversation(ctx context.Context, who Identity) (string, error) {
	tok, err := s.token(ctx, who)
	if err != nil {
		return "", err
	}
	resp, err := s.api.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{}, bearer(tok))
	if err != nil {
		return "", fmt.Errorf("create a conversation: %w", err)
	}
	if resp.StatusCode() != http.StatusCreated || resp.JSON201 == nil || resp.JSON201.Id == "" {
		return "", fmt.Errorf("create a conversation: status %d, want 201 with an id", resp.StatusCode())
	}
	return resp.JSON201.Id, nil
}

// ask puts a question as who in conv and returns the admitted run (not yet followed).
func (s *session) ask(ctx context.Context, label string, who Identity, conv, question string) (*run, error) {
	tok, err := s.token(ctx, who)
	if err != nil {
		return nil, err
	}
	r := &run{label: label, who: who, question: question, conv: conv, bound: s.cfg.MaxEvents, sent: time.Now()}
	resp, err := s.api.CreateAskWithResponse(ctx, conv, nil, gen.AskRequest{Question: question}, bearer(tok))
	r.admitted = time.Now()
	if err != nil {
		return nil, fmt.Errorf("ask (%s): %w", label, err)
	}
	if resp.StatusCode() != http.StatusAccepted || resp.JSON202 == nil || resp.JSON202.Ticket == "" {
		return nil, fmt.Errorf("ask (%s): status %d, want 202 with a ticket", label, resp.StatusCode())
	}
	r.ticket = *resp.JSON202
	return r, nil
}

// settle reads the retained stream and the status after done, and records the run.
func (s *session) settle(ctx context.Context, r *run) {
	r.final = s.stream(ctx, r.who, r.ticket.Ticket, cursor{}, nil)
	if tok, err := s.token(ctx, r.who); err == nil {
		if resp, err := s.api.GetAskWithResponse(ctx, r.ticket.Ticket, nil, bearer(tok)); err == nil {
			r.status, r.statusCode, r.statusBody = resp.JSON200, resp.StatusCode(), resp.Body
		}
	}
	s.finished(r)
}

// status GETs a ticket's status as who.
func (s *session) status(ctx context.Context, who Identity, ticket string) (*gen.AskStatus, int, error) {
	tok, err := s.token(ctx, who)
	if err != nil {
		return nil, 0, err
	}
	resp, err := s.api.GetAskWithResponse(ctx, ticket, nil, bearer(tok))
	if err != nil {
		return nil, 0, err
	}
	return resp.JSON200, resp.StatusCode(), nil
}

// cancel POSTs a ticket's cancel as who.
func (s *session) cancel(ctx context.Context, who Identity, ticket string) (*gen.CancelAskResponse, error) {
	tok, err := s.token(ctx, who)
	if err != nil {
		return nil, err
	}
	return s.api.CancelAskWithResponse(ctx, ticket, bearer(tok))
}

// fullRun asks in conv (a new conversation when "") and follows the run to its end.
func (s *session) fullRun(ctx context.Context, label string, who Identity, conv, question string) (*run, error) {
	if conv == "" {
		c, err := s.conversation(ctx, who)
		if err != nil {
			return nil, err
		}
		conv = c
	}
	r, err := s.ask(ctx, label, who, conv, question)
	if err != nil {
		return nil, err
	}
	r.live = s.stream(ctx, who, r.ticket.Ticket, cursor{}, nil)
	s.settle(ctx, r)
	return r, nil
}

// normalRun is A asking the answer question, followed to the end.
func (s *session) normalRun(ctx context.Context) (*run, error) {
	return s.normal.get(ctx, func(ctx context.Context) (*run, error) {
		return s.fullRun(ctx, "answer", A, "", s.cfg.Questions.Answer)
	})
}

// slowRun is A asking the slow question, with everything that must be tried while a run is
// open done during its silent first model turn.
type slowRun struct {
	run *run
	// firstAt is when the first event arrived on the live stream.
	firstAt time.Time
	// byHeader resumed after seq 1 with Last-Event-ID, byQuery with ?after=1, while running.
	byHeader, byQuery *capture
	// conflict is a second ask in the same conversation while the run was open.
	conflictCode int
	conflict     *gen.Problem
	conflictErr  error
	// running is A's status while the run was open.
	running     *gen.AskStatus
	runningCode int
	// foreign is B's view of A's open ticket; foreignAsk is B asking in A's conversation while
	// the run is open (a busy conversation is no more B's than an idle one).
	foreign    foreignCalls
	foreignAsk rawCall
	foreignErr error
	// dropped is a stream A closed after its first event: the run must go on.
	dropped *capture
	// waited is A's status with Prefer: wait=1 while the run was open.
	waited        *gen.AskStatus
	waitedCode    int
	waitedApplied string
	waitedFor     time.Duration
}

// foreignCalls are the calls of B (or of A's oid in another tenant) on a ticket the caller does
// not own (or that does not exist).
type foreignCalls struct {
	events *capture
	// beyondByHeader and beyondByQuery ask for the events after seq 999, past the ticket's
	// last: the owner would get 400, so anyone else must get the 404 of a missing ticket.
	beyondByHeader, beyondByQuery *capture
	// headEvents and headStatus are HEAD on the events and the status (RFC 9110: answered as GET).
	headEvents, headStatus headCall
	statusCode             int
	statusBody             []byte
	statusHeader           http.Header
	// waited is GET status with Prefer: wait (preferWaitForeign), and how long it took: to
	// anyone but the owner a running ticket is as missing as one that never existed, so the
	// 404 comes at once, not when the run ends.
	waitedCode   int
	waitedBody   []byte
	waitedHeader http.Header
	waitedTook   time.Duration
	cancelCode   int
	cancelBody   []byte
	cancelHeader http.Header
	err          error
}

func (s *session) slowRunFixture(ctx context.Context) (*slowRun, error) {
	return s.slow.get(ctx, func(ctx context.Context) (*slowRun, error) {
		r, conv, firstAt, done, err := s.askSlow(ctx, "slow", nil)
		if err != nil {
			return nil, err
		}
		sr := &slowRun{run: r, firstAt: firstAt}
		var wg sync.WaitGroup
		wg.Go(func() { sr.byHeader = s.stream(ctx, A, r.ticket.Ticket, cursor{header: "1"}, nil) })
		wg.Go(func() { sr.byQuery = s.stream(ctx, A, r.ticket.Ticket, cursor{query: "1"}, nil) })
		wg.Go(func() { sr.foreign = s.foreignView(ctx, B, r.ticket.Ticket) })
		wg.Go(func() {
			sr.foreignAsk, sr.foreignErr = s.do(ctx, B, http.MethodPost, "/v1/conversations/"+conv+"/asks", []byte(`{"question":`+strconv.Quote(s.cfg.Questions.Answer)+`}`), nil)
		})
		wg.Go(func() { sr.running, sr.runningCode, _ = s.status(ctx, A, r.ticket.Ticket) })
		wg.Go(func() {
			sr.dropped = s.stream(ctx, A, r.ticket.Ticket, cursor{}, func(c *capture) bool { return len(c.Events) > 0 })
		})
		wg.Go(func() { s.preferWait(ctx, sr) })
		wg.Go(func() {
			tok, err := s.token(ctx, A)
			if err != nil {
				sr.conflictErr = err
				return
			}
			resp, err := s.api.CreateAskWithResponse(ctx, conv, nil, gen.AskRequest{Question: s.cfg.Questions.Answer}, bearer(tok))
			if err != nil {
				sr.conflictErr = err
				return
			}
			sr.conflictCode, sr.conflict = resp.StatusCode(), resp.ApplicationproblemJSON409
		})
		wg.Wait()
		<-done
		s.settle(ctx, r)
		return sr, nil
	})
}

// tenantRun is A asking the slow question, seen while it runs by A's oid in another tenant: a
// run of its own, so that a target that lets that token cancel A's work cancels this run, not
// the slow run the other checks examine.
type tenantRun struct {
	run     *run
	foreign foreignCalls
}

func (s *session) tenantRunFixture(ctx context.Context) (*tenantRun, error) {
	return s.tenant.get(ctx, func(ctx context.Context) (*tenantRun, error) {
		r, _, _, done, err := s.askSlow(ctx, "slow, seen from another tenant", nil)
		if err != nil {
			return nil, err
		}
		tr := &tenantRun{run: r, foreign: s.foreignView(ctx, otherTenant, r.ticket.Ticket)}
		<-done
		s.settle(ctx, r)
		return tr, nil
	})
}

// askSlow asks the slow question as A in a new conversation, naming the run name, and reads its
// live stream into r.live in the background. It returns once the first event has arrived, or
// the stream has ended without one: that is, during the silent wait. firstAt is that event's
// time (zero without one); done is closed when the live stream ends.
//
// It returns once the live stream has its first event, or, with ready, once ready says the
// capture so far is what the caller waits for (the stream's end returns too).
func (s *session) askSlow(ctx context.Context, name string, ready func(*capture) bool) (r *run, conv string, firstAt time.Time, done <-chan struct{}, err error) {
	conv, err = s.conversation(ctx, A)
	if err != nil {
		return nil, "", time.Time{}, nil, err
	}
	r, err = s.ask(ctx, name, A, conv, s.cfg.Questions.Slow)
	if err != nil {
		return nil, "", time.Time{}, nil, err
	}
	first := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		signalled := false
		r.live = s.stream(ctx, A, r.ticket.Ticket, cursor{}, func(c *capture) bool {
			if !signalled && len(c.Events) > 0 && (ready == nil || ready(c)) {
				signalled = true
				firstAt = c.Events[0].At
				close(first)
			}
			return false
		})
		if !signalled {
			close(first)
		}
	}()
	<-first
	return r, conv, firstAt, ended, nil
}

// foreignView is who's events, status and cancel calls on ticket.
func (s *session) foreignView(ctx context.Context, who Identity, ticket string) foreignCalls {
	var f foreignCalls
	tok, err := s.token(ctx, who)
	if err != nil {
		f.err = err
		return f
	}
	// First, while a running ticket is surely still running.
	wait := preferWaitForeign
	start := time.Now()
	wr, err := s.api.GetAskWithResponse(ctx, ticket, &gen.GetAskParams{Prefer: &wait}, bearer(tok))
	if err != nil {
		f.err = err
		return f
	}
	f.waitedTook = time.Since(start)
	f.waitedCode, f.waitedBody, f.waitedHeader = wr.StatusCode(), wr.Body, wr.HTTPResponse.Header
	f.events = s.stream(ctx, who, ticket, cursor{}, nil)
	f.beyondByHeader = s.stream(ctx, who, ticket, cursor{header: beyondCursor}, nil)
	f.beyondByQuery = s.stream(ctx, who, ticket, cursor{query: beyondCursor}, nil)
	if f.headEvents, err = s.head(ctx, who, "/v1/asks/"+ticket+"/events"); err != nil {
		f.err = err
		return f
	}
	if f.headStatus, err = s.head(ctx, who, "/v1/asks/"+ticket); err != nil {
		f.err = err
		return f
	}
	st, err := s.api.GetAskWithResponse(ctx, ticket, nil, bearer(tok))
	if err != nil {
		f.err = err
		return f
	}
	f.statusCode, f.statusBody, f.statusHeader = st.StatusCode(), st.Body, st.HTTPResponse.Header
	cn, err := s.api.CancelAskWithResponse(ctx, ticket, bearer(tok))
	if err != nil {
		f.err = err
		return f
	}
	f.cancelCode, f.cancelBody, f.cancelHeader = cn.StatusCode(), cn.Body, cn.HTTPResponse.Header
	return f
}

// preferWaitForeign is the Prefer a foreign caller sends on a ticket's status.
const preferWaitForeign = "wait=5"

// beyondCursor is a cursor past the last seq of every run the suite makes.
const beyondCursor = "999"

// headCall is the answer to a HEAD.
type headCall struct {
	status int
	header http.Header
	// body is how many bytes came after the head: none is allowed.
	body int
}

// head sends HEAD to path (below the base URL) as who. It is not recorded: its response has
// the head of a body that is not there.
func (s *session) head(ctx context.Context, who Identity, path string) (headCall, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, s.cfg.BaseURL+path, nil)
	if err != nil {
		return headCall{}, err
	}
	tok, err := s.token(ctx, who)
	if err != nil {
		return headCall{}, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return headCall{}, fmt.Errorf("HEAD %s: %w", path, err)
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return headCall{status: resp.StatusCode, header: resp.Header, body: int(n)}, nil
}

// ghostCalls are B's (or another caller's) calls on a ticket and a conversation that never
// existed.
type ghostCalls struct {
	ticket, conv string
	calls        foreignCalls
	askCode      int
	askBody      []byte
	askHeader    http.Header
	// convGets are GETs on the conversation and on its asks (neither an operation of the
	// contract): what they answer, they answer alike for everyone's conversation and for none.
	convGets []unrecorded
}

// unrecorded is the answer to a request the suite makes outside the contract (not recorded
// for the checks of every response).
type unrecorded struct {
	what   string
	status int
	header http.Header
	body   []byte
}

// convPaths are the GETs on a conversation that the contract does not offer.
func convPaths(conv string) []string {
	return []string{"/v1/conversations/" + conv, "/v1/conversations/" + conv + "/asks"}
}

// getUnrecorded GETs path (below the base URL) as who without recording the answer.
func (s *session) getUnrecorded(ctx context.Context, who Identity, path string) (unrecorded, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.BaseURL+path, nil)
	if err != nil {
		return unrecorded{}, err
	}
	tok, err := s.token(ctx, who)
	if err != nil {
		return unrecorded{}, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return unrecorded{}, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return unrecorded{}, fmt.Errorf("GET %s: %w", path, err)
	}
	return unrecorded{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// convGets GETs each of convPaths(conv) as who.
func (s *session) convGets(ctx context.Context, who Identity, conv string) ([]unrecorded, error) {
	var out []unrecorded
	for i, p := range convPaths(conv) {
		u, err := s.getUnrecorded(ctx, who, p)
		if err != nil {
			return nil, err
		}
		u.what = []string{"GET the conversation", "GET its asks"}[i]
		out = append(out, u)
	}
	return out, nil
}

// ghostFixture is who's (B's or otherTenant's) calls on a ticket and a conversation that never
// existed.
func (s *session) ghostFixture(ctx context.Context, who Identity) (*ghostCalls, error) {
	m := &s.ghost
	if who == otherTenant {
		m = &s.ghostOther
	}
	return m.get(ctx, func(ctx context.Context) (*ghostCalls, error) {
		g := &ghostCalls{ticket: "tk_" + randomHex(), conv: "cv_" + randomHex()}
		g.calls = s.foreignView(ctx, who, g.ticket)
		if g.calls.err != nil {
			return nil, g.calls.err
		}
		tok, err := s.token(ctx, who)
		if err != nil {
			return nil, err
		}
		resp, err := s.api.CreateAskWithResponse(ctx, g.conv, nil, gen.AskRequest{Question: s.cfg.Questions.Answer}, bearer(tok))
		if err != nil {
			return nil, err
		}
		g.askCode, g.askBody, g.askHeader = resp.StatusCode(), resp.Body, resp.HTTPResponse.Header
		if g.convGets, err = s.convGets(ctx, who, g.conv); err != nil {
			return nil, err
		}
		return g, nil
	})
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cancelRun is A asking the slow question and cancelling it during the silent wait.
type cancelRun struct {
	run *run
	// answered is when the first cancel's response arrived.
	answered time.Time
	// before is the ticket's last_seq read just before the cancel was sent: the events up to it
	// were in the log before the cancel, whenever the stream delivers them (the supervisor
	// branch's open, written with the ticket, may reach the client after the cancel's answer).
	before int64
	first  *gen.CancelAskResponse
	second *gen.CancelAskResponse
	err    error
}

// logged reports whether e was in the log before the cancel was sent (whenever the stream
// delivered it).
func (cr *cancelRun) logged(e event) bool { return e.Seq <= cr.before }

func (s *session) cancelRunFixture(ctx context.Context) (*cancelRun, error) {
	return s.cancelled.get(ctx, func(ctx context.Context) (*cancelRun, error) {
		r, _, _, done, err := s.askSlow(ctx, "cancelled", s.branchesOpened)
		if err != nil {
			return nil, err
		}
		cr := &cancelRun{run: r}
		st, _, err := s.status(ctx, A, r.ticket.Ticket)
		if err != nil {
			return nil, err
		}
		if st != nil {
			cr.before = st.LastSeq
		}
		cr.first, cr.err = s.cancel(ctx, A, r.ticket.Ticket)
		cr.answered = time.Now()
		if cr.err == nil {
			cr.second, cr.err = s.cancel(ctx, A, r.ticket.Ticket)
		}
		<-done
		s.settle(ctx, r)
		return cr, nil
	})
}

func askBody(q string) gen.AskRequest { return gen.AskRequest{Question: q} }

// preferWait GETs the slow run's status with Prefer: wait=1.
func (s *session) preferWait(ctx context.Context, sr *slowRun) {
	tok, err := s.token(ctx, A)
	if err != nil {
		return
	}
	wait := "wait=1"
	start := time.Now()
	resp, err := s.api.GetAskWithResponse(ctx, sr.run.ticket.Ticket, &gen.GetAskParams{Prefer: &wait}, bearer(tok))
	sr.waitedFor = time.Since(start)
	if err != nil {
		return
	}
	sr.waited, sr.waitedCode = resp.JSON200, resp.StatusCode()
	sr.waitedApplied = resp.HTTPResponse.Header.Get("Preference-Applied")
}
