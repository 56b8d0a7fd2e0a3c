// Package client is the Go client of the ask service: what a Go program imports to ask a
// question, follow its work and read its outcome.
//
// Every call goes through the client generated from openapi/ask.openapi.yaml (package gen):
// the JSON calls through gen.Client and the generated response parsers (gen.ParseCreateAskResponse,
// …), the event stream through the plain gen.Client so the response body is read incrementally
// and never buffered to its end. A refusal the generated parser cannot read (a gateway's
// Retry-After given as an HTTP date, a body that is not a problem) is still an *APIError with
// its status.
//
// The event stream ([Client.Events]) is typed: each event is decoded into its generated type
// (gen.AcceptedEvent, gen.StepEvent, …, gen.DoneEvent); a type this client does not know is passed
// through as an [UnknownEvent] rather than failing. The stream reconnects by itself when the
// connection drops, resuming with Last-Event-ID so nothing is missed and nothing is repeated;
// it never reconnects after done, and treats 401 and 404 as final. When the service evicted step
// events before they could be read, the done event's [Event.MissedSteps] says how many.
//
// The other calls are retried when a retry can cure them ([Retry]): a connection error, no
// response headers within [Options.HeaderTimeout] (a frozen replica), a 502, 503 or 504, or the
// 409 of an earlier attempt still in progress. [Client.CreateConversation] and [Client.Ask] send
// an Idempotency-Key, the same on every attempt, so a retry answers the same conversation or
// ticket and never asks twice. Every retry is logged. A create that fails for good after an
// attempt whose reply was lost matches [ErrMayHaveBeenMade]: that attempt may have made it.
//
// [Client.Wait] and [Collect] fold a stream, and [StatusOutcome] what [Client.Status] returned,
// into an [Outcome], whose [Outcome.Kind] is one of
// [Answer], [Abstention], [Refusal] or [Error] — four different things a caller must say
// differently, distinguished without comparing strings.
//
// A [Client] is safe for concurrent use. Neither the question text nor the bearer token ever
// appears in an error or a log line from this package.
package client
