package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/das-ask/ask/gen"
)

// EventsOptions configure one event stream. Zero values mean defaults.
type EventsOptions struct {
	// After resumes after this seq; 0 starts at the first event. When After is set, steps at or
	// before it count as missed in done's Event.MissedSteps, since this stream did not deliver them.
	After int64
}

// Events follows a ticket's events, in order, each once, until done.
//
// The body is read incrementally as the service writes it. When the connection drops, fails or
// goes silent for longer than Options.IdleTimeout, Events reconnects by itself with
// Last-Event-ID after a backoff (see Reconnect), so the caller sees no gap and no duplicate; it
// never reconnects after done. A 401, 404, 400 or other non-transient refusal is final and is
// yielded as an [*APIError]; so is running out of the reconnect budget, so is a connection
// refused or a host name that does not resolve before this client ever had a response from the
// service (nothing listens at the URL: see Retry), and so is ctx ending (ctx.Err()). At most one
// error is yielded, always last. Breaking out of the loop closes the connection; no goroutine
// outlives the iteration.
//
// Events does not cancel the run: a client that is leaving on behalf of a person should call
// Cancel.
func (c *Client) Events(ctx context.Context, ticket string, opts EventsOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		s := &stream{c: c, ticket: ticket, lastSeq: opts.After}
		if opts.After > 0 {
			s.lastID = strconv.FormatInt(opts.After, 10)
		}
		s.run(ctx, yield)
	}
}

// stream is the state of one Events iteration, carried across its connections.
type stream struct {
	c       *Client
	ticket  string
	lastID  string // the SSE last event ID: what Last-Event-ID carries on reconnect
	lastSeq int64  // the highest seq delivered; anything at or below it is a duplicate
	steps   int64  // step events delivered
	retry   time.Duration
}

// connResult is how one connection ended.
type connResult int

const (
	connDone    connResult = iota // done was delivered: finished
	connStopped                   // the consumer stopped, or a final error was yielded
	connRetry                     // transient failure: reconnect
)

func (s *stream) run(ctx context.Context, yield func(Event, error) bool) {
	policy := s.c.opts.Reconnect
	attempt := 0
	for {
		res, floor, cause := s.connect(ctx, yield, &attempt)
		if res != connRetry {
			return
		}
		attempt++
		if attempt > policy.Attempts {
			yield(Event{}, fmt.Errorf("client: event stream for ticket %s: no progress after %d reconnects: %w", s.ticket, policy.Attempts, cause))
			return
		}
		d := backoff(policy, attempt, max(floor, s.retry))
		s.c.log.Info("event stream reconnecting", "ticket", s.ticket, "after", s.lastID, "attempt", attempt, "delay", d, "cause", cause.Error())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			yield(Event{}, ctx.Err())
			return
		case <-t.C:
		}
	}
}

// backoff is the delay before attempt n (from 1): exponential with full jitter, raised to floor
// (the server's "retry" or Retry-After), and never above p.Max: the server's wishes count only
// up to the cap, so a hostile or broken server cannot park the client.
func backoff(p Reconnect, n int, floor time.Duration) time.Duration {
	base := p.Initial
	for i := 1; i < n && base < p.Max; i++ {
		base *= 2
	}
	base = min(base, p.Max)
	return min(max(rand.N(base+1), floor), p.Max)
}

// connect makes one connection and delivers its events. It resets *attempt whenever the cursor
// advances. For connRetry it returns the cause and the least delay the server asked for.
func (s *stream) connect(ctx context.Context, yield func(Event, error) bool, attempt *int) (connResult, time.Duration, error) {
	final := func(err error) (connResult, time.Duration, error) {
		yield(Event{}, err)
		return connStopped, 0, err
	}
	if err := ctx.Err(); err != nil {
		return final(err)
	}
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	var params gen.StreamEventsParams
	if s.lastID != "" {
		id := s.lastID
		params.LastEventID = &id
	}
	resp, err := s.c.raw.StreamEvents(connCtx, s.ticket, &params, acceptEventStream)
	if err != nil {
		var te *tokenError
		switch {
		case ctx.Err() != nil:
			return final(ctx.Err())
		case errors.As(err, &te):
			return final(err)
		case nothingThere(err) && !s.c.reached.Load():
			// Nothing has ever listened at the URL for this client (refused, or no such host):
			// as for the calls (Retry), said at once rather than after the reconnect budget.
			return final(fmt.Errorf("client: event stream for ticket %s: %w", s.ticket, err))
		}
		return connRetry, 0, err
	}
	s.c.reached.Store(true)
	defer func() { _ = resp.Body.Close() }()

	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		apiErr := apiError("streamEvents", resp, body)
		if transient(resp.StatusCode) {
			return connRetry, apiErr.RetryAfter, apiErr
		}
		return final(apiErr)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return final(&protocolError{fmt.Errorf("client: event stream for ticket %s: response is %q, not text/event-stream", s.ticket, mt)})
	}

	var body io.Reader = resp.Body
	// The idle bound counts only while this client waits for the server: paused while the
	// caller holds an event, started again when it returns. Events that came together are
	// handed over from the parser's buffer with no read, and a caller slow with each (under
	// the bound each, over it together) had the connection cut as silent while the server's
	// keep-alives waited unread (a review's finding).
	pause, resume := func() {}, func() {}
	if idle := s.c.opts.IdleTimeout; idle > 0 {
		// Any byte read is a sign of life, not only a whole line: an event arriving slowly
		// (a large one on a slow link, a byte at a time) was cut as silent once a line took
		// longer than the idle bound, however steadily its bytes came, and one slower than
		// that on every connection was never delivered (a fault-injecting relay's finding).
		watchdog := time.AfterFunc(idle, cancel)
		defer watchdog.Stop()
		resume = func() { watchdog.Reset(idle) }
		pause = func() { watchdog.Stop() }
		body = aliveReader{resp.Body, resume}
	}

	p := newSSEParser(body, s.lastID, s.c.opts.MaxEventSize)
	for {
		f, err := p.Next()
		s.lastID = p.LastID()
		if d, ok := p.Retry(); ok {
			s.retry = d
		}
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return final(ctx.Err())
			case errors.Is(err, errFrameTooLarge):
				return final(&protocolError{err})
			case errors.Is(err, io.EOF):
				return connRetry, 0, io.ErrUnexpectedEOF
			case connCtx.Err() != nil:
				return connRetry, 0, errors.New("event stream silent for longer than the idle timeout")
			}
			return connRetry, 0, err
		}
		ev, err := decodeEvent(f)
		if err != nil {
			return final(&protocolError{err})
		}
		if ev.Seq > 0 {
			if ev.Seq <= s.lastSeq {
				continue // already delivered; a replay never shows it twice
			}
			s.lastSeq = ev.Seq
			*attempt = 0
		}
		switch v := ev.Value.(type) {
		case gen.StepEvent:
			s.steps++
		case gen.DoneEvent:
			ev.MissedSteps = max(0, v.Steps-s.steps)
			yield(ev, nil)
			return connDone, 0, nil
		}
		pause()
		if !yield(ev, nil) {
			return connStopped, 0, nil
		}
		resume()
	}
}

// acceptEventStream asks for the stream's media type.
func acceptEventStream(_ context.Context, req *http.Request) error {
	req.Header.Set("Accept", "text/event-stream")
	return nil
}

// aliveReader is r, calling alive after every read that returned bytes.
type aliveReader struct {
	r     io.Reader
	alive func()
}

func (a aliveReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.alive()
	}
	return n, err
}
