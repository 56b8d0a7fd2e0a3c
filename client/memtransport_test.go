package client_test

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// memTransport serves requests with an http.Handler over io.Pipe, with no socket, so tests in a
// testing/synctest bubble block durably and the fake clock can advance. Closing the response
// body, or cancelling the request's context, cancels the handler's request context.
type memTransport struct{ h http.Handler }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &memWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer func() { _ = pw.Close() }()
		sreq := req.Clone(ctx)
		if sreq.Body == nil {
			sreq.Body = http.NoBody
		}
		m.h.ServeHTTP(w, sreq)
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
		Header: w.sent, Body: &memBody{PipeReader: pr, cancel: cancel}, Request: req,
	}, nil
}

type memBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *memBody) Close() error { b.cancel(); return b.PipeReader.Close() }

type memWriter struct {
	mu     sync.Mutex
	header http.Header
	sent   http.Header
	status int
	body   *io.PipeWriter
	ready  chan struct{}
}

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) commit(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent != nil {
		return
	}
	w.status, w.sent = status, w.header.Clone()
	close(w.ready)
}

func (w *memWriter) WriteHeader(status int) { w.commit(status) }

func (w *memWriter) Write(p []byte) (int, error) {
	w.commit(http.StatusOK)
	return w.body.Write(p)
}

func (w *memWriter) Flush() { w.commit(http.StatusOK) }
