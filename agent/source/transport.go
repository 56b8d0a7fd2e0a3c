package source

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// HeaderCallID is the HTTP header that carries a tool call's id to the source.
const HeaderCallID = "Ask-Call-Id"

type callIDKey struct{}

// withCallID returns ctx carrying a tool call's id, which the transport sends as HeaderCallID.
func withCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// StatusError is a source answering an MCP request with HTTP 401 or 403: the caller's
// credentials were rejected. It ends the run as a transport failure.
type StatusError struct {
	Source string
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("source %s rejected the credentials (HTTP %d)", e.Source, e.Status)
}

// bearer is the http.RoundTripper of one run's session with one source: it puts the caller's
// bearer on every request of the session, the call id (from the request's context) on the
// requests of a tool call, and the W3C trace context (traceparent, from the span in the
// request's context, when there is one) so the source can name the ask's trace; and it turns
// 401/403 into a *StatusError.
type bearer struct {
	base   http.RoundTripper
	source string
	token  string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if id, ok := req.Context().Value(callIDKey{}).(string); ok && id != "" {
		r.Header.Set(HeaderCallID, id)
	}
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(r.Header))
	resp, err := b.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		resp.Body.Close()
		return nil, &StatusError{Source: b.source, Status: resp.StatusCode}
	}
	return resp, nil
}
