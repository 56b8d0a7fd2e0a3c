package obs_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask/obs"
)

func TestRequestIDs(t *testing.T) {
	o := obs.New(obs.Options{})
	var seen string
	h := o.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = obs.RequestID(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tc := range []struct {
		name, given string
		echoed      bool
	}{
		{"well-formed", "gw-12.ab:cd_EF", true},
		{"none", "", false},
		{"forged log line", "abc\n{\"msg\":\"x\"}", false},
		{"space", "a b", false},
		{"too long", strings.Repeat("a", 129), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/ask/v1/openapi.yaml", nil)
			if tc.given != "" {
				req.Header.Set("X-Request-Id", tc.given)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := rec.Header().Get("X-Request-Id")
			if got == "" || got != seen {
				t.Fatalf("response id %q, context id %q: want the same, non-empty", got, seen)
			}
			if (got == tc.given) != tc.echoed {
				t.Errorf("id %q for %q: echoed = %v, want %v", got, tc.given, got == tc.given, tc.echoed)
			}
		})
	}
}

// TestStreamsAndFlushing: a stream counts as open while its handler runs, a cursor counts a
// reconnect, and flushing reaches the client through the wrapper.
func TestStreamsAndFlushing(t *testing.T) {
	o := obs.New(obs.Options{})
	inside := make(chan float64, 1)
	h := o.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush through the wrapper: %v", err)
		}
		inside <- value(gather(t, o), "ask_streams_open")
	}))
	for _, cursor := range []string{"", "5"} {
		req := httptest.NewRequest(http.MethodGet, "/ask/v1/asks/t_X/events", nil)
		if cursor != "" {
			req.Header.Set("Last-Event-ID", cursor)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := <-inside; got != 1 {
			t.Errorf("streams open inside the handler: %v, want 1", got)
		}
		if !rec.Flushed {
			t.Error("the stream was not flushed")
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/ask/v1/asks/t_X/events?after=3", nil)
	h.ServeHTTP(httptest.NewRecorder(), req)
	<-inside
	fams := gather(t, o)
	if got := value(fams, "ask_streams_open"); got != 0 {
		t.Errorf("streams open after: %v, want 0", got)
	}
	if got := value(fams, "ask_stream_reconnects_total"); got != 2 {
		t.Errorf("reconnects %v, want 2 (Last-Event-ID and after)", got)
	}
	if got := value(fams, "ask_http_requests_total", "route", "stream_events", "method", "GET", "code", "200"); got != 3 {
		t.Errorf("stream requests %v, want 3", got)
	}
	// A HEAD of the stream, cursor and all, opens nothing: it is a request, not a stream or a
	// reconnect.
	head := o.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		inside <- value(gather(t, o), "ask_streams_open")
	}))
	req = httptest.NewRequest(http.MethodHead, "/ask/v1/asks/t_X/events", nil)
	req.Header.Set("Last-Event-ID", "5")
	head.ServeHTTP(httptest.NewRecorder(), req)
	if got := <-inside; got != 0 {
		t.Errorf("streams open inside a HEAD: %v, want 0", got)
	}
	fams = gather(t, o)
	if got := value(fams, "ask_stream_reconnects_total"); got != 2 {
		t.Errorf("reconnects after a HEAD %v, want still 2", got)
	}
	if got := value(fams, "ask_http_requests_total", "route", "stream_events", "method", "HEAD", "code", "200"); got != 1 {
		t.Errorf("HEAD stream requests %v, want 1", got)
	}
}

// TestRequestLineMethodIsBounded: the request line names a method the API serves as it is and
// any other as "other", as ask_http_requests_total does: a caller's method is any token, of any
// length, and was written verbatim ("method":"FOOBARMETHOD").
func TestRequestLineMethodIsBounded(t *testing.T) {
	var logs bytes.Buffer
	o := obs.New(obs.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h := o.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))
	for _, tc := range []struct{ method, want string }{
		{http.MethodGet, "GET"}, {http.MethodPost, "POST"}, {http.MethodHead, "HEAD"}, {http.MethodOptions, "OPTIONS"},
		{"FOOBARMETHOD", "other"}, {strings.Repeat("X", 4096), "other"}, {http.MethodDelete, "other"},
	} {
		logs.Reset()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, "/ask/v1/asks/t_X", nil))
		var line struct{ Msg, Method string }
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line.Msg != "request" {
			t.Fatalf("%.20s: request line %q: %v", tc.method, logs.String(), err)
		}
		if line.Method != tc.want {
			t.Errorf("%.20s: the line's method %.40q, want %q", tc.method, line.Method, tc.want)
		}
		if got := value(gather(t, o), "ask_http_requests_total", "route", "get_ask", "method", tc.want, "code", "405"); got == 0 {
			t.Errorf("%.20s: no request counted under method %q", tc.method, tc.want)
		}
	}
}
