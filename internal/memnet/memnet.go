// Package memnet is an http.RoundTripper that serves requests with an http.Handler in process,
// over io.Pipe and with no socket, for tests in a testing/synctest bubble: a goroutine that
// waits on a pipe blocks durably, so the fake clock can advance, where one that waits on a
// socket would not.
package memnet

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// Transport serves each request with Handler. The response is returned as soon as the handler
// commits its headers (WriteHeader, the first Write, a Flush, or returning); the body then
// streams through a pipe, so a handler's write waits for the client to read. Closing the
// response body, or cancelling the request's context, cancels the handler's request context.
type Transport struct{ Handler http.Handler }

// RoundTrip implements http.RoundTripper.
func (m Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &writer{header: http.Header{}, body: pw, ready: make(chan struct{})}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer func() { _ = pw.Close() }()
		sreq := req.Clone(ctx)
		if sreq.Body == nil {
			// As a net/http server does: a request always has a body.
			sreq.Body = http.NoBody
		}
		m.Handler.ServeHTTP(w, sreq)
		w.commit(http.StatusOK)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = pr.CloseWithError(ctx.Err())
		case <-finished:
		}
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &body{PipeReader: pr, cancel: cancel}, Request: req,
	}, nil
}

// body is the client's side: closing it cancels the handler's request context.
type body struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *body) Close() error { b.cancel(); return b.PipeReader.Close() }

// writer is the handler's side: headers are committed on WriteHeader, the first Write or
// Flush; the body goes through the pipe, so a handler's write waits for the client to read.
type writer struct {
	mu     sync.Mutex
	header http.Header
	sent   http.Header
	status int
	body   *io.PipeWriter
	ready  chan struct{}
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) commit(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent != nil {
		return
	}
	w.status, w.sent = status, w.header.Clone()
	close(w.ready)
}

func (w *writer) WriteHeader(status int) { w.commit(status) }

func (w *writer) Write(p []byte) (int, error) {
	w.commit(http.StatusOK)
	return w.body.Write(p)
}

// Flush commits the headers, for handlers that assert http.Flusher.
func (w *writer) Flush() { w.commit(http.StatusOK) }

// FlushError commits the headers, for handlers that flush through http.ResponseController.
func (w *writer) FlushError() error { w.commit(http.StatusOK); return nil }
