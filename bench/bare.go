package bench

import (
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

// stepFrames are n SSE frames of step events (seq 1..n), encoded exactly as the service
// encodes them: the envelope, then the step body's fields spliced in.
func stepFrames(n int) [][]byte {
	ticket, conv := "t_"+rand.Text(), "c_"+rand.Text()
	ts := time.Now().UTC()
	frames := make([][]byte, n)
	for i := range n {
		body, _ := json.Marshal(sampleStep(i))
		seq := strconv.Itoa(i + 1)
		d := make([]byte, 0, 256+len(body))
		d = append(d, "id: "+seq+"\nevent: step\ndata: "...)
		d = append(d, `{"seq":`+seq+`,"ticket":"`+ticket+`","conversation_id":"`+conv+`","ts":"`...)
		d = ts.AppendFormat(d, time.RFC3339Nano)
		d = append(d, `","type":"step",`...)
		d = append(d, body[1:]...)
		d = append(d, "\n\n"...)
		frames[i] = d
	}
	return frames
}

// bareStream is the stream baseline: plain net/http behind the same bearer validation,
// writing pre-encoded step frames, then a done frame. Query: n (frames), gate (wait for that
// gate's release after the opening comment, as our gated runs do), flush=each (a flush per
// frame: every event on the wire as soon as it exists, the delivery ours promises) or end
// (one write of everything: the wire's ceiling, as a replay).
type bareStream struct {
	gates *gates

	mu     sync.Mutex
	frames map[int][][]byte
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
	f = append(f, []byte("id: "+strconv.Itoa(n+1)+"\nevent: done\ndata: {}\n\n"))
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
	frames := b.framesOf(n)
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
	each := q.Get("flush") != "end"
	for _, f := range frames {
		if _, err := w.Write(f); err != nil {
			return
		}
		if each {
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
	_ = rc.Flush()
}
