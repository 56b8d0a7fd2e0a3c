package hardening_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// staticAuth accepts "tok-<oid>" for any oid, in one tenant.
type staticAuth struct{}

func (staticAuth) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	oid, ok := strings.CutPrefix(tok, "tok-")
	if !ok || oid == "" {
		return ask.Identity{}, errors.New("unknown token")
	}
	return ask.Identity{OID: oid, Tenant: "t", Token: tok}, nil
}

// A client that disconnects mid-stream does not affect the run, and a reconnect with
// Last-Event-ID later replays the rest: together, one lossless log.
func TestDisconnectMidStreamThenReplay(t *testing.T) {
	s, _ := startStack(t, stack.Options{})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	cid := a.conversation(ctx, t, tok)
	ticket := a.ask(ctx, t, tok, cid, qSlowSev1) // its first model turn waits: we leave before the steps

	resp := a.openStream(ctx, t, tok, ticket, "")
	fr := newFrameReader(resp.Body)
	var first []frame
	for len(first) < 2 {
		f, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, f)
	}
	resp.Body.Close() // gone mid-stream

	if st := a.finish(ctx, t, tok, ticket, 60*time.Second); st.State != gen.AskStateAnswer {
		t.Fatalf("run after the client left: %s", st.State)
	}
	rest := a.events(ctx, t, tok, ticket, strconv.FormatInt(first[len(first)-1].id, 10))
	checkLog(t, append(first, rest...), 1, false)
}

// A reader that never reads (its socket buffers fill and stay full) costs the run nothing: the
// run finishes, another reader gets the whole retained log at once, the log stays within its
// bound (only steps evicted), and the heap does not grow with what the run emitted.
func TestReaderThatNeverReads(t *testing.T) {
	const (
		steps     = 4000
		argBytes  = 4 << 10 // 16 MB of steps in all
		maxEvents = 100
		// A milestone every so many steps: never evicted, so every one must reach every reader.
		milestoneEvery = 100
		milestones     = steps / milestoneEvery
	)
	emitted := make(chan struct{})
	a := serveServiceWith(t, server.Options{
		Authenticator: staticAuth{},
		MaxEvents:     maxEvents,
		Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
			<-emitted // the stalled reader is connected first
			pad := strings.Repeat("x", argBytes)
			for i := range steps {
				emit.Step(gen.StepBody{CallId: fmt.Sprint(i), Tool: "run_query", Source: "demo", Args: map[string]any{"sql": pad}})
				if i%milestoneEvery == 0 {
					emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: fmt.Sprint(i), Source: "demo"})
				}
			}
			return ask.Outcome{Answer: &gen.AnswerBody{Text: "done", Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFast}}}
		}),
	})
	ctx := t.Context()
	const tok = "tok-alice"
	cid := a.conversation(ctx, t, tok)
	ticket := a.ask(ctx, t, tok, cid, "q")

	// The stalled reader: a raw connection that sends the request and never reads a byte.
	u, err := url.Parse(a.base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s/v1/asks/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", u.Path, ticket, u.Host, tok)
	// Read the response head, so the stream is open and following the log live; then never
	// read again.
	br := bufio.NewReaderSize(conn, 16)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("stalled reader's response: %q %v", status, err)
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	close(emitted)
	st := a.finish(ctx, t, tok, ticket, 30*time.Second)
	if st.State != gen.AskStateAnswer || st.Done.Steps != steps {
		t.Fatalf("run with a stalled reader: %s, %d steps", st.State, st.Done.Steps)
	}
	frames := a.events(ctx, t, tok, ticket, "")
	checkLog(t, frames, 1, true)
	if len(frames) > maxEvents {
		t.Errorf("%d events retained, bound %d", len(frames), maxEvents)
	}
	if got := countType(frames, "milestone"); got != milestones {
		t.Errorf("%d milestones retained, %d emitted: only steps may be evicted", got, milestones)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Errorf("heap grew by %d MB with a stalled reader and %d MB emitted", grew>>20, steps*argBytes>>20)
	}
	// The stalled reader still gets its stream when it reads at last: from where it is, with the
	// steps evicted meanwhile skipped, to done.
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	lastID, n, seenMilestones := "", 0, 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stalled reader, reading at last, never got done (%d lines, last %s): %v", n, lastID, err)
		}
		n++
		if strings.HasPrefix(line, "id: ") {
			lastID = line
		}
		if line == "event: milestone\n" {
			seenMilestones++
		}
		if line == "event: done\n" {
			break
		}
	}
	if seenMilestones != milestones {
		t.Errorf("the stalled reader got %d milestones of %d: only steps may be skipped", seenMilestones, milestones)
	}
	if frames := n / 4; frames >= steps {
		t.Errorf("the stalled reader got all %d events: it was never behind, so this test proved nothing", frames)
	}
}

// Many readers of one ticket, connected from before the first event, each receive the same
// complete log.
func TestManyReadersOfOneTicket(t *testing.T) {
	s, _ := startStack(t, stack.Options{})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	cid := a.conversation(ctx, t, tok)
	ticket := a.ask(ctx, t, tok, cid, qSlowSev1)

	const readers = 50
	logs := make([][]frame, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() { logs[i] = a.events(ctx, t, tok, ticket, "") })
	}
	wg.Wait()
	checkLog(t, logs[0], 1, false)
	for i, l := range logs[1:] {
		if fmt.Sprint(l) != fmt.Sprint(logs[0]) {
			t.Fatalf("reader %d saw %v, reader 0 %v", i+1, types(l), types(logs[0]))
		}
	}
}

// A reconnect storm: readers that drop their connection after every event and come back with
// Last-Event-ID, all at once, while the run is live. Each pieces together exactly the log.
func TestReconnectStorm(t *testing.T) {
	s, _ := startStack(t, stack.Options{})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	cid := a.conversation(ctx, t, tok)
	ticket := a.ask(ctx, t, tok, cid, qSlowSev1)

	const readers = 30
	logs := make([][]frame, readers)
	conns := make([]int, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			last := ""
			for {
				conns[i]++
				resp := a.openStream(ctx, t, tok, ticket, last)
				f, err := newFrameReader(resp.Body).next()
				resp.Body.Close()
				if errors.Is(err, io.EOF) {
					t.Errorf("reader %d: stream closed with nothing after %s", i, last)
					return
				}
				if err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				logs[i] = append(logs[i], f)
				last = strconv.FormatInt(f.id, 10)
				if f.typ == "done" {
					return
				}
			}
		})
	}
	wg.Wait()
	full := a.events(ctx, t, tok, ticket, "")
	checkLog(t, full, 1, false)
	for i, l := range logs {
		if fmt.Sprint(l) != fmt.Sprint(full) {
			t.Errorf("reader %d (%d connections) pieced together %v, the log is %v", i, conns[i], types(l), types(full))
		}
	}
}

func countType(frames []frame, typ string) int {
	n := 0
	for _, f := range frames {
		if f.typ == typ {
			n++
		}
	}
	return n
}
