package conformance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// checkEveryResponseHeaders: the contract has every response the service answers carry
// X-Request-Id (the id to quote when reporting a problem) and X-Content-Type-Options: nosniff
// (no browser reads a body as another type than it is served as). A handler outside the
// service's common path (a stream, a refusal made before the operation runs) is where a
// service leaves them out. The HTTP layer's own refusals, which the contract excepts, are
// not the service's answers.
func checkEveryResponseHeaders(ctx context.Context, s *session) verdict {
	if _, err := s.allRuns(ctx); err != nil {
		return broken(err)
	}
	exchanges, _ := s.rec.snapshot()
	heads := s.rec.heads()
	var found []string
	n := 0
	judge := func(what string, status int, h http.Header) {
		if httpLayerRefusal(status, h) {
			return
		}
		n++
		var bad []string
		if strings.TrimSpace(h.Get("X-Request-Id")) == "" {
			bad = append(bad, "no X-Request-Id")
		}
		if v := h.Get("X-Content-Type-Options"); !strings.EqualFold(strings.TrimSpace(v), "nosniff") {
			bad = append(bad, fmt.Sprintf("X-Content-Type-Options %q", v))
		}
		if len(bad) > 0 {
			found = append(found, fmt.Sprintf("the %d of %s: %s", status, what, strings.Join(bad, ", ")))
		}
	}
	for _, x := range exchanges {
		judge(x.Method+" "+templateOf(x), x.Status, x.Header)
	}
	for _, h := range heads {
		judge("the stream GET "+templateOf(exchange{Method: http.MethodGet, Path: h.Path}), h.Status, h.Header)
	}
	return problems("every response to carry X-Request-Id and X-Content-Type-Options: nosniff", found,
		fmt.Sprintf("%d responses (JSON bodies, errors and streams): each with X-Request-Id and X-Content-Type-Options: nosniff", n))
}

// httpLayerRefusal reports whether a response is one the contract says the HTTP layer gives
// before the service sees the request, without X-Request-Id: 400, 431, 501 or 505 with a
// text/plain body, or 417.
func httpLayerRefusal(status int, h http.Header) bool {
	switch status {
	case http.StatusExpectationFailed:
		return true
	case http.StatusBadRequest, http.StatusRequestHeaderFieldsTooLarge, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return mediaType(h) == "text/plain"
	}
	return false
}
