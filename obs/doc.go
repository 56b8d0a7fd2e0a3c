// Package obs makes the ask service operable: Prometheus metrics, OpenTelemetry traces, request
// ids, the one log line per ask, and the liveness and readiness probes an operator points a
// load balancer at.
//
// It attaches to the service at the service's own seams, so that no package of the data path
// depends on it:
//
//   - Observer.Handler wraps the API's http.Handler: request ids (X-Request-Id, echoed or
//     generated), the W3C trace context of the caller, requests by route and status, admission
//     refusals by reason, time to ticket, open streams and reconnects with a cursor.
//   - Observer.Hooks are the service's lifecycle hooks (server.Options.Hooks): admitted (the
//     ask's span starts, as a child of the caller's trace), running (the run's context carries
//     the span, so model and tool calls are its children), each event appended with its typed
//     body and the steps the store's bound evicted for it (events by type, tool calls, steps
//     dropped), ended with the typed done (asks by outcome, their duration, the span's end
//     and the ask's one log line), and refused, naming the cause of a refusal its status does
//     not tell apart (a 429, 409 or 503), which Handler counts. obs keeps no copy of the
//     store's arithmetic and decodes no event.
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
