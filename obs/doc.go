// Package obs makes the ask service operable: Prometheus metrics, OpenTelemetry traces, request
// ids, the one log line per ask, and the liveness and readiness probes an operator points a
// load balancer at.
//
// It instruments the service from the outside, through the seams the service already has, so
// that no package of the data path depends on it:
//
//   - Observer.Handler wraps the API's http.Handler: request ids (X-Request-Id, echoed or
//     generated), the W3C trace context of the caller, requests by route and status, admission
//     refusals by reason, time to ticket, open streams and reconnects with a cursor.
//   - Observer.Store wraps the run registry (store.Store, or store.Shared for several
//     replicas): asks running and ended by outcome, their duration, events emitted by type and
//     step events dropped from a full log; it starts each ask's span at admission and ends it
//     at done, and writes the ask's log line then.
//   - Observer.Runner wraps the agent: the run's context carries the ask's span (so model and
//     tool calls are its children) and its step reports count tool calls.
//   - Observer.Model wraps a model adapter: calls, tokens, errors and latency by provider, and
//     a span per call.
//
// What never appears anywhere obs writes — metric labels, span attributes, log lines — is the
// question text, a bearer token or, in metric labels, an identity (oid). Labels take values
// from closed sets (outcomes, error kinds, event types, routes, statuses) and from operator
// configuration (provider and source names, and the tool names those sources declare).
//
// AdminHandler serves /metrics, /healthz and /readyz; serve it on a listener the gateway does
// not expose.
package obs
