package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// Fuzz targets for the service's edge: arbitrary request bodies through the validator and the
// handlers, and arbitrary cursors (Last-Event-ID and ?after=) on the event stream. Each input
// runs in memory against the real Handler, so an iteration costs microseconds.
//
// Promises checked for every input: no panic, no 5xx other than a 503 with Retry-After (the
// store's capacity), an error is problem+json, and a stream honours its cursor.

const fuzzToken = "fuzz-token-3c1e"

// fuzzAuth accepts one token.
type fuzzAuth struct{}

func (fuzzAuth) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	if tok == fuzzToken {
		return ask.Identity{OID: "fuzzer", Tenant: "t", Token: tok}, nil
	}
	return ask.Identity{}, errors.New("unknown token")
}

// fuzzService is a service over a memory store whose runs answer at once.
type fuzzService struct {
	srv   *server.Server
	h     http.Handler
	store *store.Memory
}

func newFuzzService(tb testing.TB) *fuzzService {
	tb.Helper()
	st := store.NewMemory(store.MemoryOptions{TTL: time.Hour, MaxEvents: 64})
	srv, err := server.New(server.Options{
		Authenticator: fuzzAuth{},
		Runner: ask.RunnerFunc(func(_ context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
			emit.Step(gen.StepBody{CallId: "c1", Tool: "run_query", Source: "demo", Args: map[string]any{}})
			return ask.Outcome{Answer: &gen.AnswerBody{Text: "42", Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFast}}}
		}),
		Store: st,
		// Bounds the memory of a long `make fuzz` run; beyond it a valid body gets a 503. The
		// one identity may use all of it, and the one conversation hold as many turns.
		MaxInFlight:           20000,
		MaxTickets:            20000,
		MaxConversationsPerID: 20000,
		MaxRetainedPerID:      20000,
		MaxTurns:              20000,
		MaxEvents:             64,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
		st.Close()
	})
	return &fuzzService{srv: srv, h: srv.Handler(), store: st}
}

func (s *fuzzService) do(method, target, contentType string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://ask.test"+target, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fuzzToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, req)
	return w
}

func (s *fuzzService) conversation(tb testing.TB) string {
	tb.Helper()
	w := s.do(http.MethodPost, "/ask/v1/conversations", "application/json", []byte("{}"), nil)
	var c gen.Conversation
	if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &c) != nil {
		tb.Fatalf("create conversation: %d %s", w.Code, w.Body)
	}
	return c.Id
}

// wait blocks until the ticket's run has ended (the runner answers at once).
func (s *fuzzService) wait(tb testing.TB, ticket string) {
	tb.Helper()
	w := s.do(http.MethodGet, "/ask/v1/asks/"+ticket, "", nil, map[string]string{"Prefer": "wait=10"})
	var st gen.AskStatus
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &st) != nil || st.Done == nil {
		tb.Fatalf("ticket %s did not finish: %d %s", ticket, w.Code, w.Body)
	}
}

// checkProblem fails unless w is a well-formed problem+json with an allowed status.
func checkProblem(tb testing.TB, w *httptest.ResponseRecorder, allowed ...int) {
	tb.Helper()
	okStatus := false
	for _, s := range allowed {
		okStatus = okStatus || w.Code == s
	}
	if !okStatus {
		tb.Fatalf("status %d, want one of %v: %s", w.Code, allowed, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("status %d with Content-Type %q, want application/problem+json", w.Code, ct)
	}
	var p gen.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != w.Code {
		tb.Fatalf("problem body does not decode or names another status (%v): %s", err, w.Body)
	}
	if (w.Code == http.StatusTooManyRequests || w.Code == http.StatusServiceUnavailable) && w.Header().Get("Retry-After") == "" {
		tb.Fatalf("status %d without Retry-After", w.Code)
	}
}

// FuzzCreateAskBody posts arbitrary bodies and content types to createAsk. Whatever arrives,
// the answer is 202 with a ticket whose run then ends, or a 4xx problem; never a 5xx, never a
// ticket for a body that is not an AskRequest.
func FuzzCreateAskBody(f *testing.F) {
	f.Add([]byte(`{"question":"How many sev1 incidents did we have in 2026-Q2?"}`), "application/json")
	f.Add([]byte(`{"question":""}`), "application/json")
	f.Add([]byte(`{"question":"x","extra":1}`), "application/json")
	f.Add([]byte(`{"question":42}`), "application/json")
	f.Add([]byte(`{"question":"a"}{"question":"b"}`), "application/json")
	f.Add([]byte(`[]`), "application/json")
	f.Add([]byte(`null`), "application/json")
	f.Add([]byte(`{"question":"\u0000\ud800"}`), "application/json; charset=utf-8")
	f.Add([]byte(`question=x`), "application/x-www-form-urlencoded")
	f.Add([]byte(`{"question":"x"}`), "text/plain")
	f.Add([]byte(``), "")
	f.Add([]byte(strings.Repeat(`[`, 10000)), "application/json")
	s := newFuzzService(f)
	cid := s.conversation(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		if !validHeaderValue(contentType) {
			t.Skip()
		}
		w := s.do(http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", contentType, body, nil)
		if w.Code == http.StatusAccepted {
			var tk gen.Ticket
			if err := json.Unmarshal(w.Body.Bytes(), &tk); err != nil || !strings.HasPrefix(tk.Ticket, "t_") {
				t.Fatalf("202 without a ticket: %s", w.Body)
			}
			var req gen.AskRequest
			if json.Unmarshal(body, &req) != nil || req.Question == "" {
				t.Fatalf("a ticket was issued for a body that is not an AskRequest: %q", body)
			}
			s.wait(t, tk.Ticket)
			return
		}
		checkProblem(t, w, http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge,
			http.StatusUnsupportedMediaType, http.StatusTooManyRequests, http.StatusServiceUnavailable)
	})
}

// FuzzConversationBody posts arbitrary bodies to createConversation: 201 or a 4xx problem.
func FuzzConversationBody(f *testing.F) {
	f.Add([]byte(`{}`), "application/json")
	f.Add([]byte(`{"x":1}`), "application/json")
	f.Add([]byte(`not json`), "application/json")
	f.Add([]byte(``), "")
	s := newFuzzService(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		if !validHeaderValue(contentType) {
			t.Skip()
		}
		w := s.do(http.MethodPost, "/ask/v1/conversations", contentType, body, nil)
		if w.Code == http.StatusCreated {
			return
		}
		checkProblem(t, w, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
			http.StatusTooManyRequests, http.StatusServiceUnavailable)
	})
}

// FuzzStreamCursor sends arbitrary Last-Event-ID headers and ?after= values to a finished
// ticket's stream. A valid cursor (a decimal integer from 0 to the last seq) streams exactly
// the events after it, ending with done; anything else is a 400 problem. The header wins.
func FuzzStreamCursor(f *testing.F) {
	f.Add("", "", false, false)
	f.Add("0", "", true, false)
	f.Add("3", "", true, false)
	f.Add("", "2", false, true)
	f.Add("5", "1", true, true)
	f.Add("-1", "", true, false)
	f.Add("+1", "", true, false)
	f.Add(" 1", "", true, false)
	f.Add("1e3", "", true, false)
	f.Add("99999999999999999999", "", true, false)
	f.Add("", "-5", false, true)
	f.Add("", "1.5", false, true)
	f.Add("0x10", "abc", true, true)
	s := newFuzzService(f)
	cid := s.conversation(f)
	w := s.do(http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", "application/json", []byte(`{"question":"q"}`), nil)
	var tk gen.Ticket
	if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &tk) != nil {
		f.Fatalf("create ask: %d %s", w.Code, w.Body)
	}
	s.wait(f, tk.Ticket)
	st, err := s.store.Ticket(context.Background(), tk.Ticket)
	if err != nil {
		f.Fatal(err)
	}
	last := st.LastSeq

	f.Fuzz(func(t *testing.T, lastEventID, after string, setHeader, setQuery bool) {
		if !validHeaderValue(lastEventID) || (setHeader && lastEventID == "") {
			t.Skip() // an empty Last-Event-ID is as good as none (WHATWG does not send it)
		}
		target := "/ask/v1/asks/" + tk.Ticket + "/events"
		if setQuery {
			target += "?" + url.Values{"after": {after}}.Encode()
		}
		hdr := map[string]string{}
		if setHeader {
			hdr["Last-Event-ID"] = lastEventID
		}
		w := s.do(http.MethodGet, target, "", nil, hdr)

		// The expected cursor, by the contract.
		cursor, valid := int64(0), true
		switch {
		case setHeader:
			// The contract: a decimal integer, digits only (^[0-9]{1,18}$), so "-0" and "+1" are not.
			n, err := strconv.ParseInt(lastEventID, 10, 64)
			valid = err == nil && digitsOnly(lastEventID) && len(lastEventID) <= 18 && n <= last
			cursor = n
		case setQuery:
			// after is written as Last-Event-ID is: so "+1", "-0" and 19 digits are not.
			n, err := strconv.ParseInt(after, 10, 64)
			valid = err == nil && digitsOnly(after) && len(after) <= 18 && n <= last
			cursor = n
		}
		if setHeader && setQuery {
			// The header wins, but a malformed query parameter is still a malformed request.
			if !digitsOnly(after) || len(after) > 18 {
				valid = false
			}
		}
		if !valid {
			if w.Code == http.StatusOK {
				t.Fatalf("cursor header=%v %q query=%v %q: 200, want 400", setHeader, lastEventID, setQuery, after)
			}
			checkProblem(t, w, http.StatusBadRequest)
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("valid cursor %d: status %d %s", cursor, w.Code, w.Body)
		}
		ids := frameIDs(t, w.Body.Bytes())
		var want []int64
		for seq := cursor + 1; seq <= last; seq++ {
			want = append(want, seq)
		}
		if !equalInts(ids, want) {
			t.Fatalf("cursor %d: stream ids %v, want %v", cursor, ids, want)
		}
	})
}

// FuzzGetAskPrefer sends arbitrary Prefer headers to getAsk on a finished ticket: always 200
// with the ticket's state, at once; a wait the service applied is at most 60 seconds.
func FuzzGetAskPrefer(f *testing.F) {
	for _, s := range []string{"wait=5", "WAIT=1", "wait=\"3\"", "respond-async, wait=10", "wait=9223372036854775807",
		"wait=-1", "wait=", "wait=1e3", "return=minimal;wait=2", "wait=99999999999999999999", ",,,;;;="} {
		f.Add(s)
	}
	s := newFuzzService(f)
	cid := s.conversation(f)
	w := s.do(http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", "application/json", []byte(`{"question":"q"}`), nil)
	var tk gen.Ticket
	if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &tk) != nil {
		f.Fatalf("create ask: %d %s", w.Code, w.Body)
	}
	s.wait(f, tk.Ticket)
	f.Fuzz(func(t *testing.T, prefer string) {
		if !validHeaderValue(prefer) {
			t.Skip()
		}
		start := time.Now()
		w := s.do(http.MethodGet, "/ask/v1/asks/"+tk.Ticket, "", nil, map[string]string{"Prefer": prefer})
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("a finished ticket took %s to answer", took)
		}
		if w.Code != http.StatusOK {
			checkProblem(t, w, http.StatusBadRequest)
			return
		}
		var st gen.AskStatus
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Done == nil {
			t.Fatalf("status body: %v %s", err, w.Body)
		}
		if pa := w.Header().Get("Preference-Applied"); pa != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(pa, "wait="))
			if err != nil || n < 0 || n > 60 {
				t.Fatalf("Preference-Applied %q", pa)
			}
		}
	})
}

// frameIDs returns the id of every frame of an SSE body.
func frameIDs(tb testing.TB, body []byte) []int64 {
	tb.Helper()
	var ids []int64
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatalf("frame id %q", v)
			}
			ids = append(ids, n)
		}
	}
	return ids
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v could arrive as an HTTP header value (net/http rejects
// control characters other than tab on the wire, so the handler never sees them).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}

// digitsOnly reports whether s is one or more ASCII digits.
func digitsOnly(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
