package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
)

// fakeService is an in-memory ask service for tests that need the fake clock of
// testing/synctest (a real socket does not block durably). The test writes the event stream
// through Send; a cancel is counted and, unlike the real service, ends nothing.
type fakeService struct {
	mu      sync.Mutex
	cancels int
	events  chan string
	// hangCancel makes a cancel never answered: it ends only with its request's context.
	hangCancel bool
	// hangAsk makes a createAsk never answered, like hangCancel.
	hangAsk bool
	// hangToken makes a token request to the dev IdP (POST /token) never answered.
	hangToken bool
}

func newFakeService() *fakeService { return &fakeService{events: make(chan string, 64)} }

func (f *fakeService) Send(frames ...string) {
	for _, fr := range frames {
		f.events <- fr
	}
}

func (f *fakeService) Cancels() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancels
}

func (f *fakeService) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := func(status int, ct string, body io.ReadCloser) *http.Response {
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {ct}}, Body: body, Request: req}
	}
	text := func(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
	p := req.URL.Path
	switch {
	case req.Method == http.MethodPost && p == "/token":
		f.mu.Lock()
		hang := f.hangToken
		f.mu.Unlock()
		if hang {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return resp(200, "application/json", text(`{"access_token":"t","expires_in":3600}`)), nil
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/v1/conversations"):
		return resp(201, "application/json", text(`{"id":"cv","created_at":"2026-11-29T20:00:00Z"}`)), nil
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/asks"):
		f.mu.Lock()
		hang := f.hangAsk
		f.mu.Unlock()
		if hang {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return resp(202, "application/json", text(`{"ticket":"tk","conversation_id":"cv","events_url":"e","status_url":"s","cancel_url":"c","created_at":"2026-11-29T20:00:00Z"}`)), nil
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/cancel"):
		f.mu.Lock()
		f.cancels++
		hang := f.hangCancel
		f.mu.Unlock()
		if hang {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return resp(202, "application/json", text(`{"ticket":"tk","state":"running"}`)), nil
	case req.Method == http.MethodGet && strings.HasSuffix(p, "/events"):
		pr, pw := io.Pipe()
		go func() {
			for {
				select {
				case <-req.Context().Done():
					_ = pw.CloseWithError(req.Context().Err())
					return
				case fr := <-f.events:
					if _, err := io.WriteString(pw, fr); err != nil {
						return
					}
				}
			}
		}()
		return resp(200, "text/event-stream", &ctxBody{PipeReader: pr}), nil
	}
	return resp(404, "application/problem+json", text(`{"type":"about:blank","title":"Not Found","status":404}`)), nil
}

type ctxBody struct{ *io.PipeReader }

func (b *ctxBody) Close() error { return b.PipeReader.CloseWithError(context.Canceled) }

var _ http.RoundTripper = (*fakeService)(nil)
