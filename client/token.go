package client

import "context"

// TokenSource supplies the bearer token for each request. It is called once per HTTP request
// (every reconnect of a stream included), so a long-running program can refresh its token:
// a ticket belongs to the token's identity, not to the token, so a newer token of the same
// identity reads, follows and cancels the asks an older one made. The token [Client.Ask]
// sends is the one the run forwards to every source until it ends; one that expires first
// ends the run in error{transport} ("… the caller's token expired at …"), so refresh early
// enough that it outlives the run (the service's DAS_ASK_DEADLINE_S, 120 s by default).
// Implementations must be safe for concurrent use.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// StaticToken is a TokenSource that always returns the same token.
type StaticToken string

// Token returns the token.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

// TokenFunc adapts a function to TokenSource.
type TokenFunc func(ctx context.Context) (string, error)

// Token calls f.
func (f TokenFunc) Token(ctx context.Context) (string, error) { return f(ctx) }
