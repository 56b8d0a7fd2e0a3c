package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
)

// authenticate admits only a bearer the Authenticator accepts, and puts the identity in the
// request context (ask.WithIdentity). Otherwise: 401 problem+json with a WWW-Authenticate
// challenge, rendered by errorHandler like every other problem. The token is never logged.
//
// The check runs in identify, not in the middleware's own frame: a stream stays parked under
// this frame for minutes, and a shallow stack is one the GC can shrink (see StreamEvents).
func (s *Server) authenticate() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := s.identify(c); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// identify puts the bearer's identity in c's request context, or returns the 401 problem (the
// 503 while no signing key is known to check it with).
func (s *Server) identify(c echo.Context) error {
	req := c.Request()
	token, bad := auth.Credential(req)
	if bad != nil {
		// Malformed credentials (two Authorization headers, the Bearer scheme with no token):
		// RFC 6750 §3.1's invalid_request, a 400 with a Bearer challenge (§3).
		p := badRequest(auth.InvalidRequestDetail(bad))
		p.challenge = auth.Challenge(bad)
		return p
	}
	if token == "" {
		return unauthorized(req, nil)
	}
	id, err := s.opts.Authenticator.Authenticate(req.Context(), token)
	if errors.Is(err, auth.ErrKeysNotLoaded) {
		// The bearer could not be checked at all (no signing key is known yet): the service
		// is not ready, the token may well be good. A 401 would tell the client to drop it.
		s.log.DebugContext(req.Context(), "bearer not checked: no signing keys are known yet", "route", c.Path())
		return errKeysNotLoaded
	}
	if err != nil || id.OID == "" {
		if err == nil {
			err = errors.New("identity without oid")
		}
		s.log.DebugContext(req.Context(), "bearer rejected", "route", c.Path(), "err", err)
		return unauthorized(req, err)
	}
	c.SetRequest(req.WithContext(ask.WithIdentity(req.Context(), id)))
	return nil
}

// limitBody reads the request body up to MaxBodyBytes, answering 413 beyond, so the
// validator and the handler see a body that is known to fit. The reading runs in readBody,
// off the frame a stream parks under (see authenticate).
func (s *Server) limitBody() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := s.readBody(c); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// readBody replaces the request's body with the same bytes read in full, or fails with 413
// beyond MaxBodyBytes, 408 when it did not arrive within BodyReadTimeout of the header, and 400
// when it cannot be read.
func (s *Server) readBody(c echo.Context) error {
	limit := s.opts.MaxBodyBytes
	req := c.Request()
	if req.ContentLength > limit {
		return tooLarge(limit)
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	b, err := readAtMost(http.MaxBytesReader(c.Response().Writer, req.Body, limit), req.ContentLength)
	if err == nil {
		// The body is in: lift edge's deadline, so that nothing the handler waits for (the
		// store) meets it through net/http's read for the client's close.
		_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errBodyTimeout // edge's deadline (BodyReadTimeout) passed before the body was in
		}
		return badRequest("the request body could not be read")
	}
	br := newBodyReader(b)
	req.Body = br
	req.ContentLength = int64(len(b))
	// The validator re-reads the body through GetBody, so the handler after it gets one of
	// these too and takes the bytes as they are (requestBody) instead of reading them again.
	req.GetBody = br.again
	return nil
}

// readAtMost reads r to its end: into one buffer of the declared length when the request
// declares it (the usual case, and the one that allocates once), else as io.ReadAll does. A
// body longer than it declared is read on in full, so the limit still answers for it.
func readAtMost(r io.Reader, declared int64) ([]byte, error) {
	if declared <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, declared, declared+1)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err // shorter than it said: unreadable
	}
	var one [1]byte
	switch n, err := r.Read(one[:]); {
	case n == 0 && err == io.EOF:
		return b, nil
	case err != nil && err != io.EOF:
		return nil, err
	default:
		rest, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return append(append(b, one[:n]...), rest...), nil
	}
}

// bodyReader is a request body readBody has read whole: a reader over its bytes that also
// hands the bytes over.
type bodyReader struct {
	bytes.Reader
	b []byte
}

func newBodyReader(b []byte) *bodyReader {
	br := &bodyReader{b: b}
	br.Reset(b)
	return br
}

func (*bodyReader) Close() error { return nil }

// again is a new reader over the same bytes (the request's GetBody).
func (br *bodyReader) again() (io.ReadCloser, error) { return newBodyReader(br.b), nil }

// requestBody is the request's body, taken whole from readBody's reader when it is one,
// else read.
func requestBody(req *http.Request) ([]byte, error) {
	if br, ok := req.Body.(*bodyReader); ok {
		return br.b, nil
	}
	return io.ReadAll(req.Body)
}

// storeServed ends a store outage (newStoreOutage) at the first request of an operation that
// reads or writes the store answered 2xx. streamEvents is left out: a stream may be served from
// a replica's memory while its store is away, and ends long after it began.
func (s *Server) storeServed() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if st := c.Response().Status; err == nil && st >= 200 && st < 300 {
				// The line is the outage's, not this request's: no request id.
				s.outage.OK(context.Background(), s.log, "store available again: requests served")
			}
			return err
		}
	}
}

// observe logs every request at debug level (method, route template, status, duration: never
// the path's values beyond the route, a body or a header) and turns a handler panic into a
// logged 500 problem. The panic value is not logged: it could hold anything. Both lines are
// logged with the request's context, so a logger that reads it (obs.LogHandler) names the
// request id the response carried: the 500's client can find the stack.
func (s *Server) observe() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			start := time.Now()
			defer func() {
				if v := recover(); v != nil {
					s.log.ErrorContext(c.Request().Context(), "handler panicked", "route", c.Path(), "panic_type", fmt.Sprintf("%T", v), "stack", string(debug.Stack()))
					err = internalError()
				}
				status := c.Response().Status
				if err != nil && !c.Response().Committed {
					status = asProblem(err).status
				}
				s.log.DebugContext(c.Request().Context(), "request", "method", c.Request().Method, "route", c.Path(), "status", status,
					"ms", time.Since(start).Milliseconds())
			}()
			return next(c)
		}
	}
}
