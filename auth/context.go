package auth

import (
	"context"

	"github.com/das-ask/ask"
)

// WithIdentity is ask.WithIdentity; Middleware does this for every accepted request.
func WithIdentity(ctx context.Context, id ask.Identity) context.Context {
	return ask.WithIdentity(ctx, id)
}

// FromContext is ask.IdentityFrom.
func FromContext(ctx context.Context) (ask.Identity, bool) { return ask.IdentityFrom(ctx) }
