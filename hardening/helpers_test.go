package hardening_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
)

// Questions the llm-stub's default script answers.
const (
	qSev1     = "How many sev1 incidents did we have in 2026-Q2?"
	qSlowSev1 = "Take your time: how many sev1 incidents did we have in 2026-Q2?"
	qTopTeam  = "Which team had the most incidents in 2026-Q3?"
	qFollowUp = "How many deployments did that team ship in 2026-Q3?"
	qCFR      = "What does change failure rate mean?"
	qOncall   = "What was the on-call pay per team in 2026-Q3?"
	qChurn    = "What is our customer churn rate?"
)

// startStack starts the dev stack with opts, logging at debug level into the returned sink,
// and closes it when t ends.
func startStack(t testing.TB, opts stack.Options) (*stack.Stack, *logtest.Buffer) {
	t.Helper()
	sink := &logtest.Buffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := stack.Start(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stack.Close: %v", err)
		}
		cancel() // stops the validators' JWKS refresh
	})
	return s, sink
}

// mint returns a token from p for c, failing the test otherwise.
func mint(t testing.TB, p *idp.IdP, c idp.Claims) string {
	t.Helper()
	tok, err := p.Mint(c)
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	return tok
}

// api is a plain HTTP client of one ask service, so tests see statuses, headers and bodies
// exactly as they are sent.
type api struct {
	base string
	hc   *http.Client
}

func newAPI(base string) *api {
	return &api{base: base, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// close drops idle connections, so no keep-alive goroutine outlives the test.
func (a *api) close() { a.hc.CloseIdleConnections() }

// response is a whole non-streaming response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (a *api) do(ctx context.Context, t testing.TB, method, path, token string, body []byte, hdr map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// conversation creates a conversation as token and returns its id.
func (a *api) conversation(ctx context.Context, t testing.TB, token string) string {
	t.Helper()
	r := a.do(ctx, t, http.MethodPost, "/v1/conversations", token, []byte(`{}`), nil)
	var c gen.Conversation
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &c) != nil || c.Id == "" {
		t.Fatalf("create conversation: %d %s", r.status, r.body)
	}
	return c.Id
}

// askRaw puts q in conversation cid as token.
func (a *api) askRaw(ctx context.Context, t testing.TB, token, cid, q string) response {
	t.Helper()
	b, _ := json.Marshal(gen.AskRequest{Question: q})
	return a.do(ctx, t, http.MethodPost, "/v1/conversations/"+cid+"/asks", token, b, nil)
}

// ask puts q and returns the ticket, failing unless it is admitted.
func (a *api) ask(ctx context.Context, t testing.TB, token, cid, q string) string {
	t.Helper()
	r := a.askRaw(ctx, t, token, cid, q)
	var tk gen.Ticket
	if r.status != http.StatusAccepted || json.Unmarshal(r.body, &tk) != nil || tk.Ticket == "" {
		t.Fatalf("create ask: %d %s", r.status, r.body)
	}
	return tk.Ticket
}

// status long-polls the ticket (up to wait seconds) and returns its state.
func (a *api) status(ctx context.Context, t testing.TB, token, ticket string, wait int) gen.AskStatus {
	t.Helper()
	r := a.do(ctx, t, http.MethodGet, "/v1/asks/"+ticket, token, nil, map[string]string{"Prefer": "wait=" + strconv.Itoa(wait)})
	var st gen.AskStatus
	if r.status != http.StatusOK || json.Unmarshal(r.body, &st) != nil {
		t.Fatalf("status of %s: %d %s", ticket, r.status, r.body)
	}
	return st
}

// finish long-polls until the ticket is done, failing after limit.
func (a *api) finish(ctx context.Context, t testing.TB, token, ticket string, limit time.Duration) gen.AskStatus {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := a.status(ctx, t, token, ticket, 5)
		if st.Done != nil {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticket %s not done after %s (state %s)", ticket, limit, st.State)
		}
	}
}

// frame is one SSE event as received.
type frame struct {
	id   int64
	typ  string
	data string
}

// envelope is the part of every event the tests check.
type envelope struct {
	Seq            int64  `json:"seq"`
	Ticket         string `json:"ticket"`
	ConversationID string `json:"conversation_id"`
	Type           string `json:"type"`
	// error
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// branch
	Role  string `json:"role"`
	State string `json:"state"`
	// done
	Steps   int64  `json:"steps"`
	Outcome string `json:"outcome"`
}

func (f frame) env(t testing.TB) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal([]byte(f.data), &e); err != nil {
		t.Fatalf("event %d (%s) is not JSON: %v", f.id, f.typ, err)
	}
	return e
}

// openStream opens the ticket's event stream; the caller reads and closes it.
func (a *api) openStream(ctx context.Context, t testing.TB, token, ticket string, lastEventID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/v1/asks/"+ticket+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("open stream: %d %s", resp.StatusCode, b)
	}
	return resp
}

// frameReader reads SSE frames from a stream body.
type frameReader struct{ br *bufio.Reader }

func newFrameReader(r io.Reader) *frameReader { return &frameReader{br: bufio.NewReader(r)} }

// next returns the next event frame (comments skipped), or io.EOF at the end of the body.
func (r *frameReader) next() (frame, error) {
	var f frame
	seen := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				return frame{}, io.EOF
			}
			return frame{}, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if seen {
				return f, nil
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				return frame{}, err
			}
			f.id, seen = n, true
		case strings.HasPrefix(line, "event: "):
			f.typ, seen = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			f.data, seen = strings.TrimPrefix(line, "data: "), true
		default:
			return frame{}, errors.New("unexpected SSE line " + strconv.Quote(line))
		}
	}
}

// events reads the whole stream of ticket from after lastEventID ("" for all) until it closes.
func (a *api) events(ctx context.Context, t testing.TB, token, ticket, lastEventID string) []frame {
	t.Helper()
	resp := a.openStream(ctx, t, token, ticket, lastEventID)
	defer resp.Body.Close()
	fr := newFrameReader(resp.Body)
	var out []frame
	for {
		f, err := fr.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("stream of %s: %v", ticket, err)
		}
		out = append(out, f)
	}
}

// checkLog asserts the promises every finished log keeps and returns its terminal event: seq
// from first upwards with gaps only where step events were evicted (allowStepGaps), one branch
// open before and one close after everything else, exactly one terminal, and exactly one done,
// last, naming the terminal's type.
func checkLog(t testing.TB, frames []frame, first int64, allowStepGaps bool) envelope {
	t.Helper()
	if len(frames) == 0 {
		t.Fatalf("empty log")
	}
	var terminal *envelope
	opens, closes, dones := 0, 0, 0
	want := first
	for i, f := range frames {
		e := f.env(t)
		if e.Seq != f.id || e.Type != f.typ {
			t.Fatalf("frame %d: id %d type %s, but its data says seq %d type %s", i, f.id, f.typ, e.Seq, e.Type)
		}
		if f.id != want {
			if !allowStepGaps || f.id < want {
				t.Fatalf("seq %d where %d was due (%v)", f.id, want, seqs(frames))
			}
		}
		want = f.id + 1
		switch f.typ {
		case "branch":
			if e.Role == "supervisor" && e.State == "open" {
				opens++
			}
			if e.Role == "supervisor" && e.State == "close" {
				closes++
			}
		case "answer", "abstention", "refusal", "error":
			if terminal != nil {
				t.Fatalf("second terminal event %s after %s", f.typ, terminal.Type)
			}
			terminal = &e
		case "done":
			dones++
			if i != len(frames)-1 {
				t.Fatalf("done is not last: %v", types(frames))
			}
			if terminal == nil || e.Outcome != terminal.Type {
				t.Fatalf("done outcome %q does not name the terminal event (%v)", e.Outcome, types(frames))
			}
		case "step":
			if terminal != nil {
				t.Fatalf("step after the terminal event: %v", types(frames))
			}
		}
	}
	if dones != 1 || terminal == nil {
		t.Fatalf("log has %d done and terminal %v: %v", dones, terminal != nil, types(frames))
	}
	if first == 1 && (opens != 1 || closes != 1) {
		t.Fatalf("log has %d supervisor opens and %d closes: %v", opens, closes, types(frames))
	}
	return *terminal
}

func seqs(frames []frame) []int64 {
	out := make([]int64, len(frames))
	for i, f := range frames {
		out[i] = f.id
	}
	return out
}

func types(frames []frame) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = f.typ
	}
	return out
}

// stubCalls counts the llm-stub's chat completions so far.
func stubCalls(s *stack.Stack) int {
	n := 0
	for _, r := range s.Stub.Requests() {
		if strings.HasSuffix(r.Path, "/chat/completions") {
			n++
		}
	}
	return n
}

// auditLines counts the demo source's audit entries so far.
func auditLines(ctx context.Context, t testing.TB, s *stack.Stack) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.SourceURL+"/audit", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("audit: %d %v", resp.StatusCode, err)
	}
	return bytes.Count(b, []byte("\n"))
}

// problem decodes a problem+json body, failing unless it is one with status want.
func problem(t testing.TB, r response, want int) gen.Problem {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p gen.Problem
	if err := json.Unmarshal(r.body, &p); err != nil || p.Status != want {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	return p
}
