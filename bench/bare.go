package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/gen"
)

// bareTicketHandler is the time-to-ticket baseline: the createAsk route on a bare Echo, behind
// the same bearer validation as the service (an ask.Authenticator, the identity put in the
// request context), answering a constant 202 ticket. It is the most a ticket can cost on this
// machine with this router, this validation and this client.
func bareTicketHandler(v ask.Authenticator, basePath string) http.Handler {
	now := time.Now().UTC()
	body, _ := json.Marshal(gen.Ticket{
		Ticket:         "t_" + rand.Text(),
		ConversationId: "c_" + rand.Text(),
		EventsUrl:      "/v1/asks/t_x/events",
		StatusUrl:      "/v1/asks/t_x",
		CancelUrl:      "/v1/asks/t_x/cancel",
		CreatedAt:      now,
	})
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	authn := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			token, ok := auth.BearerToken(req)
			if !ok {
				auth.WriteUnauthorized(c.Response(), req, nil)
				return nil
			}
			id, err := v.Authenticate(req.Context(), token)
			if err != nil {
				auth.WriteUnauthorized(c.Response(), req, err)
				return nil
			}
			c.SetRequest(req.WithContext(auth.WithIdentity(req.Context(), id)))
			return next(c)
		}
	}
	e.POST(basePath+"/v1/conversations/:conversation_id/asks", func(c echo.Context) error {
		return c.JSONBlob(http.StatusAccepted, body)
	}, authn)
	return e
}

// appendStepFrame appends step event seq (1-based) as one SSE frame, encoded from its struct
// exactly as the service encodes it: the body through json.Marshal, the envelope around it,
// the body's fields spliced in.
func appendStepFrame(d []byte, seq int, ticket, conv string, ts time.Time) []byte {
	body, _ := json.Marshal(sampleStep(seq - 1))
	s := strconv.Itoa(seq)
	d = append(d, "id: "...)
	d = append(d, s...)
	d = append(d, "\nevent: step\ndata: {\"seq\":"...)
	d = append(d, s...)
	d = append(d, `,"ticket":"`...)
	d = append(d, ticket...)
	d = append(d, `","conversation_id":"`...)
	d = append(d, conv...)
	d = append(d, `","ts":"`...)
	d = ts.UTC().AppendFormat(d, time.RFC3339Nano)
	d = append(d, `","type":"step",`...)
	d = append(d, body[1:]...)
	return append(d, "\n\n"...)
}

// stepFrames are n SSE frames of step events (seq 1..n), pre-encoded.
func stepFrames(n int) [][]byte {
	ticket, conv := "t_"+rand.Text(), "c_"+rand.Text()
	ts := time.Now().UTC()
	frames := make([][]byte, n)
	for i := range n {
		frames[i] = appendStepFrame(make([]byte, 0, 512), i+1, ticket, conv, ts)
	}
	return frames
}

func doneFrame(n int) []byte {
	return []byte("id: " + strconv.Itoa(n+1) + "\nevent: done\ndata: {}\n\n")
}

// bareStream is the stream baseline: plain net/http behind the same bearer validation. Query:
// n (step frames, then a done frame), gate (wait for that gate's release after the opening
// comment, as our gated runs do), and flush:
//
//   - batch (the delivery baseline): what a real SSE server does. One producer goroutine per
//     gate (the run, shared by every reader of that gate as a ticket's readers share its run)
//     encodes each event from its struct, as ours must, into an append-only log; each
//     reader's handler writes whatever the log holds beyond what it has written, in one write
//     and one flush, then waits for more. No event is held back.
//   - end (the wire's ceiling, and the replay baseline): everything pre-encoded, one write,
//     one flush.
type bareStream struct {
	gates *gates

	mu     sync.Mutex
	frames map[int][][]byte
	runs   map[string]*bareRun
}

func (b *bareStream) framesOf(n int) [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f, ok := b.frames[n]; ok {
		return f
	}
	if b.frames == nil {
		b.frames = map[int][][]byte{}
	}
	f := stepFrames(n)
	f = append(f, doneFrame(n))
	b.frames[n] = f
	return f
}

func (b *bareStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("n"))
	if err != nil || n < 0 || n > 1_000_000 {
		http.Error(w, "n: want 0..1000000", http.StatusBadRequest)
		return
	}
	mode := q.Get("flush")
	if mode != "batch" && mode != "end" {
		http.Error(w, "flush: want batch or end", http.StatusBadRequest)
		return
	}
	var frames [][]byte
	var run *bareRun
	if mode == "end" {
		frames = b.framesOf(n)
	} else {
		run = b.runOf(q.Get("gate")) // before the opening comment: every reader of a gate shares it
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte(": bare\n\n")); err != nil || rc.Flush() != nil {
		return
	}
	if key := q.Get("gate"); key != "" {
		select {
		case <-b.gates.wait(key):
		case <-r.Context().Done():
			return
		}
	}
	if mode == "end" {
		for _, f := range frames {
			if _, err := w.Write(f); err != nil {
				return
			}
		}
		_ = rc.Flush()
		return
	}
	run.start.Do(func() {
		b.forget(q.Get("gate"))
		go run.produce(n) // ends by itself after n+1 events
	})
	batchWrite(r.Context(), w, rc, run)
}

// bareRun is the batching baseline's run: one producer encoding the events into an
// append-only log, read by every writer of its readers (bytes before len never change).
type bareRun struct {
	start  sync.Once
	mu     sync.Mutex
	buf    []byte
	ended  bool
	notify chan struct{} // closed and replaced at each append
}

// produce encodes n step events and a done into the log, each from its struct, waking the
// writers at each.
func (r *bareRun) produce(n int) {
	ticket, conv := "t_"+rand.Text(), "c_"+rand.Text()
	var scratch []byte
	for i := 1; i <= n+1; i++ {
		if i <= n {
			scratch = appendStepFrame(scratch[:0], i, ticket, conv, time.Now())
		} else {
			scratch = append(scratch[:0], doneFrame(n)...)
		}
		r.mu.Lock()
		r.buf = append(r.buf, scratch...)
		r.ended = i == n+1
		close(r.notify)
		r.notify = make(chan struct{})
		r.mu.Unlock()
	}
}

// runOf is the run of a gate key shared by its readers (as the readers of one ticket share
// its run), or a run of its own without one; forget drops it once it is started.
func (b *bareStream) runOf(key string) *bareRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.runs[key]; ok && key != "" {
		return r
	}
	if b.runs == nil {
		b.runs = map[string]*bareRun{}
	}
	r := &bareRun{notify: make(chan struct{})}
	if key != "" {
		b.runs[key] = r
	}
	return r
}

func (b *bareStream) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.runs, key)
}

// batchWrite is the batching writer: it writes whatever the run's log holds beyond what it
// has written, in one write and one flush, and waits for more until the done is written.
func batchWrite(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, run *bareRun) {
	off := 0
	for {
		run.mu.Lock()
		data, ended, wake := run.buf[off:], run.ended, run.notify
		run.mu.Unlock()
		if len(data) > 0 {
			if _, err := w.Write(data); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			off += len(data)
		}
		if ended {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}
