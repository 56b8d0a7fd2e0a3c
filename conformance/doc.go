// Package conformance is the ask contract (openapi/ask.openapi.yaml and docs of the design) as
// executable assertions, runnable against any implementation at any base URL, directly or
// behind a gateway prefix.
//
// Run executes the checks and returns a Report: one Result per check, each PASS, FAIL (with what
// was expected and what was seen) or SKIP (with the reason the check cannot be made against this
// target). A check is never passed for want of evidence: what the suite cannot do, it skips.
//
// The suite consumes the generated client (package gen) for its calls, but reads the event
// stream itself, frame by frame, because the stream's wire form is what is under test: ids,
// event names, comments (keep-alives) and the data lines. Every JSON body and every event is
// validated against the schema the service itself publishes at {base}/v1/openapi.yaml.
//
// A gap, an absence or a count passes only on evidence that the contract allows it: a stream
// may skip a seq only where the run emitted more events than the target's bound
// (Config.MaxEvents), every call the source audited during a run must be one of its steps, and
// the limits, the deadline and the TTL are checked against a target configured small enough to
// reach them (Config.LimitsURL), or skipped, never assumed.
//
// Identities: the suite needs two (A and B, by default the demo identities alice and bob). With
// fixed tokens it cannot make expired or wrong-audience tokens, nor A's oid in another tenant
// (tid OtherTenantID), and those checks are skipped; with a development identity provider's mint
// URL it makes every token it needs. The forged
// token it always makes itself: a valid token's header and claims, re-signed with a fresh key.
//
// The question text and the tokens never appear in a Result: details name events by seq and
// type, and quote at most the offending field's name.
package conformance
