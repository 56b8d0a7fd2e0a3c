// Package replay is an httptest server for adapter tests: it answers each request with the next
// canned response, byte for byte as a provider would send it, and records every request so a
// test can assert what the adapter sent.
package replay

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Response is one canned answer.
type Response struct {
	Status int
	Header map[string]string
	Body   string
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server replays responses in order; a request beyond the last gets 500 and fails the test.
type Server struct {
	*httptest.Server
	t         testing.TB
	mu        sync.Mutex
	responses []Response
	requests  []Request
}

// Start starts a server that answers with responses, in order. It closes when tb ends.
func Start(tb testing.TB, responses ...Response) *Server {
	tb.Helper()
	s := &Server{t: tb, responses: responses}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var resp Response
	ok := n < len(s.responses)
	if ok {
		resp = s.responses[n]
	}
	s.mu.Unlock()
	if !ok {
		s.t.Errorf("replay: unexpected request %d to %s", n+1, r.URL.Path)
		http.Error(w, "no more responses", http.StatusInternalServerError)
		return
	}
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.Status)
	io.WriteString(w, resp.Body)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}
