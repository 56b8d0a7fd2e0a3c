package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/auth"
)

// authenticate admits only a bearer the Authenticator accepts, and puts the identity in the
// request context. Otherwise: 401 problem+json with a WWW-Authenticate challenge (package
// auth renders both). The token is never logged.
func (s *Server) authenticate() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			token, ok := auth.BearerToken(req)
			if !ok {
				auth.WriteUnauthorized(c.Response(), req, nil)
				return nil
			}
			id, err := s.opts.Authenticator.Authenticate(req.Context(), token)
			if err != nil || id.OID == "" {
				if err == nil {
					err = errors.New("identity without oid")
				}
				s.log.Debug("bearer rejected", "route", c.Path(), "err", err)
				auth.WriteUnauthorized(c.Response(), req, err)
				return nil
			}
			c.SetRequest(req.WithContext(auth.WithIdentity(req.Context(), id)))
			return next(c)
		}
	}
}

// admitting answers 503 while the server is shutting down.
func (s *Server) admitting() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			s.mu.Lock()
			draining := s.draining
			s.mu.Unlock()
			if draining {
				return unavailable()
			}
			return next(c)
		}
	}
}

// limitBody reads the request body up to MaxBodyBytes, answering 413 beyond, so the
// validator and the handler see a body that is known to fit.
func (s *Server) limitBody() echo.MiddlewareFunc {
	limit := s.opts.MaxBodyBytes
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > limit {
				return tooLarge()
			}
			if req.Body == nil || req.Body == http.NoBody {
				return next(c)
			}
			b, err := io.ReadAll(http.MaxBytesReader(c.Response().Writer, req.Body, limit))
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					return tooLarge()
				}
				return badRequest("the request body could not be read")
			}
			req.Body = io.NopCloser(bytes.NewReader(b))
			req.ContentLength = int64(len(b))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
			return next(c)
		}
	}
}
