package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/gen"
)

// problem is an error that renders as an RFC 9457 problem+json response. Every error a handler
// or middleware returns is mapped to one in errorHandler, the one place statuses are chosen.
// Its fields never hold the question text or a token.
type problem struct {
	status     int
	typ        string // the problem type URI; "" means about:blank
	detail     string
	ticket     string   // for 409: the running ticket
	violations []string // for 400: what the request broke
	retryAfter int      // seconds; for 429 and 503
}

func (p *problem) Error() string { return "problem " + strconv.Itoa(p.status) + ": " + p.detail }

// errNotFound is the one answer for unknown and not-yours alike: same status, same body.
var errNotFound = &problem{status: http.StatusNotFound, detail: "no such resource"}

// Retry-After values, in seconds.
const (
	retryInFlight = 2
	retryFull     = 5
	retryDraining = 5
	// retryOwnerFull: an identity at its cap of conversations or tickets gets one back when
	// the oldest idle one's TTL ends, which may be anything up to the TTL; this is how often
	// to look.
	retryOwnerFull = 30
)

func badRequest(detail string, violations ...string) *problem {
	return &problem{status: http.StatusBadRequest, detail: detail, violations: violations}
}

// errorHandler is Echo's HTTPErrorHandler: everything becomes problem+json, never Echo's own
// JSON. Unknown errors are logged and answered as a bare 500.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		p := asProblem(err)
		if p.status >= 500 && p.retryAfter == 0 {
			log.Error("request failed", "method", c.Request().Method, "route", c.Path(), "err", err)
		}
		writeProblem(c.Response(), p)
	}
}

// asProblem maps any error to a problem.
func asProblem(err error) *problem {
	var p *problem
	if errors.As(err, &p) {
		return p
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge()
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return errNotFound
		case http.StatusRequestEntityTooLarge:
			return tooLarge()
		}
		if he.Code >= 400 && he.Code < 500 {
			return &problem{status: he.Code, detail: "the request does not satisfy the API description"}
		}
	}
	return &problem{status: http.StatusInternalServerError, detail: "internal error"}
}

func tooLarge() *problem {
	return &problem{status: http.StatusRequestEntityTooLarge, detail: "the request body is larger than the service accepts"}
}

func writeProblem(w http.ResponseWriter, p *problem) {
	body := gen.Problem{Type: "about:blank", Title: http.StatusText(p.status), Status: p.status}
	if p.typ != "" {
		body.Type = p.typ
	}
	if p.detail != "" {
		body.Detail = &p.detail
	}
	if p.ticket != "" {
		body.Ticket = &p.ticket
	}
	if len(p.violations) > 0 {
		body.Errors = &p.violations
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	w.WriteHeader(p.status)
	_ = json.NewEncoder(w).Encode(body)
}
