package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/httpstatus"
	"github.com/das-ask/ask/internal/logthrottle"
	"github.com/das-ask/ask/store"
)

// problem is an error that renders as an RFC 9457 problem+json response. This file is the one
// place statuses are chosen: the constructors below, and asProblem, which maps every other
// error a handler or middleware returns (the store's refusals among them). Handlers return
// errors; errorHandler renders them with writeProblem, the one writer of a problem body (the
// 401 included). Its fields never hold the question text or a token.
type problem struct {
	status     int
	typ        string // the problem type URI; "" means about:blank
	detail     string
	ticket     string   // for 409: the running ticket
	violations []string // for 400: what the request broke
	retryAfter int      // seconds; for 429 and 503
	challenge  string   // for 401 (and the 400 of a malformed Authorization): the WWW-Authenticate value
	instance   string   // for 401: the request's path
	// identityOnly is set on the 415 for a content-coded body: it carries Accept-Encoding:
	// identity, which RFC 9110 §12.5.3 asks of that refusal and forbids on any other 415.
	identityOnly bool
	// reason names the refusal when its status is shared by refusals of different causes (a
	// 429: too many asks in flight, or as many conversations or tickets as an identity may
	// hold; a 409: an ask running in the conversation, or the conversation full; a 503: the
	// service full or shutting down, or its store unavailable), for Hooks.Refused; "" when the
	// status says it.
	reason string
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

// errCreateLate answers a create whose store did not answer within StoreWait (or, with an
// Idempotency-Key, within its longer bound): the store may yet take it, and then the service
// ends that ask at once, unrun, so nothing started that the caller was told was not.
var errCreateLate = &problem{status: http.StatusServiceUnavailable,
	detail: "the service's store did not answer in time; the ask was not started; retry shortly", retryAfter: retryStore}

// errStoreWouldPersist answers an ask the store refused because it would write the question to
// disk readable (its Redis began to persist while the store does not seal): nothing was
// created; the operator has to act, so the retry comes later than a store's restart.
var errStoreWouldPersist = &problem{status: http.StatusServiceUnavailable,
	detail: "the service cannot take a question now: its store would write it to disk unprotected; retry later", retryAfter: retryStoreRefuses}

// errKeysNotLoaded answers a bearer the validator could not check at all: it has never loaded
// its issuer's JWKS (the identity provider is down or not yet up; /readyz says
// jwks_not_loaded). That says nothing against the token, so it is the service's 503, retried
// with the same token, not a 401, which tells a client its token is bad.
var errKeysNotLoaded = &problem{status: http.StatusServiceUnavailable,
	detail: "the service cannot check bearers yet: its identity provider's signing keys have not loaded; retry shortly", retryAfter: retryKeys}

// Retry-After values, in seconds.
const (
	// retryStore: a store that restarts or fails over is back within seconds.
	retryStore = 2
	// retryStoreRefuses: a store that refuses questions waits for an operator (seconds to
	// minutes).
	retryStoreRefuses = 10
	retryInFlight     = 2
	retryFull         = 5
	retryDraining     = 5
	// retryKeys: the validator fetches a JWKS it never loaded again after 1 s, then twice as
	// long each time up to every 30 s, and a request whose kid it lacks fetches it too.
	retryKeys = 5
	// retryOwnerFull: an identity at its cap of conversations or tickets gets one back when
	// the oldest idle one's TTL ends, which the store tells (heldRetry); when it cannot (every
	// one in use by a running ask), this is how often to look.
	retryOwnerFull = 30
	// retryIdemBusy: a key whose first request is in progress (idempotency.go).
	retryIdemBusy = 1
)

// Problem types of the two idempotency refusals.
const (
	problemIdemBusy   = "urn:ask:problem:idempotency-key-in-progress"
	problemIdemReused = "urn:ask:problem:idempotency-key-reused"
)

// badIdemKey is the 400 for an Idempotency-Key that breaks the contract's rule.
func badIdemKey() *problem {
	return badRequest("the Idempotency-Key header is not 1 to 255 characters of A-Z a-z 0-9 - _ . ~ : + / =")
}

// idemReused is the 422 for a key already used for a different request.
func idemReused() *problem {
	return &problem{status: http.StatusUnprocessableEntity, typ: problemIdemReused,
		detail: "this Idempotency-Key was already used for a different request"}
}

// idemBusy is the 409 for a key whose first request is still in progress.
func idemBusy() *problem {
	return &problem{status: http.StatusConflict, typ: problemIdemBusy,
		detail: "a request with this Idempotency-Key is still in progress", retryAfter: retryIdemBusy}
}

// idemTakenOver is the 409 for a keyed request that stalled past its lock while a retry took
// the record over and answered its own ticket or conversation: the caller's retry is answered
// that.
func idemTakenOver() *problem {
	return &problem{status: http.StatusConflict, typ: problemIdemBusy,
		detail: "a retry of this request was answered instead", retryAfter: retryIdemBusy}
}

func badRequest(detail string, violations ...string) *problem {
	return &problem{status: http.StatusBadRequest, detail: detail, violations: violations}
}

// errShuttingDown is a create refused because the replica is shutting down (admitCreate), before
// anything was made; errorHandler answers it misdirected to a gateway that sends RerouteHeader.
var errShuttingDown = &problem{status: http.StatusServiceUnavailable, reason: RefusedShuttingDown,
	detail: "the service is shutting down", retryAfter: retryDraining}

// RerouteHeader is the request header by which a gateway says that it passes a draining
// replica's refusal to another replica: such a refusal is then 421 Misdirected Request (RFC
// 9110 §15.5.20: the request may be repeated on another connection, whatever its method)
// instead of the 503 a client that reached the replica directly gets. A draining replica
// refuses a create before it makes anything (a key it held is freed first), so another
// replica may take it; nginx cannot tell that 503 from the other 503s (a store that did not
// answer in time, a full service), after which a create may have been made, nor pass a POST
// on after a 503 without passing on every POST that timed out too. deploy/nginx/ask.conf
// sends it and passes a 421 on; only its presence counts, and a client that sends it itself
// gets the 421, which says as much as the 503.
const RerouteHeader = "X-Ask-Reroute"

// misdirected is errShuttingDown as answered to a gateway that reroutes it (RerouteHeader).
var misdirected = &problem{status: http.StatusMisdirectedRequest, reason: RefusedShuttingDown,
	detail: "this replica is shutting down: send the request to another", retryAfter: retryDraining}

func internalError() *problem {
	return &problem{status: http.StatusInternalServerError, detail: "internal error"}
}

// unsupportedMedia is the 415; detail says what the body must be, when more than its type.
func unsupportedMedia(detail ...string) *problem {
	p := &problem{status: http.StatusUnsupportedMediaType, detail: "the request body must be application/json"}
	if len(detail) > 0 {
		p.detail = detail[0]
	}
	return p
}

// notValidated is a validator refusal other than 400 and 404 (the validator chose the status).
func notValidated(status int) *problem {
	return &problem{status: status, detail: "the request could not be validated"}
}

// unauthorized is the 401 for a request without a valid bearer (err nil: none was sent), with
// the RFC 6750 challenge package auth words; the detail never holds the token.
func unauthorized(r *http.Request, err error) *problem {
	detail := "a bearer token is required"
	if err != nil {
		detail = auth.Describe(err)
	}
	p := &problem{status: http.StatusUnauthorized, detail: detail, challenge: auth.Challenge(err)}
	if r != nil && r.URL != nil {
		// Escaped as the request escaped it: instance is a URI reference (RFC 9457 §3.1.5),
		// and the decoded path is none for `%3C` and names another resource for `%2F`.
		p.instance = r.URL.EscapedPath()
	}
	return p
}

// refusal is a store refusal of a creation, with what was being created ("conversations" or
// "tickets") for the problem's wording, the service's TTL, by which an identity at its cap
// certainly has had its oldest idle conversation or finished ticket expire, and its run
// deadline, by which every running ask has ended.
type refusal struct {
	what          string
	ttl, deadline time.Duration
	err           error
}

func (r *refusal) Error() string { return r.what + ": " + r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refused wraps a store error from creating what under a service whose TTL and run deadline
// are ttl and deadline; nil stays nil.
func refused(what string, ttl, deadline time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &refusal{what: what, ttl: ttl, deadline: deadline, err: err}
}

// fullRetry is the Retry-After of a cap that frees within bound (as conversations or tickets
// expire, an identity's or the service's: the TTL; as running asks end: the run deadline): hint,
// or bound in whole seconds when that is shorter (a Retry-After of 30 under a TTL of 5 s made a
// client wait six times as long as the cap lasted).
func fullRetry(hint int, bound time.Duration) int {
	if bound <= 0 {
		return hint
	}
	return min(hint, int((bound+time.Second-1)/time.Second))
}

// heldRetry is the Retry-After of an identity at its cap of conversations or tickets: when
// the store says the first of them is due to expire (store.HeldError), the seconds until then
// (an identity whose conversations all went idle a minute ago waits out the rest of the TTL,
// not 30 s after 30 s); else retryOwnerFull, or the TTL when that is shorter.
func heldRetry(err error, ttl time.Duration) int {
	var held *store.HeldError
	if errors.As(err, &held) && held.Frees > 0 {
		return int((held.Frees + time.Second - 1) / time.Second)
	}
	return fullRetry(retryOwnerFull, ttl)
}

// storeProblem maps the store's refusals to problems; nil for any other error.
func storeProblem(err error) *problem {
	what := "tickets"
	var ttl, deadline time.Duration
	var rf *refusal
	if errors.As(err, &rf) {
		what, ttl, deadline = rf.what, rf.ttl, rf.deadline
	}
	freedWhen := "a finished one expires"
	if what == "conversations" {
		freedWhen = "an idle one expires"
	}
	var conflict *store.ConflictError
	switch {
	case errors.Is(err, store.ErrWouldPersist):
		return errStoreWouldPersist
	case errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		// A deadline that passed while waiting on the store is the store not answering in
		// time: the same 503.
		return errStoreUnavailable
	case errors.As(err, &conflict):
		return &problem{status: http.StatusConflict, ticket: conflict.Ticket,
			detail: "an ask is already running in this conversation (ticket names it): wait for it to end, or cancel it, then ask again"}
	case errors.Is(err, store.ErrConversationFull):
		return &problem{status: http.StatusConflict, reason: RefusedConversationFull, detail: "conversation is full; start a new one"}
	case errors.Is(err, store.ErrTooManyInFlight):
		return &problem{status: http.StatusTooManyRequests, reason: RefusedTooManyInFlight, detail: "too many asks in flight for this identity", retryAfter: fullRetry(retryInFlight, deadline)}
	case errors.Is(err, store.ErrOwnerFull):
		return &problem{status: http.StatusTooManyRequests, reason: RefusedTooManyHeld, detail: "this identity holds as many " + what + " as it may; one is freed when " + freedWhen, retryAfter: heldRetry(err, ttl)}
	case errors.Is(err, store.ErrFull):
		return &problem{status: http.StatusServiceUnavailable, reason: RefusedFull, detail: "the service holds as many " + what + " as it can", retryAfter: fullRetry(retryFull, ttl)}
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	}
	return nil
}

// errorHandler is Echo's HTTPErrorHandler: everything becomes problem+json, never Echo's own
// JSON. Unknown errors are logged and answered as a bare 500.
func errorHandler(log *slog.Logger, outage *logthrottle.Gate, refused func(ctx context.Context, reason string)) echo.HTTPErrorHandler {
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
		switch {
		case p.status >= 500 && p.retryAfter == 0:
			log.Error("request failed", "method", c.Request().Method, "route", c.Path(), "err", err)
		case p == errStoreUnavailable:
			// The client gets a 503 to retry; the operator needs the store's reason (a Redis
			// refusing writes for memory, not answering, failing over), which the readiness
			// probe does not always show (a full Redis keeps every replica ready). The store's
			// errors name keys and Redis's replies, never a command's arguments. Bounded: one
			// line for the outage's first, then one every storeOutageLogEvery at most.
			outage.Fail(c.Request().Context(), log, "store unavailable: request answered 503",
				"method", c.Request().Method, "route", c.Path(), "err", err)
		}
		if p.reason == RefusedShuttingDown && c.Request().Header.Get(RerouteHeader) != "" {
			// The one place a draining replica's refusal (admitCreate) becomes 421.
			p = misdirected
		}
		if p.reason != "" && refused != nil {
			refused(c.Request().Context(), p.reason)
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
	if p := storeProblem(err); p != nil {
		return p
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(mbe.Limit)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return errNotFound
		case http.StatusRequestEntityTooLarge:
			return tooLarge(0)
		case http.StatusMethodNotAllowed:
			return errMethodNotAllowed
		}
		if he.Code >= 400 && he.Code < 500 {
			return &problem{status: he.Code, detail: "the request does not satisfy the API description"}
		}
	}
	return internalError()
}

// errMethodNotAllowed is the 405 of a method the path has no operation for: the request is
// well-formed, only its method is wrong, and Allow (set by the router) names the right ones.
var errMethodNotAllowed = &problem{status: http.StatusMethodNotAllowed,
	detail: "this path takes no request with this method; the Allow header names the methods it takes"}

// errBodyTimeout is the 408 of a body that had not arrived in full when BodyReadTimeout (from
// the end of its header) passed: the client sent less than it declared, or sent it too slowly
// (RFC 9110 §15.5.9). Its connection is closed after the answer: the rest of the body could
// still come, and be read as the next request.
var errBodyTimeout = &problem{status: http.StatusRequestTimeout,
	detail: "the request body did not arrive in full in time; send it again, whole"}

// tooLarge is the 413; its detail names the limit in bytes (DAS_ASK_MAX_BODY_BYTES) when known
// (limit > 0), so a client knows how far to shorten the request.
func tooLarge(limit int64) *problem {
	detail := "the request body is larger than the service accepts"
	if limit > 0 {
		detail += " (at most " + strconv.FormatInt(limit, 10) + " bytes)"
	}
	return &problem{status: http.StatusRequestEntityTooLarge, detail: detail}
}

func writeProblem(w http.ResponseWriter, p *problem) {
	body := gen.Problem{Type: "about:blank", Title: httpstatus.Text(p.status), Status: p.status}
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
	if p.instance != "" {
		body.Instance = &p.instance
	}
	h := w.Header()
	if p.challenge != "" {
		h.Set("WWW-Authenticate", p.challenge)
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.identityOnly {
		h.Set("Accept-Encoding", "identity")
	}
	w.WriteHeader(p.status)
	_ = json.NewEncoder(w).Encode(body)
}
