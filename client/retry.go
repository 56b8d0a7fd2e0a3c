package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/das-ask/ask/gen"
)

// Retry is how the client retries a call (create, status, cancel) that failed in a way a retry
// can cure: a connection error, no response headers within Options.HeaderTimeout, a 502, 503
// or 504 from the service or a gateway, or a 409 saying an earlier attempt with the same
// Idempotency-Key is still in progress. The creating calls carry an Idempotency-Key, the same
// on every attempt, so a retry never makes a second conversation or ticket; status is a read
// and cancel is idempotent. Backoff is exponential with full jitter, capped, and never shorter
// than the service's Retry-After. Every retry is logged (Options.Logger): never silently.
//
// A Retry-After longer than MaxRetryAfter, or one that would end after ctx's deadline, is not
// waited for: the call ends at once with the *APIError, whose RetryAfter says when to try
// again. A retry sooner would be refused again, and a wait the caller cannot see the end of
// (an hour, or past its own deadline, which would then read as a service that never answered)
// is worse than the refusal said now.
//
// A create that fails for good after an attempt of it was sent and its reply lost matches
// ErrMayHaveBeenMade as well as what ended it: the service may have made it all the same. An
// attempt net/http sends again by itself (it does so for a request with an Idempotency-Key whose
// reused connection failed after it was written) counts as such, and is logged as a retry is.
//
// A connection refused, or a host name that does not resolve, before this client has ever had
// a response from the service is final: nothing listens at the URL (the service is not running,
// or the URL is wrong), and the caller hears so at once. Once the service has answered, a
// refusal is a restart in progress and is retried; so, always, is a lookup that failed for want
// of an answer from the resolver.
type Retry struct {
	// Initial is the backoff before the first retry. 0 means 250 ms.
	Initial time.Duration
	// Max caps the backoff. 0 means 5 s. A longer Retry-After is honoured, not capped: a call
	// retried sooner than the service asked would be refused again.
	Max time.Duration
	// Attempts is how many times a call is tried in all. 0 means 8; 1 means no retry.
	Attempts int
	// MaxRetryAfter is the longest Retry-After a call waits for before its retry; a longer one
	// ends the call at once with its *APIError. 0 means 60 s.
	MaxRetryAfter time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Initial <= 0 {
		r.Initial = 250 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 5 * time.Second
	}
	if r.Max < r.Initial {
		r.Max = r.Initial
	}
	if r.Attempts <= 0 {
		r.Attempts = 8
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = 60 * time.Second
	}
	return r
}

// DefaultHeaderTimeout is Options.HeaderTimeout's default.
const DefaultHeaderTimeout = 15 * time.Second

// problemIdemBusy is the problem type of a 409 for a key whose first request is in progress.
const problemIdemBusy = "urn:ask:problem:idempotency-key-in-progress"

// newIdempotencyKey is a fresh key, as the draft's Structured Field string.
func newIdempotencyKey() string { return `"` + rand.Text() + `"` }

// errHeaderTimeout is the cause of a request cut for want of response headers.
var errHeaderTimeout = errors.New("client: no response headers within the header timeout")

// retrying calls call until it succeeds, fails for good, or runs out of attempts. call returns
// its response (nil when there was none) and any transport error; done reports whether a
// response is final (success, or a refusal a retry cannot cure).
func retrying[T any](ctx context.Context, c *Client, op string, call func(context.Context) (T, *http.Response, []byte, error)) (T, error) {
	p := c.opts.Retry
	var zero T
	// lost: an attempt of a create was sent and its reply lost, so the service may have acted
	// on it; a failure that ends the call then says so (ErrMayHaveBeenMade).
	lost := false
	creates := op == "createAsk" || op == "createConversation"
	fail := func(err error) (T, error) {
		if lost && creates {
			return zero, &mayHaveBeenMade{err: err}
		}
		return zero, err
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			// Nothing is sent with a ctx that has ended: this attempt cannot have made anything.
			return fail(fmt.Errorf("ask %s: %w", op, err))
		}
		actx, writes := ctx, new(writeCounter)
		if creates {
			// Traced by the client's doer (traceWrites), so that only this request's writes
			// count: not those of a TokenSource that fetches its token with ctx.
			actx = context.WithValue(ctx, writesKey{}, writes)
		}
		v, resp, body, err := call(actx)
		if resp != nil {
			c.reached.Store(true)
		}
		if writes.resentUnanswered() {
			// net/http sent the request again by itself, as it does for one with an
			// Idempotency-Key whose reused connection failed after it was written: the first
			// one's reply was lost.
			lost = true
			c.log.Info("request retried by the transport", "op", op, "attempt", attempt, "cause", "the connection failed after the request was sent")
		}
		if err == nil && !retryableStatus(resp, body) {
			// Answered: a success, or a refusal the caller turns into its APIError. It stands
			// even if ctx ended as it came: a ticket the service issued must reach the caller,
			// who may have to cancel it.
			if lost && resp != nil && resp.StatusCode >= 300 {
				return fail(apiError(op, resp, body))
			}
			return v, nil
		}
		lost = lost || (err != nil && writes.maySent(err))
		if ctx.Err() != nil {
			return fail(fmt.Errorf("ask %s: %w", op, ctx.Err()))
		}
		var tokErr *tokenError
		var unexp *UnexpectedResponseError
		floor, cause := time.Duration(0), err
		switch {
		case err != nil && errors.As(err, &tokErr):
			return fail(fmt.Errorf("ask %s: %w", op, err))
		case err != nil && errors.As(err, &unexp):
			return fail(err)
		case err != nil && nothingThere(err) && !c.reached.Load():
			return fail(fmt.Errorf("ask %s: %w", op, err))
		case err != nil:
			// the connection failed, or no headers came in time: retried
		default: // a status a retry can cure (retryableStatus)
			ae := apiError(op, resp, body)
			floor, cause = ae.RetryAfter, ae
		}
		if attempt >= p.Attempts {
			if err != nil {
				return fail(fmt.Errorf("ask %s: %w", op, err))
			}
			return fail(cause)
		}
		if floor > 0 && (floor > p.MaxRetryAfter || pastDeadline(ctx, floor)) {
			// Asked to come back later than this call can wait: the refusal, with its
			// Retry-After, is the answer (see Retry).
			return fail(cause)
		}
		d := max(backoff(Reconnect{Initial: p.Initial, Max: p.Max}, attempt, 0), floor)
		c.log.Info("request retrying", "op", op, "attempt", attempt+1, "delay", d, "cause", cause.Error())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fail(fmt.Errorf("ask %s: %w", op, ctx.Err()))
		case <-t.C:
		}
	}
}

// writesKey is the context key of a create attempt's *writeCounter.
type writesKey struct{}

// writeCounter counts the writes of one attempt's request and the responses to them.
type writeCounter struct {
	mu                sync.Mutex
	writes, responses int
	resent            bool // a write came after one that had no response
	traced            bool // the transport reports its connections (net/http's does)
	tried             bool // the transport wrote the request, or began to
}

func (w *writeCounter) getConn(string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.traced = true
}

func (w *writeCounter) wrote(info httptrace.WroteRequestInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tried = true
	if info.Err != nil {
		return
	}
	if w.writes > w.responses {
		w.resent = true
	}
	w.writes++
}

// maySent reports whether the attempt that failed with err may have reached the service. When
// the transport traced the attempt, only a request it wrote (or began to) may have: one that
// never had a connection (a dial that hung until the header timeout cut it) did not. Beyond
// that the error tells, as far as it can (the package's maySent: one that was answered, by
// something that is not the service, was not lost).
func (w *writeCounter) maySent(err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.traced && !w.tried {
		return false
	}
	return maySent(err) // a request written may still have been answered (by something else)
}

func (w *writeCounter) answered() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.responses++
}

// resentUnanswered reports whether the request was written again after a write that had no
// response (net/http's own retry); a redirect followed is a write after a response.
func (w *writeCounter) resentUnanswered() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resent
}

// traceWrites is the HTTP doer that traces the writes of a request whose context holds a
// *writeCounter. It runs after the request editors, so a TokenSource's own requests, made with
// the same context, are not the create's.
type traceWrites struct{ next gen.HttpRequestDoer }

func (t traceWrites) Do(req *http.Request) (*http.Response, error) {
	if w, ok := req.Context().Value(writesKey{}).(*writeCounter); ok {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GetConn:              w.getConn,
			WroteRequest:         w.wrote,
			GotFirstResponseByte: w.answered,
		}))
	}
	return t.next.Do(req)
}

// maySent reports whether a request that failed with err may have reached the service: any
// failure but the caller's token and a connection never made (refused, or a dial that failed).
func maySent(err error) bool {
	var tokErr *tokenError
	var opErr *net.OpError
	var unexp *UnexpectedResponseError
	switch {
	case errors.As(err, &tokErr), errors.As(err, &unexp), errors.Is(err, syscall.ECONNREFUSED):
		return false
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return false
	}
	return true
}

// nothingThere reports whether err says that nothing is at the URL: the connection was refused,
// or the host name does not resolve (not a resolver that failed to answer, which may pass).
func nothingThere(err error) bool {
	var dnsErr *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &dnsErr) && dnsErr.IsNotFound)
}

// pastDeadline reports whether a wait of d would end after ctx's deadline.
func pastDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < d
}

// retryableStatus: 502, 503, 504, and the 409 of an Idempotency-Key still in progress.
func retryableStatus(resp *http.Response, body []byte) bool {
	if resp == nil {
		return false
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		ae := apiError("", resp, body)
		return ae.Problem != nil && ae.Problem.Type == problemIdemBusy
	}
	return false
}

// headerTimeout is the HTTP doer that cuts a request whose response headers do not come
// within d (plus the wait a `Prefer: wait=N` asks the service to hold the call), so a frozen
// replica or gateway costs seconds; the body, once headers came, is not bounded (a stream
// stays open as long as its run).
type headerTimeout struct {
	next gen.HttpRequestDoer
	d    time.Duration
}

func (h headerTimeout) Do(req *http.Request) (*http.Response, error) {
	d := h.d + preferWait(req.Header.Get("Prefer"))
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(d, func() { cancel(errHeaderTimeout) })
	resp, err := h.next.Do(req.WithContext(ctx))
	if !timer.Stop() {
		if resp != nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, fmt.Errorf("%w (%v)", errHeaderTimeout, d)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// preferWait is the wait a Prefer header asks for ("wait=N"), or 0.
func preferWait(h string) time.Duration {
	for _, pref := range strings.Split(h, ",") {
		tok, _, _ := strings.Cut(pref, ";")
		name, val, ok := strings.Cut(strings.TrimSpace(tok), "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "wait") {
			if n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`)); err == nil && n > 0 {
				return time.Duration(n) * time.Second
			}
		}
	}
	return 0
}
