package model

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Kind classifies a provider failure.
type Kind string

const (
	// KindRateLimited is HTTP 429: retried within the deadline.
	KindRateLimited Kind = "rate_limited"
	// KindOverloaded is a provider that is overloaded (HTTP 529, an overloaded_error event
	// mid-stream) or failing (HTTP 5xx): retried within the deadline.
	KindOverloaded Kind = "overloaded"
	// KindRefused is the model declining to answer (a refusal stop reason or refusal text).
	KindRefused Kind = "refused"
	// KindContentFilter is the provider's content filter stopping the turn.
	KindContentFilter Kind = "content_filter"
	// KindTruncated is a turn the provider stopped before the model finished it: the output
	// cap (MaxTokens) or the context window was reached. Its prose is cut and a tool call's
	// arguments may be, so none of it is used; not retried (the same request would be cut again).
	KindTruncated Kind = "truncated"
	// KindTransport is the provider unreachable, a broken stream, or an unreadable response.
	KindTransport Kind = "transport"
	// KindRejected is any other 4xx: bad request, bad key, unknown model. Not retried.
	KindRejected Kind = "rejected"
	// KindTimeout is an attempt the provider, once reached, did not answer whole within the
	// adapter's Timeout (ASK_LLM_TIMEOUT_S; MessageCallTimeout). Not retried: the ask's deadline
	// is usually not far behind, and a provider that said nothing for that long is not a blip.
	KindTimeout Kind = "timeout"
)

// Error is a provider failure. Its message never contains prompt text or keys: Error() is
// made only of the fixed vocabulary below, whatever an adapter put in Message.
type Error struct {
	Kind Kind
	// Status is the HTTP status, when there was one.
	Status int
	// RetryAfter is the provider's Retry-After hint, zero when absent.
	RetryAfter time.Duration
	// Message is a short description for logs and the run's error event. Only a phrase of
	// Vocabulary is ever shown; anything else is shown as "provider error".
	Message string
	// Err is the SDK's error, for errors.As; it is not part of Error().
	Err error
}

// GenericMessage is what any message outside Vocabulary is shown as.
const GenericMessage = "provider error"

// MessageCallTimeout is an attempt that got no (whole) answer within the adapter's Timeout:
// the provider was reached, and said nothing, or not all of it, in time.
const MessageCallTimeout = "no answer within the model call timeout (ASK_LLM_TIMEOUT_S)"

// MessageContextFull is a request (or a reply) the model's context window could not hold.
const MessageContextFull = "the conversation filled the model's context window"

// MessageOutputCap is a KindTruncated turn cut at the output cap (ASK_LLM_MAX_TOKENS).
const MessageOutputCap = "the reply was cut at the output token cap (ASK_LLM_MAX_TOKENS)"

// Vocabulary is every phrase a provider failure may show in the run's error event and in a
// log line. A provider (or a gateway in front of it) writes what it likes in its error bodies,
// including an echo of the request — the question, a key — so nothing of its text is shown:
// an adapter maps what it read onto one of these, or the message is GenericMessage.
var Vocabulary = []string{
	GenericMessage,
	// What the adapters say about a turn.
	"the model refused",
	"the provider's content filter stopped the turn",
	MessageOutputCap,
	MessageContextFull,
	"stream out of order",
	"stream ended before the message did",
	"response has no choices",
	"provider unreachable or stream unreadable",
	"provider unreachable or response unreadable",
	MessageCallTimeout,
	"redirected off its configured origin; not followed", // ErrOffOrigin
	"response larger than the limit",                     // ErrResponseTooLarge
	// The providers' error categories, in our words.
	"invalid request",
	"authentication failed",
	"billing",
	"permission denied",
	"not found",
	"rate limited",
	"timed out",
	"provider failure",
	"overloaded",
	"conflict",
	"request too large",
}

var vocabulary = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range Vocabulary {
		m[s] = true
	}
	return m
}()

// kinds is every Kind; any other is shown as transport.
var kinds = map[Kind]bool{
	KindRateLimited: true, KindOverloaded: true, KindRefused: true,
	KindContentFilter: true, KindTruncated: true, KindTransport: true, KindRejected: true,
	KindTimeout: true,
}

// SafeMessage is msg when it is a phrase of Vocabulary,
// else GenericMessage.
func SafeMessage(msg string) string {
	if vocabulary[msg] {
		return msg
	}
	return GenericMessage
}

func (e *Error) Error() string {
	kind := e.Kind
	if !kinds[kind] {
		kind = KindTransport
	}
	if e.Status != 0 {
		return fmt.Sprintf("model %s (HTTP %d): %s", kind, e.Status, SafeMessage(e.Message))
	}
	return fmt.Sprintf("model %s: %s", kind, SafeMessage(e.Message))
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the failure is transient: rate limited or overloaded.
func (e *Error) Retryable() bool {
	return e.Kind == KindRateLimited || e.Kind == KindOverloaded
}

// LogAttrs are what an adapter's log line says of a failed attempt: its kind, and for an *Error
// its HTTP status (0 when none) and its phrase of Vocabulary — never the SDK's error, which may
// quote the request or the key.
func LogAttrs(err error) []any {
	var me *Error
	if !errors.As(err, &me) {
		return []any{"kind", ""}
	}
	return []any{"kind", me.Kind, "status", me.Status, "reason", SafeMessage(me.Message)}
}

// KindOf returns the Kind of an *Error in err's chain, or "" when there is none.
func KindOf(err error) Kind {
	var me *Error
	if errors.As(err, &me) {
		return me.Kind
	}
	return ""
}

// StatusKind maps an HTTP status from a provider to a Kind.
func StatusKind(status int) Kind {
	switch {
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status >= 500:
		return KindOverloaded
	default:
		return KindRejected
	}
}

// RetryAfter is the provider's hint of how long to wait, relative to now: its Retry-After-Ms
// header (milliseconds; OpenAI's and Anthropic's, which their SDKs read first, and ours turn
// their own retries off) when it is there, else its Retry-After (seconds or an HTTP date); zero
// when absent or unparseable. A hint too long for a time.Duration is the longest one, never one
// that wraps round to a retry at once.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if d := seconds(h.Get("Retry-After-Ms"), time.Millisecond); d > 0 {
		return d
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if d := seconds(v, time.Second); d > 0 {
		return d
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// seconds is v, a positive number of units, as a Duration; zero when v is not one.
func seconds(v string, unit time.Duration) time.Duration {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) {
		return 0
	}
	if f*float64(unit) >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f * float64(unit))
}
