package conformance

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/das-ask/ask/gen"
)

// cursor is where a stream is asked to resume: the Last-Event-ID header, the after query
// parameter, or neither. Values are sent as written, so malformed ones can be sent too.
type cursor struct {
	header, query string
}

// capture is everything one GET of a ticket's events delivered.
type capture struct {
	Start  time.Time
	Status int
	Header http.Header
	// Body is the body of a response that is not a stream (an error), read in full.
	Body []byte
	// Events are the event frames in arrival order.
	Events []event
	// Comments are the comment frames; CommentAfter[i] is how many events preceded Comments[i].
	Comments     []frame
	CommentAfter []int
	// Frames counts every frame, events and comments, in order: what arrived after what.
	Frames int
	// IDOnly are the frames that set an id without carrying an event (a keep-alive with an
	// id, say); IDOnlyAfter[i] is how many events preceded IDOnly[i].
	IDOnly      []frame
	IDOnlyAfter []int
	// Retries are the values of the stream's retry fields (the reconnect delay it suggests).
	Retries []string
	// EOF is set when the server ended the stream.
	EOF bool
	// Stopped is set when the suite closed the stream on purpose.
	Stopped bool
	// Err is a transport or read failure, or the run timeout.
	Err error
	// OpenAfterDone is set when the server kept the stream open for doneGrace after done.
	OpenAfterDone bool
}

// doneGrace is how long the server may take to close a stream after done.
const doneGrace = 2 * time.Second

// maxEventsPerCapture bounds one capture: a stream that never ends is a failure, not a hang.
const maxEventsPerCapture = 100000

// stream GETs a ticket's events as who and reads until the server closes the stream, stop
// returns true (checked after every frame; stop may be nil), the server has kept the stream
// open for doneGrace after done, or the run timeout passes.
func (s *session) stream(ctx context.Context, who Identity, ticket string, cur cursor, stop func(*capture) bool) *capture {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RunTimeout)
	defer cancel()
	var sawDone bool
	c := &capture{Start: time.Now()}
	tok, err := s.token(ctx, who)
	if err != nil {
		c.Err = err
		return c
	}
	editors := []gen.RequestEditorFn{bearer(tok)}
	if cur.query != "" {
		editors = append(editors, func(_ context.Context, r *http.Request) error {
			q := r.URL.Query()
			q.Set("after", cur.query)
			r.URL.RawQuery = q.Encode()
			return nil
		})
	}
	var params gen.StreamEventsParams
	if cur.header != "" {
		params.LastEventID = &cur.header
	}
	resp, err := s.raw.StreamEvents(ctx, ticket, &params, editors...)
	if err != nil {
		c.Err = err
		return c
	}
	defer resp.Body.Close()
	c.Status, c.Header = resp.StatusCode, resp.Header
	if resp.StatusCode != http.StatusOK {
		c.Body, c.Err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return c
	}
	rd := newSSEReader(resp.Body, time.Now)
	defer func() { c.Retries = rd.retries }()
	for {
		f, err := rd.next()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				c.EOF = true
			case sawDone && ctx.Err() != nil:
				c.OpenAfterDone = true
			case ctx.Err() != nil:
				c.Err = errors.New("the stream was still open when the run timeout passed")
			default:
				c.Err = err
			}
			break
		}
		c.Frames++
		if f.IDOnly {
			c.IDOnly = append(c.IDOnly, f)
			c.IDOnlyAfter = append(c.IDOnlyAfter, len(c.Events))
		} else if f.Comment {
			s.rec.comment(ticket, f.Text)
			c.Comments = append(c.Comments, f)
			c.CommentAfter = append(c.CommentAfter, len(c.Events))
		} else {
			e := decodeEvent(f)
			c.Events = append(c.Events, e)
			s.rec.event(e)
			if e.Type == "done" && !sawDone {
				sawDone = true
				t := time.AfterFunc(doneGrace, cancel)
				defer t.Stop()
			}
		}
		if len(c.Events) >= maxEventsPerCapture {
			c.Err = errors.New("the stream carried more than 100000 events")
			break
		}
		if stop != nil && stop(c) {
			c.Stopped = true
			break
		}
	}
	return c
}
