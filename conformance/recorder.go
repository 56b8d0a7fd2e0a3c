package conformance

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
)

// exchange is one JSON (or problem+json) response, or error response of any type, the suite
// received, kept for schema validation.
type exchange struct {
	Method string
	// Path is the request path relative to the base URL, e.g. /v1/asks/tk_1.
	Path   string
	Status int
	Header http.Header
	Body   []byte
}

// recorder keeps every JSON response and every event the suite saw, for the schema and privacy
// checks made at the end. Safe for concurrent use.
type recorder struct {
	basePath string

	mu        sync.Mutex
	exchanges []exchange
	events    []event
	streams   []streamHead
	comments  []streamComment
}

// streamComment is the text of one comment a ticket's stream carried (a keep-alive, the
// stream's opening line): the privacy checks read it as they read every event.
type streamComment struct {
	Ticket, Text string
}

func (r *recorder) comment(ticket, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.comments = append(r.comments, streamComment{Ticket: ticket, Text: text})
}

// streamComments returns every comment recorded so far.
func (r *recorder) streamComments() []streamComment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]streamComment(nil), r.comments...)
}

// streamHead is the response head of one GET of a ticket's events, whatever its status: the
// privacy checks read its header values as they read every other response's.
type streamHead struct {
	Path   string
	Status int
	Header http.Header
}

func (r *recorder) stream(path string, status int, h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams = append(r.streams, streamHead{Path: strings.TrimPrefix(path, r.basePath), Status: status, Header: h.Clone()})
}

// heads returns every stream's response head recorded so far.
func (r *recorder) heads() []streamHead {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]streamHead(nil), r.streams...)
}

func (r *recorder) event(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) snapshot() ([]exchange, []event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.exchanges...), append([]event(nil), r.events...)
}

// doer makes the suite's calls through hc and records every response that is not an event
// stream. It implements gen.HttpRequestDoer.
type doer struct {
	hc  *http.Client
	rec *recorder
}

// maxBody bounds a recorded response body.
const maxBody = 4 << 20

func (d doer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if mediaType(resp.Header) == "text/event-stream" {
		d.rec.stream(req.URL.Path, resp.StatusCode, resp.Header)
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	// Every error is kept, whatever its type: an error that is not problem+json is one the
	// schema check must see, not one it may overlook.
	if mt := mediaType(resp.Header); mt == "application/json" || mt == "application/problem+json" || resp.StatusCode >= 400 {
		d.rec.mu.Lock()
		d.rec.exchanges = append(d.rec.exchanges, exchange{
			Method: req.Method,
			Path:   strings.TrimPrefix(req.URL.Path, d.rec.basePath),
			Status: resp.StatusCode,
			Header: resp.Header.Clone(),
			Body:   body,
		})
		d.rec.mu.Unlock()
	}
	return resp, nil
}

// mediaType is the response's Content-Type without parameters, lower case.
func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}
