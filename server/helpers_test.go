package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/internal/memnet"
	"github.com/das-ask/ask/server"
)

const (
	alice = "tok-alice-7f3a9c"
	bob   = "tok-bob-51e2d0"
)

// fakeAuth accepts two tokens, for alice and bob, in one tenant.
type fakeAuth struct{}

func (fakeAuth) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	switch tok {
	case alice:
		return ask.Identity{OID: "alice", Tenant: "tenant-1", Token: tok}, nil
	case bob:
		return ask.Identity{OID: "bob", Tenant: "tenant-1", Token: tok}, nil
	}
	return ask.Identity{}, errors.New("unknown token")
}

// harness is the whole service behind the generated clients, over an in-memory transport.
// Every log line at debug level is captured; on cleanup the harness shuts the server down and
// fails the test if any line holds a question asked through it or a token.
type harness struct {
	t    testing.TB
	srv  *server.Server
	c    *gen.Client
	cw   *gen.ClientWithResponses
	logs *logtest.Buffer

	mu      sync.Mutex
	secrets []string
}

func newHarness(t testing.TB, opts server.Options) *harness {
	t.Helper()
	h := &harness{t: t, logs: &logtest.Buffer{}, secrets: []string{alice, bob}}
	opts.Logger = slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Authenticator == nil {
		opts.Authenticator = fakeAuth{}
	}
	if opts.Runner == nil {
		opts.Runner = answerRunner(1)
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	h.srv = srv
	hc := &http.Client{Transport: memnet.Transport{Handler: srv.Handler()}}
	base := "http://ask.test" + strings.TrimSuffix(orDefault(opts.BasePath, "/ask"), "/")
	if h.c, err = gen.NewClient(base, gen.WithHTTPClient(hc)); err != nil {
		t.Fatal(err)
	}
	if h.cw, err = gen.NewClientWithResponses(base, gen.WithHTTPClient(hc)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		h.assertLogsClean()
	})
	return h
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (h *harness) secret(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secrets = append(h.secrets, s)
}

func (h *harness) assertLogsClean() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs.AssertAbsent(h.t, h.secrets...)
}

func bearer(tok string) gen.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		return nil
	}
}

func header(k, v string) gen.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set(k, v)
		return nil
	}
}

func (h *harness) conv(tok string) string {
	h.t.Helper()
	r, err := h.cw.CreateConversationWithResponse(context.Background(), nil, gen.CreateConversationRequest{}, bearer(tok))
	if err != nil {
		h.t.Fatal(err)
	}
	if r.StatusCode() != http.StatusCreated || r.JSON201 == nil {
		h.t.Fatalf("create conversation: %d %s", r.StatusCode(), r.Body)
	}
	return r.JSON201.Id
}

func (h *harness) askRaw(tok, cid, q string) *gen.CreateAskResponse {
	h.t.Helper()
	h.secret(q)
	r, err := h.cw.CreateAskWithResponse(context.Background(), cid, nil, gen.AskRequest{Question: q}, bearer(tok))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) ask(tok, cid, q string) string {
	h.t.Helper()
	r := h.askRaw(tok, cid, q)
	if r.StatusCode() != http.StatusAccepted || r.JSON202 == nil {
		h.t.Fatalf("ask: %d %s", r.StatusCode(), r.Body)
	}
	return r.JSON202.Ticket
}

func (h *harness) status(tok, ticket string, edit ...gen.RequestEditorFn) *gen.GetAskResponse {
	h.t.Helper()
	r, err := h.cw.GetAskWithResponse(context.Background(), ticket, &gen.GetAskParams{}, append([]gen.RequestEditorFn{bearer(tok)}, edit...)...)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) cancel(tok, ticket string) *gen.CancelAskResponse {
	h.t.Helper()
	r, err := h.cw.CancelAskWithResponse(context.Background(), ticket, bearer(tok))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// stream opens the ticket's event stream; edits can set Last-Event-ID.
func (h *harness) stream(ctx context.Context, tok, ticket string, params *gen.StreamEventsParams) *http.Response {
	h.t.Helper()
	if params == nil {
		params = &gen.StreamEventsParams{}
	}
	resp, err := h.c.StreamEvents(ctx, ticket, params, bearer(tok))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// events reads a whole stream (the run must end) and returns its event frames.
func (h *harness) events(tok, ticket string) []frame {
	h.t.Helper()
	resp := h.stream(context.Background(), tok, ticket, nil)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("stream: %d", resp.StatusCode)
	}
	return readAll(h.t, resp.Body)
}

// frame is one SSE frame: an event, or a comment.
type frame struct {
	ID      int64
	Event   string
	Data    []byte
	Comment string
	Retry   string
}

func readFrame(br *bufio.Reader) (frame, error) {
	var f frame
	seen := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && seen {
				return f, io.ErrUnexpectedEOF
			}
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return f, nil
			}
			continue
		}
		seen = true
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "":
			f.Comment = v
		case "id":
			f.ID, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				return f, err
			}
		case "event":
			f.Event = v
		case "data":
			f.Data = []byte(v)
		case "retry":
			f.Retry = v
		}
	}
}

// readAll reads event frames until the stream ends, skipping comments.
func readAll(t testing.TB, r io.Reader) []frame {
	t.Helper()
	br := bufio.NewReader(r)
	var out []frame
	for {
		f, err := readFrame(br)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
		if f.Event != "" {
			out = append(out, f)
		}
	}
}

// envelope decodes an event frame's common fields, checking them against the frame.
type envelopeJSON struct {
	Seq            int64     `json:"seq"`
	Ticket         string    `json:"ticket"`
	ConversationID string    `json:"conversation_id"`
	Ts             time.Time `json:"ts"`
	Type           string    `json:"type"`
	// Fields used by assertions.
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Role    string `json:"role"`
	Outcome string `json:"outcome"`
	Steps   int64  `json:"steps"`
	Model   int64  `json:"model_calls"`
	In      int64  `json:"input_tokens"`
	Out     int64  `json:"output_tokens"`
	Q       string `json:"question"`
}

func decode(t testing.TB, f frame) envelopeJSON {
	t.Helper()
	var e envelopeJSON
	if err := json.Unmarshal(f.Data, &e); err != nil {
		t.Fatalf("frame %d: %v: %s", f.ID, err, f.Data)
	}
	if e.Seq != f.ID || e.Type != f.Event {
		t.Fatalf("frame id/event %d/%s disagree with data %d/%s", f.ID, f.Event, e.Seq, e.Type)
	}
	var ev gen.Event
	if err := ev.UnmarshalJSON(f.Data); err != nil {
		t.Fatalf("not a gen.Event: %v", err)
	}
	if _, err := ev.ValueByDiscriminator(); err != nil {
		t.Fatalf("event %s does not decode as its type: %v", f.Event, err)
	}
	return e
}

// checkLifecycle asserts the promises every finished log keeps when no step was evicted: seq
// 1..n with no gap, accepted first, exactly one supervisor open and close, exactly one terminal
// (of type want), then done last. It returns the terminal and done.
func checkLifecycle(t testing.TB, frames []frame, want gen.EventType) (terminal, done envelopeJSON) {
	t.Helper()
	if len(frames) < 5 {
		t.Fatalf("got %d events, want at least 5: %v", len(frames), types(frames))
	}
	opens, closes, terminals, dones := 0, 0, 0, 0
	for i, f := range frames {
		e := decode(t, f)
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d, want %d (gap or duplicate): %s", i, e.Seq, i+1, frames[i].Data)
		}
		switch gen.EventType(e.Type) {
		case gen.EventTypeBranch:
			if e.Role == "supervisor" && e.State == "open" {
				opens++
				if terminals > 0 {
					t.Errorf("branch open after the terminal event")
				}
			}
			if e.Role == "supervisor" && e.State == "close" {
				closes++
			}
		case gen.EventTypeAnswer, gen.EventTypeAbstention, gen.EventTypeRefusal, gen.EventTypeError:
			terminals++
			terminal = e
		case gen.EventTypeDone:
			dones++
			done = e
		}
	}
	if frames[0].Event != "accepted" {
		t.Errorf("first event %s, want accepted", frames[0].Event)
	}
	if opens != 1 || closes != 1 || terminals != 1 || dones != 1 {
		t.Errorf("opens, closes, terminals, dones = %d, %d, %d, %d; want 1 each: %v", opens, closes, terminals, dones, types(frames))
	}
	if last := frames[len(frames)-1].Event; last != "done" {
		t.Errorf("last event %s, want done", last)
	}
	if got := frames[len(frames)-2].Event; got != string(want) {
		t.Errorf("event before done is %s, want %s: %v", got, want, types(frames))
	}
	if done.Outcome != string(want) {
		t.Errorf("done.outcome = %q, want %q", done.Outcome, want)
	}
	return terminal, done
}

// checkRestored asserts the shape of a log its runner restored after the store lost part of it
// (run.restoreVia): accepted first, seqs rising, and the log ending in the supervisor's close,
// error{interrupted} and done at consecutive seqs after assigned (a seq the run is known to
// have assigned before the loss: the restored end reuses none), each of them once. The seqs
// the store lost are a gap before the end; a log with no gap passes too.
func checkRestored(t testing.TB, frames []frame, assigned int64) {
	t.Helper()
	checkRestoredEnd(t, frames, assigned, gen.EventTypeError)
}

// checkRestoredEnd is checkRestored for a run that ended with terminal: error{interrupted} when
// it found its log lost before its end, or the end it sealed when it found the log lost while
// writing that end (run.restoreVia; docs/scale-out.md, "When Redis falters").
func checkRestoredEnd(t testing.TB, frames []frame, assigned int64, terminal gen.EventType) {
	t.Helper()
	n := len(frames)
	if n < 4 || frames[0].Event != "accepted" || frames[n-3].Event != "branch" || frames[n-2].Event != string(terminal) || frames[n-1].Event != "done" {
		t.Fatalf("a run whose tail was lost: events %v, want accepted … branch %s done", types(frames), terminal)
	}
	var prev int64
	closes, terminals, dones := 0, 0, 0
	for i, f := range frames {
		e := decode(t, f)
		if e.Seq <= prev {
			t.Fatalf("event %d has seq %d after %d: %v", i, e.Seq, prev, types(frames))
		}
		prev = e.Seq
		switch gen.EventType(e.Type) {
		case gen.EventTypeBranch:
			if e.Role == "supervisor" && e.State == "close" {
				closes++
			}
		case gen.EventTypeAnswer, gen.EventTypeAbstention, gen.EventTypeRefusal, gen.EventTypeError:
			terminals++
		case gen.EventTypeDone:
			dones++
		}
	}
	if closes != 1 || terminals != 1 || dones != 1 {
		t.Errorf("closes, terminals, dones = %d, %d, %d; want 1 each: %v", closes, terminals, dones, types(frames))
	}
	end, term, done := decode(t, frames[n-3]), decode(t, frames[n-2]), decode(t, frames[n-1])
	if end.Role != "supervisor" || end.State != "close" {
		t.Errorf("the restored end opens with %s/%s, want the supervisor's close", end.Role, end.State)
	}
	if terminal == gen.EventTypeError && term.Kind != string(gen.ErrorKindInterrupted) {
		t.Errorf("the restored end is error{%s}, want interrupted", term.Kind)
	}
	if end.Seq <= assigned || term.Seq != end.Seq+1 || done.Seq != term.Seq+1 {
		t.Errorf("the restored end reuses seqs the run had assigned (up to %d): seqs %d %d %d", assigned, end.Seq, term.Seq, done.Seq)
	}
}

func types(frames []frame) []string {
	var out []string
	for _, f := range frames {
		out = append(out, f.Event)
	}
	return out
}

// answerRunner reports a milestone, steps tool calls and one model call, then answers.
func answerRunner(steps int) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
		emit.ModelCall(ask.Usage{InputTokens: 10, OutputTokens: 5})
		for i := range steps {
			emit.Step(step(i))
		}
		return ask.Outcome{Answer: answer("42")}
	})
}

func step(i int) gen.StepBody {
	return gen.StepBody{CallId: "call-" + strconv.Itoa(i), Tool: "run_query", Source: "demo", Args: map[string]any{"i": i}, Ms: 3}
}

func answer(text string) *gen.AnswerBody {
	return &gen.AnswerBody{Text: text, Caveats: []gen.Caveat{}, Provenance: []gen.Provenance{},
		Sql: []string{}, Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"}}
}

// problemOf decodes a problem+json body, checking its media type and status.
func problemOf(t testing.TB, status int, contentType string, body []byte, want int) gen.Problem {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d: %s", status, want, body)
	}
	if !strings.HasPrefix(contentType, "application/problem+json") {
		t.Fatalf("content type %q, want application/problem+json: %s", contentType, body)
	}
	var p gen.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, body)
	}
	if p.Status != want || p.Title == "" || p.Type == "" {
		t.Fatalf("problem %+v does not match status %d", p, want)
	}
	return p
}

// frames reads one frame at a time from a stream response, skipping comments.
type frameReader struct{ br *bufio.Reader }

func newFrames(resp *http.Response) *frameReader { return &frameReader{br: bufio.NewReader(resp.Body)} }

func (r *frameReader) next(t testing.TB) frame {
	t.Helper()
	for {
		f, err := readFrame(r.br)
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
		if f.Event != "" {
			return f
		}
	}
}

// nextAny returns the next frame, comments included.
func (r *frameReader) nextAny(t testing.TB) frame {
	t.Helper()
	f, err := readFrame(r.br)
	if err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	return f
}

func readBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// do sends a raw request through the in-memory transport.
func (h *harness) do(req *http.Request) *http.Response {
	h.t.Helper()
	resp, err := (&http.Client{Transport: memnet.Transport{Handler: h.srv.Handler()}}).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}
