package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// TestSSEWriterLendsItsBuffer: a flushed writer holds no buffer (an idle stream costs none),
// the next batch borrows one again, and an oversized buffer is not kept. (Whether the pool
// hands the same buffer back is sync.Pool's business: under -race it drops some on purpose.)
func TestSSEWriterLendsItsBuffer(t *testing.T) {
	rec := httptest.NewRecorder()
	pool := new(sync.Pool)
	o := &sseWriter{w: rec, rc: http.NewResponseController(rec), pool: pool}
	ev := store.Event{Seq: 7, Type: gen.EventTypeStep, Data: []byte(`{"seq":7}`)}

	o.frame(ev)
	if o.box == nil {
		t.Fatal("framing did not borrow a buffer")
	}
	if err := o.flush(); err != nil {
		t.Fatal(err)
	}
	if o.box != nil || o.buf != nil {
		t.Fatal("the writer still holds a buffer after its flush")
	}
	if got, want := rec.Body.String(), "id: 7\nevent: step\ndata: {\"seq\":7}\n\n"; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
	if !rec.Flushed {
		t.Fatal("not flushed")
	}

	o.comment(": keepalive\n\n")
	if o.box == nil {
		t.Fatal("a comment did not borrow a buffer")
	}
	o.buf = append(o.buf, strings.Repeat("x", sseBufMax+1)...)
	if err := o.flush(); err != nil {
		t.Fatal(err)
	}
	if b, ok := pool.Get().(*[]byte); ok && cap(*b) > sseBufMax {
		t.Fatalf("an oversized buffer (%d bytes) went back to the pool", cap(*b))
	}
}
