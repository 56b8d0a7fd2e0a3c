package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
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

// errLost answers for a ticket or conversation the store lost when it restarted without
// persistence (its id names an earlier generation of the store): still 404, as it is gone,
// but not the answer for someone else's, so a client can tell it was lost and ask again.
var errLost = &problem{status: http.StatusNotFound,
	detail: "lost: the service's store restarted without persistence and lost this; ask again"}

// errStoreUnavailable answers a request the store could not serve now (a restart, a pause, a
// network fault): nothing was half-created that a retry would conflict with, as every store
// write is idempotent.
var errStoreUnavailable = &problem{status: http.StatusServiceUnavailable,
	detail: "the service's store is unavailable for the moment; retry shortly", retryAfter: retryStore}

// Retry-After values, in seconds.
const (
	// retryStore: a store that restarts or fails over is back within seconds.
	retryStore    = 2
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
		if gone(err, c) {
			// The client went away mid-request: nobody is there to answer, and nothing failed
			// on this side. 499 (nginx's "client closed request") is what the access log and
			// the metrics then show.
			log.Debug("client went away", "method", c.Request().Method, "route", c.Path())
			c.Response().WriteHeader(statusClientGone)
			return
		}
		p := asProblem(err)
		if p.status >= 500 && p.retryAfter == 0 {
			log.Error("request failed", "method", c.Request().Method, "route", c.Path(), "err", err)
		}
		writeProblem(c.Response(), p)
	}
}

// statusClientGone is the status recorded for a request whose client left before the answer.
const statusClientGone = 499

// gone reports whether err is the request's own cancellation: its client went away.
func gone(err error, c echo.Context) bool {
	return errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil
}

// asProblem maps any error to a problem.
func asProblem(err error) *problem {
	var p *problem
	if errors.As(err, &p) {
		return p
	}
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		// A deadline that passed while waiting on the store is the store not answering in
		// time: the same 503.
		return errStoreUnavailable
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
