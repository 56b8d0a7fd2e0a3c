package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// retryMillis is the reconnect delay the stream suggests to clients (`retry:`).
const retryMillis = 2000

// StreamEvents replays the ticket's retained events after the cursor, then follows the log
// live, and closes after done. Replay and live are the same loop over store.Read from the
// last seq written, so there is neither a gap nor a duplicate between them. The stream ends
// when done is written, the caller leaves or the server closes; it never affects the run.
//
// It is a shell over openStream and follow so that the stream waits on a shallow stack: a
// stream parks for minutes under net/http, Echo and the middlewares, and the GC halves a
// parked goroutine's stack only while less than a quarter of it is in use; openStream's
// frame (the ticket, the headers) is gone before follow waits.
func (h *handlers) StreamEvents(c echo.Context, ticket gen.TicketPath, params gen.StreamEventsParams) error {
	out, cursor, err := h.s.openStream(c, ticket, params)
	if out == nil {
		return err
	}
	defer out.end()
	h.s.follow(c.Request().Context(), out, ticket, cursor)
	return nil
}

// openStream checks the caller and the cursor, then sends the stream's headers and opening
// comment. A nil writer means the stream does not go on: err is the problem to answer, or nil
// when the client left before the opening was flushed, or when the request is a HEAD, which
// gets the headers a GET would, after the same checks, and no stream (head.go).
//
//go:noinline
func (s *Server) openStream(c echo.Context, ticket string, params gen.StreamEventsParams) (*sseWriter, int64, error) {
	t, err := s.ownedTicket(c, ticket)
	if err != nil {
		return nil, 0, err
	}
	cursor, err := cursorOf(params, c.QueryParam("after"))
	if err != nil {
		return nil, 0, err
	}
	if cursor > t.LastSeq {
		if t, err = s.awaitCursor(c.Request().Context(), t, cursor); err != nil {
			return nil, 0, err
		}
	}

	w := c.Response()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if c.Request().Method == http.MethodHead {
		return nil, 0, nil
	}
	out := &sseWriter{w: w, rc: http.NewResponseController(w.Writer), pool: &s.sseBufs, timeout: s.opts.StreamWriteTimeout, closed: s.closing}
	out.unwatch = context.AfterFunc(s.streamsCut, out.cut)
	// The opening comment makes proxies pass the headers on at once.
	out.open()
	if err := out.flush(); err != nil {
		out.end()
		return nil, 0, nil
	}
	return out, cursor, nil
}

// follow writes the log after cursor to out until done is written, the client leaves (ctx),
// the store has nothing more for the ticket, or the server closes, with a keep-alive comment
// whenever the stream has been silent for the keep-alive interval.
func (s *Server) follow(ctx context.Context, out *sseWriter, ticket string, cursor int64) {
	keepAlive := time.NewTicker(s.opts.KeepAlive)
	defer keepAlive.Stop()
	closing := false
	sent := false // this stream has written events
	goneRetries := 0
	_, shared := s.store.(store.Shared)
	// A shared store's read is bounded by half the keep-alive interval: a stalled Redis holds
	// a read for its client's timeouts and retries, tens of seconds in all, and keep-alives are
	// written only between reads, so a gateway's idle timeout cut streams mid-stall. Bounded,
	// the stream writes its keep-alive at most half an interval late, and reads again.
	// A read cut at that bound is not taken up again from nothing, though: a Redis that answers
	// each read, only later than the bound (busy, or far away), would then never finish one, and
	// the stream would write keep-alives and no event for ever (patientRead).
	readWithin := max(s.opts.KeepAlive/2, 50*time.Millisecond)
	for {
		var b store.Batch
		var err error
		if shared {
			var ok bool
			if b, err, ok = s.boundedRead(ctx, out, keepAlive, ticket, cursor, readWithin); !ok {
				return
			}
		} else {
			b, err = s.store.Read(ctx, ticket, cursor)
		}
		if (errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
			// The store is away for now (a restart, a pause, a network fault): the log is
			// still there, so the stream stays open, with its keep-alives, and reads again.
			if !s.waitStore(ctx, out, keepAlive) {
				return
			}
			continue
		}
		if errors.Is(err, store.ErrNotFound) && shared && goneRetries < storeGoneRetries && ctx.Err() == nil {
			// The ticket this stream was following is gone mid-run: a store restart lost it,
			// and its runner is restoring it, ended (store.Shared.Restore). Give it a moment,
			// so the stream ends with the end rather than with nothing.
			goneRetries++
			if !s.waitStore(ctx, out, keepAlive) {
				return
			}
			continue
		}
		if err != nil {
			return // evicted, or the store closed: nothing more will come
		}
		for _, ev := range b.Events {
			out.frame(ev)
			cursor = ev.Seq
			if ev.Type == gen.EventTypeDone {
				_ = out.flush()
				return
			}
			if len(out.buf) >= sseChunk {
				if err := out.write(); err != nil {
					return
				}
			}
		}
		if len(b.Events) > 0 {
			sent = true
			if err := out.flush(); err != nil {
				return
			}
			keepAlive.Reset(s.opts.KeepAlive)
		}
		if b.Finished {
			if sent {
				// Finished, done not among what followed the events this stream sent: the
				// log ended at or below them. The store lost writes it had acknowledged,
				// and a replica ended the run after what it kept (a Sentinel failover's
				// window: this stream read the old primary, the run's lease lapsed on the
				// new one). The reader has seen events the log no longer holds.
				s.logShrunk(ticket, cursor)
			}
			return // a cursor at done: nothing follows it
		}
		if closing {
			return
		}
		select {
		case <-b.Changed:
		case <-keepAlive.C:
			out.comment(": keepalive\n\n")
			if err := out.flush(); err != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-s.closing:
			closing = true // deliver what the log holds now, then close
		}
	}
}

// boundedRead is follow's read of a shared store: bounded by within, and, cut at that bound,
// taken up by patientRead; ok is false when the stream ended while it read. It is a function
// of its own, out of line, so that its context and the patient read do not enlarge follow's
// frame (logShrunk says why that matters).
//
//go:noinline
func (s *Server) boundedRead(ctx context.Context, out *sseWriter, keepAlive *time.Ticker, ticket string, cursor int64, within time.Duration) (b store.Batch, err error, ok bool) {
	rctx, cancel := context.WithTimeout(ctx, within)
	b, err = s.store.Read(rctx, ticket, cursor)
	cut := err != nil && rctx.Err() != nil
	cancel()
	if !cut || ctx.Err() != nil {
		return b, err, true
	}
	b, err = s.patientRead(ctx, out, keepAlive, ticket, cursor)
	return b, err, err != errStreamOver
}

// patientRead reads the log after cursor once more, bounded only by ctx (and the store's own
// timeouts), for a read that outlasted follow's bound: the store is slow, or away. The read
// goes on, on a goroutine of its own, while the stream writes its keep-alives on schedule; it
// answers the read's result, or errStreamOver when the stream is over (the client left, a
// write failed, the server is closing), once the read has returned.
func (s *Server) patientRead(ctx context.Context, out *sseWriter, keepAlive *time.Ticker, ticket string, cursor int64) (store.Batch, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		b   store.Batch
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, err := s.store.Read(rctx, ticket, cursor)
		res <- result{b, err}
	}()
	for {
		select {
		case r := <-res:
			if ctx.Err() != nil {
				return store.Batch{}, errStreamOver
			}
			return r.b, r.err
		case <-keepAlive.C:
			out.comment(": keepalive\n\n")
			if out.flush() == nil {
				continue
			}
		case <-ctx.Done():
		case <-s.closing:
		}
		cancel()
		<-res
		return store.Batch{}, errStreamOver
	}
}

// errStreamOver is boundedRead's answer when the stream ended while it read: follow returns.
var errStreamOver = errors.New("the stream is over")

// logShrunk logs a stream's log found finished below the events it had sent (follow). It is
// a function of its own, kept out of line, so that its call's arguments do not enlarge follow's
// frame: an idle stream parks in follow, and a deeper parked stack is one the GC does not
// halve (docs/bench/FINDINGS.md, idle streams: 8 KB per stream).
//
//go:noinline
func (s *Server) logShrunk(ticket string, cursor int64) {
	s.log.Warn("the ticket's log ended below events this stream had sent: the store lost writes it had acknowledged; closing the stream",
		"ticket", ticket, "cursor", cursor)
}

// awaitCursor answers t once its log reaches cursor, or the 400 of a cursor beyond the last
// seq. A shared store that lost a running ticket's last writes (a restart that lost its last
// second, a failover to a replica behind its primary) holds a log shorter than what a reader
// was sent; the ticket's runner restores it, ended after every seq it assigned
// (store.Shared.Restore), once it notices. A reconnection in between reads the ticket again,
// as one to a ticket lost whole does (awaitRestored), rather than answer a 400, at which
// clients stop for good, to a cursor the restored log goes past. A finished ticket, and any
// in a store in this process, answer at once.
//
// When its store lost writes lately (lostWritesLately), the reader of a running ticket is taken
// at its word: the cursor becomes the ticket's floor (store.Floored), so that whoever ends the
// run writes its end after it, and the stream follows from there. Before, a runner that died
// with Redis left its ask to another replica's lease sweep, which ended it after the last seq
// the store kept: at seqs the reader had read, with other events, and the reader resuming
// after them was given done and no terminal (docs/scale-out.md).
func (s *Server) awaitCursor(ctx context.Context, t store.Ticket, cursor int64) (store.Ticket, error) {
	if t.Done == nil && s.floorAt(ctx, t, cursor) {
		return t, nil
	}
	if t.Done == nil {
		nt, err, ok := s.rereadTicket(ctx, t.ID, func(nt store.Ticket, err error) bool {
			return err != nil || nt.Done != nil || cursor <= nt.LastSeq
		})
		if ok && err != nil {
			return t, err // the store away (503), or the ticket gone (404)
		}
		if ok {
			t = nt
		}
	}
	if cursor > t.LastSeq && !(t.Done == nil && s.floorAt(ctx, t, cursor)) {
		return t, badRequest("the cursor is beyond the last event of this ticket")
	}
	return t, nil
}

// floorAt raises running ticket t's floor to cursor, beyond its last seq, when the store lost
// writes lately, and reports whether the floor is at cursor or past it.
func (s *Server) floorAt(ctx context.Context, t store.Ticket, cursor int64) bool {
	fl, ok := s.store.(store.Floored)
	switch {
	case !ok:
		return false
	case cursor <= t.Floor:
		return true // raised already (a resume before, or a replica whose readers had it)
	case !s.lostWritesLately(ctx):
		return false
	}
	rctx, cancel := s.storeBound(ctx)
	defer cancel()
	return fl.RaiseFloor(rctx, t.ID, cursor) == nil
}

// storeRetry is how long a stream waits before reading a store that was unavailable again;
// storeGoneRetries how often it reads again a ticket that vanished mid-stream.
const (
	storeRetry       = 500 * time.Millisecond
	storeGoneRetries = 4
)

// waitStore waits storeRetry, writing a keep-alive if one falls due. It reports false when the
// stream must end: the client left, the server closes or the client cannot be written to.
func (s *Server) waitStore(ctx context.Context, out *sseWriter, keepAlive *time.Ticker) bool {
	retry := time.NewTimer(storeRetry)
	defer retry.Stop()
	for {
		select {
		case <-retry.C:
			return true
		case <-keepAlive.C:
			out.comment(": keepalive\n\n")
			if err := out.flush(); err != nil {
				return false
			}
		case <-ctx.Done():
			return false
		case <-s.closing:
			return false
		}
	}
}

// cursorOf is the stream's starting cursor: Last-Event-ID wins over `after`; neither means 0.
// rawAfter is the query's `after` as sent. The two are one cursor, written one way, as the
// contract's pattern for Last-Event-ID says: 1 to 18 ASCII digits. The validator reads `after`
// as an integer, which would let `+3`, `-0` and 19 digits through; a malformed `after` is
// refused even when the header wins, as one the validator refuses is.
func cursorOf(p gen.StreamEventsParams, rawAfter string) (int64, error) {
	if p.After != nil && !isCursor(rawAfter) {
		return 0, badRequest("after must be a seq: 1 to 18 decimal digits")
	}
	if p.LastEventID != nil {
		if !isCursor(*p.LastEventID) {
			return 0, badRequest("Last-Event-ID must be a seq: 1 to 18 decimal digits")
		}
		return strconv.ParseInt(*p.LastEventID, 10, 64)
	}
	if p.After != nil {
		return *p.After, nil
	}
	return 0, nil
}

// isCursor reports whether s is written as a cursor: 1 to 18 ASCII digits (so it fits an int64).
func isCursor(s string) bool {
	if len(s) == 0 || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// sseWriter frames events into a buffer and writes and flushes it in one go. The buffer is
// borrowed from the server's pool for a batch and given back at its flush, so an idle stream
// holds none. An sseWriter is used by one stream's goroutine only.
type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	pool *sync.Pool // of *[]byte
	box  *[]byte    // what buf was borrowed in; nil when buf is not borrowed
	buf  []byte
	// timeout bounds each write of at most sseWritePiece (0: none): a client that has stopped
	// reading fills the connection's buffers, and the write would otherwise wait for it for
	// good, holding the handler, its buffer and the connection, and writing no keep-alive.
	// Past it the write fails and the stream ends. (net/http clears the deadline once the response is done, so
	// it bounds nothing after the stream on a kept-alive connection.)
	timeout time.Duration
	// closed is closed once the server closes its streams (Shutdown's closing): from then on
	// each write has at most closingWrite, and a write already waiting is cut to that by cut
	// (on Server.streamsCut), which unwatch stops watching for. Before, a client that did not
	// read held its stream, and with it the HTTP server's shutdown, for up to the timeout
	// (60 s) past the end of every run, so that askd, with nothing running, stopped only at
	// its own bound (the grace and 10 s), with an error.
	closed  <-chan struct{}
	unwatch func() bool
}

// closingWrite is how long a stream's write may wait for its client once the server closes:
// a client that reads takes what the log still holds for it, one that does not is let go.
const closingWrite = 2 * time.Second

// bound sets the connection's write deadline for the next write. A writer that cannot take
// deadlines (a test's recorder) writes unbounded.
func (o *sseWriter) bound() {
	d := o.timeout
	select {
	case <-o.closed: // a nil channel (a writer without a server) is never ready
		if d <= 0 || d > closingWrite {
			d = closingWrite
		}
	default:
	}
	if d > 0 {
		_ = o.rc.SetWriteDeadline(time.Now().Add(d))
	}
}

// cut bounds a write under way when the server closes its streams (closed): it runs on a
// goroutine of its own, beside the stream's, which a connection's deadlines allow.
func (o *sseWriter) cut() {
	_ = o.rc.SetWriteDeadline(time.Now().Add(closingWrite))
}

// end is the stream's last act: it stops watching for the server's close and gives the buffer back.
func (o *sseWriter) end() {
	if o.unwatch != nil {
		o.unwatch()
	}
	o.release()
}

// sseBufMax is the largest buffer given back to the pool: a batch is written every sseChunk,
// so a buffer grows past this only for a single event larger than that, which is not kept.
const sseBufMax = 64 << 10

// take makes sure the writer holds a buffer, borrowing one from the pool.
func (o *sseWriter) take() {
	if o.box != nil {
		return
	}
	if b, ok := o.pool.Get().(*[]byte); ok {
		o.box = b
	} else {
		o.box = new([]byte)
	}
	o.buf = (*o.box)[:0]
}

// release gives the buffer back to the pool; the writer holds none until it next frames.
func (o *sseWriter) release() {
	if o.box == nil {
		return
	}
	if cap(o.buf) <= sseBufMax {
		*o.box = o.buf[:0]
		o.pool.Put(o.box)
	}
	o.box, o.buf = nil, nil
}

// open adds the stream's opening comment and its `retry:` suggestion.
func (o *sseWriter) open() {
	o.take()
	o.buf = append(o.buf, ": ask events\nretry: "...)
	o.buf = strconv.AppendInt(o.buf, retryMillis, 10)
	o.buf = append(o.buf, "\n\n"...)
}

// comment adds c, which must be whole SSE comment lines ending in a blank line.
func (o *sseWriter) comment(c string) {
	o.take()
	o.buf = append(o.buf, c...)
}

// frame adds `id:`, `event:` and `data:` lines for ev; its Data is one line of JSON.
func (o *sseWriter) frame(ev store.Event) {
	o.take()
	o.buf = append(o.buf, "id: "...)
	o.buf = strconv.AppendInt(o.buf, ev.Seq, 10)
	o.buf = append(o.buf, "\nevent: "...)
	o.buf = append(o.buf, ev.Type...)
	o.buf = append(o.buf, "\ndata: "...)
	o.buf = append(o.buf, ev.Data...)
	o.buf = append(o.buf, "\n\n"...)
}

// sseChunk bounds what a long batch (a replay, a reader catching up) buffers before it is
// written: the buffer stays small and warm instead of growing to the batch's size.
const sseChunk = 32 << 10

// sseWritePiece is the most one write deadline covers: the timeout lets go of a client that
// takes less than this in StreamWriteTimeout, not of one that takes a large event or batch
// slowly. A deadline over a whole write cut a client reading steadily at any pace below the
// write's size per timeout mid-event (a 1 MB answer: below about 17 KB/s with the default 60 s,
// less what the connection's buffers hold), and again at the same event on each reconnect.
// It is twice a batch's size (sseChunk: a batch is written once it passes that, so it holds
// at most sseChunk and one event), so a batch of events smaller than sseChunk is still one
// write under one deadline, and only a larger event is written in pieces.
const sseWritePiece = 2 * sseChunk

// put writes what is buffered, each piece of it under a deadline of its own.
func (o *sseWriter) put() error {
	b := o.buf
	for { // once, but for an event larger than sseChunk
		n := min(len(b), sseWritePiece)
		o.bound()
		if _, err := o.w.Write(b[:n]); err != nil {
			return err
		}
		if b = b[n:]; len(b) == 0 {
			return nil
		}
	}
}

// write writes what is buffered without flushing; the batch's end flushes.
func (o *sseWriter) write() error {
	err := o.put()
	o.buf = o.buf[:0]
	return err
}

// flush writes what is buffered, flushes it to the client and gives the buffer back; an error
// means the client is gone (or the writer cannot stream) and the stream should end.
func (o *sseWriter) flush() error {
	err := o.put()
	o.release()
	if err != nil {
		return err
	}
	return o.rc.Flush()
}
