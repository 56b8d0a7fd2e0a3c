package auth

import (
	"context"

	"github.com/das-ask/ask"
)

type identityKey struct{}

// WithIdentity returns a copy of ctx carrying id; Middleware does this for every accepted request.
func WithIdentity(ctx context.Context, id ask.Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity WithIdentity stored in ctx, and whether there was one.
func FromContext(ctx context.Context) (ask.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(ask.Identity)
	return id, ok
}
