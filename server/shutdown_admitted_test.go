package server_test

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// endWitness is a memory store that records which goroutine writes each end: the request's
// own (CreateAsk on its stack) or another.
type endWitness struct {
	*store.Memory
	byRequest, byOther atomic.Int32
}

func (w *endWitness) FinishCounted(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn) (int, error) {
	buf := make([]byte, 64<<10)
	if bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("(*handlers).CreateAsk")) {
		w.byRequest.Add(1)
	} else {
		w.byOther.Add(1)
	}
	return w.Memory.FinishCounted(ctx, ticket, tail, turn)
}

// TestAskAdmittedAcrossShutdownEndsUnrun: an ask admitted before a shutdown whose handler
// reaches its run's start only after Shutdown stopped waiting for the runners (its context
// ended) is ended there, error{shutdown} + done, and never run. Its goroutine was started
// all the same, counted in a WaitGroup whose Wait had begun (a race the race detector caught
// in CI, TestContract's shutdown probes, and catches here), and ran after the Shutdown that
// had returned.
func TestAskAdmittedAcrossShutdownEndsUnrun(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		name := "unkeyed"
		if keyed {
			name = "keyed"
		}
		t.Run(name, func(t *testing.T) {
			mem := &endWitness{Memory: store.NewMemory(store.MemoryOptions{})}
			admitted, release := make(chan string, 1), make(chan struct{})
			var ran atomic.Bool
			h := newHarness(t, server.Options{
				Store: mem,
				Runner: ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
					ran.Store(true)
					return ask.Outcome{Answer: answer("42")}
				}),
				Hooks: server.Hooks{Admitted: func(_ context.Context, a server.Admission) {
					admitted <- a.Ticket
					<-release
				}},
			})
			cid := h.conv(alice)
			answered := make(chan *gen.CreateAskResponse, 1)
			go func() {
				if keyed {
					answered <- h.keyedAsk(alice, cid, "k-1", "How many?")
				} else {
					answered <- h.askRaw(alice, cid, "How many?")
				}
			}()
			ticket := <-admitted
			gone, cancel := context.WithCancel(context.Background())
			cancel() // no grace: Shutdown goes straight to its wait for the runners
			_ = h.srv.Shutdown(gone)
			close(release)
			r := <-answered
			if r.StatusCode() != http.StatusAccepted {
				t.Fatalf("the admitted ask: %d %s", r.StatusCode(), r.Body)
			}
			// The handler goes on after its 202: wait for the log's end, wherever it is written.
			for {
				b, err := mem.Read(t.Context(), ticket, 0)
				if err != nil {
					t.Fatal(err)
				}
				if b.Finished {
					break
				}
				<-b.Changed
			}
			tk, err := mem.Ticket(context.Background(), ticket)
			if err != nil {
				t.Fatal(err)
			}
			if tk.Terminal == nil || tk.Done == nil || tk.Terminal.Type != gen.EventTypeError {
				t.Fatalf("the ask admitted across the shutdown: terminal %+v, done %+v; want error{shutdown} and done", tk.Terminal, tk.Done)
			}
			if ran.Load() {
				t.Error("the ask ran after the server had shut down")
			}
			// Ended by its request, not by a goroutine started past Shutdown's wait (which
			// would outlive the Shutdown that returned).
			if mem.byRequest.Load() != 1 || mem.byOther.Load() != 0 {
				t.Errorf("the end was written by the request %d times and by another goroutine %d times; want by the request, once", mem.byRequest.Load(), mem.byOther.Load())
			}
		})
	}
}
