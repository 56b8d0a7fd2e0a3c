package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/httpstatus"
)

// Sentinel errors that an [*APIError] matches with errors.Is, by HTTP status.
var (
	// ErrUnauthorized: the bearer is missing or not valid for the service (401).
	ErrUnauthorized = errors.New("client: unauthorized")
	// ErrNotFound: no such conversation or ticket, or it belongs to another identity (404). From
	// CreateConversation, whose path names nothing, a 404 means nothing serves the API at the
	// base URL (its gateway prefix left out?), and the error says so.
	ErrNotFound = errors.New("client: not found")
	// ErrConflict: the conversation cannot take an ask now (409): one is already running in it
	// ([APIError.RunningTicket] names it), or it is full (the error then matches
	// ErrConversationFull too). The other 409, an earlier attempt of the same call still in
	// progress, is retried (see Retry) and, when the attempts are spent, matches neither.
	ErrConflict = errors.New("client: an ask is already running in this conversation")
	// ErrConversationFull: the conversation holds as many asks as the service allows (a 409
	// that names no running ticket); ask in a new conversation.
	ErrConversationFull = errors.New("client: the conversation is full; start a new one")
	// ErrTooManyRequests: this identity has too many asks in flight, or holds as many
	// conversations or tickets as the service allows one identity (429); RetryAfter says when
	// to try again.
	ErrTooManyRequests = errors.New("client: too many asks in flight")
	// ErrIdempotencyKeyReused: the Idempotency-Key was already used for a different request
	// (422). This client makes a fresh key per call and sends it again only on that call's
	// retries, with the same body, so it never causes one itself: something between it and the
	// service (an Options.HTTPClient that sets the header) reused a key.
	ErrIdempotencyKeyReused = errors.New("client: the Idempotency-Key was used for another request")
	// ErrMayHaveBeenMade: a create ([Client.CreateConversation], [Client.Ask]) failed for good
	// after an earlier attempt of it was sent and its reply lost (the connection dropped, or no
	// response headers came in time), so that attempt may have made the conversation or the
	// ticket, and the ask may be running. The error matches what ended the call too (an
	// *APIError, ctx's error). Asking again makes a new ask, perhaps a second one.
	ErrMayHaveBeenMade = errors.New("client: an earlier attempt's reply was lost; it may have been made")
)

// ErrProtocol: the event stream broke the contract (a response that is not an event stream, an
// event that is not JSON or lacks a field the contract requires, a line or an event's data
// beyond Options.MaxEventSize). It is final, and following the ticket again reads the same
// events: unlike a failed connection, trying again does not help.
var ErrProtocol = errors.New("client: the event stream is not the contract's")

// protocolError is a final error of the event stream that matches ErrProtocol, its message
// unchanged.
type protocolError struct{ err error }

func (e *protocolError) Error() string { return e.err.Error() }

func (e *protocolError) Unwrap() []error { return []error{e.err, ErrProtocol} }

// mayHaveBeenMade is the final error of a create after an attempt whose reply was lost.
type mayHaveBeenMade struct{ err error }

func (e *mayHaveBeenMade) Error() string {
	return e.err.Error() + " (an earlier attempt's reply was lost: it may have been made)"
}

func (e *mayHaveBeenMade) Unwrap() []error { return []error{e.err, ErrMayHaveBeenMade} }

// UnexpectedResponseError is a success status whose response is not the operation's (a body
// that is not the service's JSON, JSON whose fields are not of the operation's types, one that
// names no conversation or ticket, or another success status than the contract's): another
// server answers at the base URL (a web server's page, a sign-in portal), or something between
// rewrote the reply. It is final: not retried, since another try gets the same.
type UnexpectedResponseError struct {
	// Op is the operation, such as "createAsk".
	Op string
	// StatusCode is the HTTP status, a 2xx.
	StatusCode int
	// ContentType is the response's Content-Type.
	ContentType string
	// Err is why a JSON body is not the operation's reply (a field of another type), nil for
	// a body that is not JSON. Its text may quote the body, so Error does not include it.
	Err error
}

// Error says what answered and what to suspect, never the body.
func (e *UnexpectedResponseError) Error() string {
	what := "that is not the ask service's reply"
	if e.Err != nil {
		what = "whose JSON is not the ask service's reply (a field of another type)"
	}
	return fmt.Sprintf("ask %s: a %d %s %s (Content-Type %q): another server answers at the URL, or something between rewrote the reply",
		e.Op, e.StatusCode, httpstatus.Text(e.StatusCode), what, e.ContentType)
}

// Unwrap is Err.
func (e *UnexpectedResponseError) Unwrap() error { return e.Err }

// APIError is a response the service refused with an HTTP status: the RFC 9457 problem it sent,
// when it sent one. The service never puts the question text or a token in a problem.
type APIError struct {
	// Op is the operation that failed, such as "createAsk".
	Op string
	// StatusCode is the HTTP status.
	StatusCode int
	// Problem is the problem+json body, or nil when the body was not one.
	Problem *gen.Problem
	// RetryAfter is the Retry-After the service (or a gateway before it) asked for, in seconds or
	// as an HTTP date, or 0.
	RetryAfter time.Duration

	hint string // what the client can tell beyond the service's problem, said last in Error
}

// Error describes the refusal for a person: the operation, the status and the Reason (and,
// for a CreateConversation 404, that the base URL serves no ask API).
func (e *APIError) Error() string {
	msg := fmt.Sprintf("ask %s: %d %s", e.Op, e.StatusCode, httpstatus.Text(e.StatusCode))
	if r := e.Reason(); r != "" {
		msg += ": " + r
	}
	if e.hint != "" {
		msg += " (" + e.hint + ")"
	}
	return msg
}

// Reason is what the service said of the refusal, for a person: the problem's detail (or its
// title, when it has no detail and the title says more than the status), then the violations
// it lists, which say what to change (a 400 names each: "body/question: maximum string length
// is 4000"). It is "" when the service sent no problem.
func (e *APIError) Reason() string {
	p := e.Problem
	if p == nil {
		return ""
	}
	var r string
	switch {
	case p.Detail != nil && *p.Detail != "":
		r = *p.Detail
	case p.Title != "" && !httpstatus.Known(e.StatusCode, p.Title):
		r = p.Title
	}
	if p.Errors != nil && len(*p.Errors) > 0 {
		v := strings.Join(*p.Errors, "; ")
		if r == "" {
			return v
		}
		r += " (" + v + ")"
	}
	return r
}

// Is matches the sentinel error for the status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict && !e.keyInProgress()
	case ErrConversationFull:
		return e.StatusCode == http.StatusConflict && e.Problem != nil && e.Problem.Ticket == nil && !e.keyInProgress()
	case ErrIdempotencyKeyReused:
		return e.StatusCode == http.StatusUnprocessableEntity
	case ErrTooManyRequests:
		return e.StatusCode == http.StatusTooManyRequests
	}
	return false
}

// keyInProgress reports whether e is the 409 of an Idempotency-Key whose first request is still
// in progress: retried (see Retry), and neither ErrConflict nor ErrConversationFull when the
// attempts are spent.
func (e *APIError) keyInProgress() bool {
	return e.Problem != nil && e.Problem.Type == problemIdemBusy
}

// RunningTicket is, for a 409, the ticket already running in the conversation.
func (e *APIError) RunningTicket() string {
	if e.Problem != nil && e.Problem.Ticket != nil {
		return *e.Problem.Ticket
	}
	return ""
}

// Transient reports whether the refusal may not be the service's last word: a 408, a 429, or a
// 5xx but 501 and 505. The event stream reconnects after these ([Client.Events]), so a stream
// that ended on one may be followed again while the run goes on.
func (e *APIError) Transient() bool { return transient(e.StatusCode) }

// transient reports whether a request refused with this status may succeed if repeated: a
// 408, a 429, or a 5xx but 501 and 505, which say the server does not do what was asked and
// will not at the next try either.
func transient(status int) bool {
	switch status {
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
}
