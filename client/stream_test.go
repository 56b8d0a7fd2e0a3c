package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/memnet"
)

func memClient(t testing.TB, h http.Handler, opts client.Options) *client.Client {
	t.Helper()
	opts.HTTPClient = &http.Client{Transport: memnet.Transport{Handler: h}}
	c, err := client.New("http://ask.test/ask", opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// collect reads the whole iteration.
func collect(t testing.TB, seq func(func(client.Event, error) bool)) ([]client.Event, error) {
	t.Helper()
	var evs []client.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func seqs(evs []client.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func assertContiguous(t testing.TB, evs []client.Event, n int) {
	t.Helper()
	if len(evs) != n {
		t.Fatalf("got %d events %v, want %d", len(evs), seqs(evs), n)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("got seqs %v, want 1..%d with no gap or duplicate", seqs(evs), n)
		}
	}
}

func TestEventsWholeRunOverHTTP(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	frames := script(t, 2)
	var gotPath, gotAuth, gotAccept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth, gotAccept = r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept")
		sseHeaders(w)
		_, _ = io.WriteString(w, ": hello\n\n")
		for _, f := range frames {
			_, _ = io.WriteString(w, f)
			flush(w)
		}
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := client.New(srv.URL+"/ask", client.Options{Token: client.StaticToken("tok"), HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := client.Collect(c.Events(t.Context(), "tk", client.EventsOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/ask/v1/asks/tk/events" || gotAuth != "Bearer tok" || gotAccept != "text/event-stream" {
		t.Errorf("request: path %q auth %q accept %q", gotPath, gotAuth, gotAccept)
	}
	if out.Kind != client.Answer || out.Answer == nil || out.Answer.Text != "42" {
		t.Fatalf("got outcome %v %+v, want answer 42", out.Kind, out.Answer)
	}
	if out.Done.Steps != 2 || out.MissedSteps != 0 {
		t.Errorf("done steps %d missed %d, want 2 and 0", out.Done.Steps, out.MissedSteps)
	}
}

func TestEventsTypedValues(t *testing.T) {
	frames := script(t, 1)
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		for _, f := range frames {
			_, _ = io.WriteString(w, f)
		}
	}), client.Options{})
	evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	assertContiguous(t, evs, len(frames))
	if _, ok := evs[0].Value.(gen.AcceptedEvent); !ok {
		t.Errorf("event 1 is %T, want gen.AcceptedEvent", evs[0].Value)
	}
	if s, ok := evs[2].Value.(gen.StepEvent); !ok || s.Tool != "run_query" {
		t.Errorf("event 3 is %#v, want a run_query gen.StepEvent", evs[2].Value)
	}
	if m, ok := evs[3].Value.(gen.MilestoneEvent); !ok || m.Phase != gen.MilestonePhaseQuerying {
		t.Errorf("event 4 is %#v, want a querying gen.MilestoneEvent", evs[3].Value)
	}
	if evs[5].Outcome() != client.Answer || evs[4].Outcome() != client.NotTerminal {
		t.Errorf("outcomes: %v %v", evs[5].Outcome(), evs[4].Outcome())
	}
	if !evs[6].IsDone() {
		t.Errorf("last event is %T, want done", evs[6].Value)
	}
}

// A connection cut mid-stream is resumed with Last-Event-ID; a server that replays too much
// still yields no duplicate.
func TestEventsResumeAfterCut(t *testing.T) {
	frames := script(t, 3)
	var calls atomic.Int32
	var lastIDs []string
	var mu sync.Mutex
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		sseHeaders(w)
		switch n {
		case 1: // 1..3, then the connection drops mid-frame
			for _, f := range frames[:3] {
				_, _ = io.WriteString(w, f)
			}
			_, _ = io.WriteString(w, frames[3][:10])
		case 2: // replays from 2 (one too many), then drops
			for _, f := range frames[1:5] {
				_, _ = io.WriteString(w, f)
			}
		default:
			for _, f := range frames[5:] {
				_, _ = io.WriteString(w, f)
			}
		}
	}), client.Options{Reconnect: client.Reconnect{Initial: time.Millisecond}})
	evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	assertContiguous(t, evs, len(frames))
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", "3", "5"}; strings.Join(lastIDs, ",") != strings.Join(want, ",") {
		t.Errorf("Last-Event-ID per connection: got %q, want %q", lastIDs, want)
	}
}

// firstThenRest is an event stream that drops its first connection: after the SSE headers,
// first serves that connection however the test needs, and every later connection gets
// frames[1:]. connections returns when each connection arrived.
func firstThenRest(frames []string, first http.HandlerFunc) (h http.Handler, connections func() []time.Time) {
	var mu sync.Mutex
	var times []time.Time
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		sseHeaders(w)
		if n == 1 {
			first(w, r)
			return
		}
		for _, f := range frames[1:] {
			_, _ = io.WriteString(w, f)
		}
	})
	return h, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), times...)
	}
}

func TestEventsRetryHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frames := script(t, 0)
		h, connections := firstThenRest(frames, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "retry: 3000\n\n"+frames[0])
		})
		c := memClient(t, h, client.Options{Reconnect: client.Reconnect{Initial: time.Millisecond, Max: 5 * time.Second}})
		evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		assertContiguous(t, evs, len(frames))
		times := connections()
		if len(times) != 2 {
			t.Fatalf("got %d connections, want 2", len(times))
		}
		if gap := times[1].Sub(times[0]); gap != 3*time.Second {
			t.Errorf("reconnected after %v, want the server's retry of 3s", gap)
		}
	})
}

// A server cannot make the client wait longer than Reconnect.Max: not with an SSE retry of an
// hour, not with a Retry-After of an hour.
func TestEventsServerWaitIsCapped(t *testing.T) {
	const limit = 50 * time.Millisecond
	t.Run("retry field", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			frames := script(t, 0)
			h, connections := firstThenRest(frames, func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "retry: 3600000\n\n"+frames[0])
			})
			c := memClient(t, h, client.Options{Reconnect: client.Reconnect{Initial: time.Millisecond, Max: limit}})
			evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
			if err != nil {
				t.Fatal(err)
			}
			assertContiguous(t, evs, len(frames))
			times := connections()
			if len(times) != 2 {
				t.Fatalf("got %d connections, want 2", len(times))
			}
			if gap := times[1].Sub(times[0]); gap > limit {
				t.Errorf("reconnected after %v, want at most Max (%v)", gap, limit)
			}
		})
	})
	t.Run("Retry-After", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var times []time.Time
			c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				times = append(times, time.Now())
				w.Header().Set("Retry-After", "3600")
				http.Error(w, "busy", http.StatusServiceUnavailable)
			}), client.Options{Reconnect: client.Reconnect{Initial: time.Millisecond, Max: limit, Attempts: 3}})
			if _, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{})); err == nil {
				t.Fatal("want the last 503 after the budget ran out")
			}
			if len(times) != 4 {
				t.Fatalf("got %d connections, want 1 + 3 retries", len(times))
			}
			for i := 1; i < len(times); i++ {
				if d := times[i].Sub(times[i-1]); d > limit {
					t.Errorf("delay before retry %d: %v, want at most Max (%v)", i, d, limit)
				}
			}
		})
	})
}

func TestEventsBackoffGrowsAndCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var times []time.Time
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			times = append(times, time.Now())
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}), client.Options{Reconnect: client.Reconnect{Initial: time.Second, Max: 4 * time.Second, Attempts: 5}})
		_, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("got %v, want the last 503 after the budget ran out", err)
		}
		if len(times) != 6 {
			t.Fatalf("got %d connections, want 1 + 5 retries", len(times))
		}
		caps := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
		for i, limit := range caps {
			if d := times[i+1].Sub(times[i]); d > limit {
				t.Errorf("delay before retry %d: %v, want at most %v", i+1, d, limit)
			}
		}
	})
}

// The budget counts attempts without progress: a server that drops after every event still
// gets the run through, however many connections that takes.
func TestEventsBudgetResetsOnProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frames := script(t, 4)
		var calls atomic.Int32
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := int(calls.Add(1))
			sseHeaders(w)
			_, _ = io.WriteString(w, frames[n-1])
		}), client.Options{Reconnect: client.Reconnect{Attempts: 2}})
		evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		assertContiguous(t, evs, len(frames))
		if int(calls.Load()) != len(frames) {
			t.Errorf("got %d connections, want %d", calls.Load(), len(frames))
		}
	})
}

func TestEventsFinalStatuses(t *testing.T) {
	for _, tc := range []struct {
		status int
		is     error
	}{{http.StatusUnauthorized, client.ErrUnauthorized}, {http.StatusNotFound, client.ErrNotFound}, {http.StatusBadRequest, nil}} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			var calls atomic.Int32
			c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, `{"type":"about:blank","title":"no","status":0,"detail":"nope"}`)
			}), client.Options{Reconnect: client.Reconnect{Initial: time.Millisecond}})
			evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || len(evs) != 0 {
				t.Fatalf("got %v (%d events), want an APIError %d", err, len(evs), tc.status)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) is false", err, tc.is)
			}
			if calls.Load() != 1 {
				t.Errorf("got %d requests, want 1: %d is final", calls.Load(), tc.status)
			}
		})
	}
}

func TestEventsNeverReconnectAfterDone(t *testing.T) {
	frames := script(t, 0)
	var calls atomic.Int32
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		sseHeaders(w)
		for _, f := range frames {
			_, _ = io.WriteString(w, f)
		}
		// A misbehaving server writes on after done; the client must not read on or reconnect.
		_, _ = io.WriteString(w, sseFrame(t, 99, "step", nil))
	}), client.Options{})
	evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	assertContiguous(t, evs, len(frames))
	if calls.Load() != 1 {
		t.Errorf("got %d connections, want 1", calls.Load())
	}
}

func TestEventsUnknownTypePassedThrough(t *testing.T) {
	frames := script(t, 0)
	odd := "id: 3\nevent: thought\ndata: {\"seq\":3,\"type\":\"thought\",\"mood\":\"curious\"}\n\n"
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		_, _ = io.WriteString(w, frames[0]+frames[1]+odd)
		for i, f := range frames[2:] { // renumber the rest after the unknown event
			_, _ = io.WriteString(w, strings.Replace(strings.Replace(f, `"seq":`+strconv.Itoa(i+3), `"seq":`+strconv.Itoa(i+4), 1), "id: "+strconv.Itoa(i+3), "id: "+strconv.Itoa(i+4), 1))
		}
	}), client.Options{})
	out, err := client.Collect(c.Events(t.Context(), "tk", client.EventsOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != client.Answer {
		t.Fatalf("got %v, want answer", out.Kind)
	}
	evs, _ := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
	u, ok := evs[2].Value.(client.UnknownEvent)
	if !ok || u.Type != "thought" || u.Seq != 3 || !strings.Contains(string(u.Data), "curious") {
		t.Fatalf("event 3 is %#v, want the raw unknown event", evs[2].Value)
	}
	assertContiguous(t, evs, len(frames)+1)
}

func TestEventsReportsMissedSteps(t *testing.T) {
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		_, _ = io.WriteString(w, sseFrame(t, 1, "accepted", map[string]any{"question": "q"}))
		// seqs 2..4 were steps the service evicted; 5 survived.
		_, _ = io.WriteString(w, sseFrame(t, 5, "step", map[string]any{"call_id": "c", "tool": "t", "source": "s", "args": map[string]any{}, "ms": 1, "refused": false}))
		_, _ = io.WriteString(w, sseFrame(t, 6, "error", map[string]any{"kind": "internal", "message": "m"}))
		_, _ = io.WriteString(w, sseFrame(t, 7, "done", map[string]any{"outcome": "error", "steps": 4, "model_calls": 1, "input_tokens": 0, "output_tokens": 0, "elapsed_ms": 1}))
	}), client.Options{})
	out, err := client.Collect(c.Events(t.Context(), "tk", client.EventsOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if out.MissedSteps != 3 {
		t.Errorf("missed steps: got %d, want 3", out.MissedSteps)
	}
	if out.Kind != client.Error || out.Error.Kind != gen.ErrorKindInternal {
		t.Errorf("got %v, want error{internal}", out.Kind)
	}
}

func TestEventsContextCancelStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	frames := script(t, 0)
	release := make(chan struct{})
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		_, _ = io.WriteString(w, frames[0])
		flush(w)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}), client.Options{})
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []client.Event
	var last error
	for ev, err := range c.Events(ctx, "tk", client.EventsOptions{}) {
		if err != nil {
			last = err
			break
		}
		got = append(got, ev)
		cancel()
	}
	if len(got) != 1 || !errors.Is(last, context.Canceled) {
		t.Fatalf("got %d events and %v, want 1 event then context.Canceled", len(got), last)
	}
}

func TestEventsBreakClosesConnection(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	frames := script(t, 0)
	closed := make(chan struct{})
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		_, _ = io.WriteString(w, frames[0])
		flush(w)
		<-r.Context().Done()
		close(closed)
	}), client.Options{})
	for range c.Events(t.Context(), "tk", client.EventsOptions{}) {
		break
	}
	<-closed // the server saw the connection go away
}

func TestEventsIdleTimeoutReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frames := script(t, 0)
		h, connections := firstThenRest(frames, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, frames[0])
			flush(w)
			<-r.Context().Done() // silent: not even a keep-alive
		})
		c := memClient(t, h, client.Options{IdleTimeout: 20 * time.Second, Reconnect: client.Reconnect{Initial: time.Millisecond, Max: time.Millisecond}})
		evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		assertContiguous(t, evs, len(frames))
		if times := connections(); len(times) != 2 || times[1].Sub(times[0]) < 20*time.Second {
			t.Fatalf("connections at %v, want a second one after the 20s idle timeout", times)
		}
	})
}

func TestEventsKeepAlivesKeepTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frames := script(t, 0)
		var calls atomic.Int32
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			sseHeaders(w)
			_, _ = io.WriteString(w, frames[0])
			for range 10 { // 100 s of silence, broken by keep-alives every 10 s
				time.Sleep(10 * time.Second)
				_, _ = io.WriteString(w, ": keepalive\n\n")
			}
			for _, f := range frames[1:] {
				_, _ = io.WriteString(w, f)
			}
		}), client.Options{IdleTimeout: 20 * time.Second})
		evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		assertContiguous(t, evs, len(frames))
		if calls.Load() != 1 {
			t.Errorf("got %d connections, want 1", calls.Load())
		}
	})
}

// TestEventsSlowEventKeepsTheConnection: an event whose bytes arrive slowly (a byte a second,
// over far longer than the idle timeout) keeps its connection: any byte is a sign of life.
// The idle watchdog was re-armed only by whole lines, so the connection was cut as silent in
// the middle of the event's data line, and an event that slow on every connection was never
// delivered (a fault-injecting relay's finding: the Python and TypeScript clients read it).
func TestEventsSlowEventKeepsTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frames := script(t, 0)
		var calls atomic.Int32
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			sseHeaders(w)
			_, _ = io.WriteString(w, frames[0])
			flush(w)
			for _, b := range []byte(frames[1]) { // longer than 100 bytes: over 100 s
				time.Sleep(time.Second)
				_, _ = w.Write([]byte{b})
				flush(w)
			}
			for _, f := range frames[2:] {
				_, _ = io.WriteString(w, f)
			}
		}), client.Options{IdleTimeout: 20 * time.Second, Reconnect: client.Reconnect{Attempts: 1}})
		if len(frames[1]) < 100 {
			t.Fatalf("the slow frame is %d bytes, want over 100", len(frames[1]))
		}
		evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		assertContiguous(t, evs, len(frames))
		if calls.Load() != 1 {
			t.Errorf("got %d connections, want 1: the slow event's bytes kept it", calls.Load())
		}
	})
}

// TestEventsSlowCallerKeepsTheConnection: the idle bound counts the server's silence, not the
// caller's time with an event. Events that came together are handed over from the parser's
// buffer without a read; a caller taking 15 s over each of seven (25 s over the first), with an
// idle bound of 20 s and the server's keep-alive every 5 s (waiting unread), had the connection
// cut as silent and made a second one.
func TestEventsSlowCallerKeepsTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frames := script(t, 5)
		burst := len(frames) - 2
		var calls atomic.Int32
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			sseHeaders(w)
			_, _ = io.WriteString(w, strings.Join(frames[:burst], ""))
			flush(w)
			for range 30 { // 150 s of keep-alives, past the caller's time with the burst
				time.Sleep(5 * time.Second)
				if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
					return
				}
				flush(w)
			}
			_, _ = io.WriteString(w, strings.Join(frames[burst:], ""))
		}), client.Options{IdleTimeout: 20 * time.Second, Reconnect: client.Reconnect{Attempts: 1}})
		var evs []client.Event
		for ev, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			switch {
			case len(evs) == 1:
				time.Sleep(25 * time.Second) // one event held past the bound alone
			case len(evs) <= burst:
				time.Sleep(15 * time.Second) // the caller's work on the event
			}
		}
		assertContiguous(t, evs, len(frames))
		if n := calls.Load(); n != 1 {
			t.Errorf("got %d connections, want 1: the caller's time is not the server's silence", n)
		}
	})
}

func TestEventsTokenSourceCalledPerConnection(t *testing.T) {
	frames := script(t, 0)
	var seen []string
	var mu sync.Mutex
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		n := len(seen)
		mu.Unlock()
		sseHeaders(w)
		if n == 1 {
			_, _ = io.WriteString(w, frames[0])
			return
		}
		for _, f := range frames[1:] {
			_, _ = io.WriteString(w, f)
		}
	}), client.Options{
		Reconnect: client.Reconnect{Initial: time.Millisecond},
		Token: client.TokenFunc(func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			return "t" + strconv.Itoa(len(seen)+1), nil
		}),
	})
	if _, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{})); err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "Bearer t1,Bearer t2" {
		t.Errorf("got %q, want a fresh token per connection", seen)
	}
}

func TestEventsAfterCursor(t *testing.T) {
	frames := script(t, 0)
	var got string
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Last-Event-ID")
		sseHeaders(w)
		for _, f := range frames[4:] {
			_, _ = io.WriteString(w, f)
		}
	}), client.Options{})
	evs, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{After: 4}))
	if err != nil {
		t.Fatal(err)
	}
	if got != "4" || len(evs) != len(frames)-4 || evs[0].Seq != 5 {
		t.Errorf("Last-Event-ID %q, seqs %v; want 4 and 5..", got, seqs(evs))
	}
}
