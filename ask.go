// Package ask holds the domain types that the service, the agent and the stores share: what a
// run is asked (Request), how it reports its work (Emitter), what it ends with (Outcome), and who
// is asking (Identity). Wire types come from package gen, generated from openapi/ask.openapi.yaml.
//
// The data path: HTTP request → auth (Authenticator) → handler (gen.ServerInterface, package
// server) → run registry → Runner (package agent) emitting into the ticket's log → SSE writer
// reading the log with a cursor.
package ask

import (
	"context"
	"log/slog"
	"time"

	"github.com/das-ask/ask/gen"
)

// Identity is who is asking: the validated bearer's `oid` claim and the token itself.
type Identity struct {
	// OID is the `oid` claim: the identity that owns tickets and conversations.
	OID string
	// Tenant is the token's issuer, with its `tid` claim when it has one (package auth); ownership
	// never crosses tenants.
	Tenant string
	// Scopes are the token's granted scopes.
	Scopes []string
	// Token is the raw, validated bearer. It is forwarded unchanged on every tool call of a run
	// and never logged.
	Token string
	// Expires is the token's `exp`; zero when unknown. A source's 401 after it is the token
	// expiring during the run, and the run's error says so.
	Expires time.Time
}

// String keeps the token out of any log line that prints an Identity by mistake.
func (id Identity) String() string { return "Identity{oid=" + id.OID + "}" }

// LogValue keeps the token out of a log line that passes an Identity as an attribute: slog's
// JSON handler, askd's default, marshals a struct field by field and never calls String.
func (id Identity) LogValue() slog.Value { return slog.StringValue(id.String()) }

// Authenticator validates a raw bearer token and returns who it names.
// Implementations are safe for concurrent use. Any error means 401, but one that wraps
// auth.ErrKeysNotLoaded (the bearer could not be checked at all: no signing key is known yet),
// which the service answers 503 with Retry-After.
type Authenticator interface {
	Authenticate(ctx context.Context, rawToken string) (Identity, error)
}

// Turn is one finished exchange of a conversation, held in memory only.
type Turn struct {
	Question string
	// Outcome is the terminal event's type: answer, abstention, refusal or error.
	Outcome gen.EventType
	// Text is what the run said: the answer's prose, or a short description of the outcome.
	Text string
}

// Request is one question put to a Runner. Logged as an attribute it shows its ticket and
// conversation only (LogValue): never the question, a prior turn or the caller's token.
type Request struct {
	Ticket         string
	ConversationID string
	Question       string
	// History holds the conversation's prior turns, oldest first, resent to the model in full.
	History []Turn
	// Identity is the caller; Identity.Token is the bearer to forward to every source.
	Identity Identity
}

// LogValue names the request by its ticket and conversation: slog's JSON handler would
// otherwise write every field, the question and Identity.Token among them.
func (r Request) LogValue() slog.Value {
	return slog.GroupValue(slog.String("ticket", r.Ticket), slog.String("conversation", r.ConversationID))
}

// Usage is what one model call cost.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Emitter is how a run reports its work into the ticket's log. It is safe for concurrent use.
// The log stamps every event's envelope (seq, ticket, conversation_id, ts, type). Once the run has
// ended — it returned, or it was cancelled, timed out or shut down — every call is ignored, so a
// tool call that completes after cancel leaves no event behind.
type Emitter interface {
	// Branch opens or closes a unit of work below the supervisor (phase 2: one per source).
	// The supervisor branch itself is opened and closed by the service: a branch with its id
	// (b1) or its role (supervisor) is ignored. Every other branch's parent is b1, whatever
	// the runner names.
	Branch(gen.BranchBody)
	// Step reports one tool call as it happened. Every call counts towards done.steps, even if
	// its event is later evicted. A negative ms is 0, and a branch_id naming no open branch is
	// dropped (the step is kept).
	Step(gen.StepBody)
	// Milestone reports progress a person could be told; a branch_id naming no open branch is
	// dropped.
	Milestone(gen.MilestoneBody)
	// ModelCall reports one model call, and the token usage known of it then, for done; a
	// negative count adds nothing. A runner reports a call as it sends it, so that a call the
	// run's end (deadline, cancel, shutdown) cuts off still counts, and its tokens with Tokens
	// when it returns.
	ModelCall(Usage)
	// Tokens adds the token usage of a model call already reported with ModelCall, for done;
	// a negative count adds nothing.
	Tokens(Usage)
}

// Outcome is how a run ended: exactly one of its fields is set.
type Outcome struct {
	Answer     *gen.AnswerBody
	Abstention *gen.AbstentionBody
	Refusal    *gen.RefusalBody
	Error      *gen.ErrorBody
}

// internalError is the terminal event of an outcome that breaks the one-field rule.
var internalError = &gen.ErrorBody{Kind: gen.ErrorKindInternal, Message: "internal error"}

// Event is the terminal event o stands for: its type and its body (the set field). An outcome
// with no field set, or more than one, is error{internal}: a runner's mistake never reaches a
// client as an answer. An error whose kind is not one of the contract's is error{internal} with
// its message.
func (o Outcome) Event() (gen.EventType, any) {
	n := 0
	var typ gen.EventType
	var body any
	if o.Answer != nil {
		n, typ, body = n+1, gen.EventTypeAnswer, o.Answer
	}
	if o.Abstention != nil {
		n, typ, body = n+1, gen.EventTypeAbstention, o.Abstention
	}
	if o.Refusal != nil {
		n, typ, body = n+1, gen.EventTypeRefusal, o.Refusal
	}
	if o.Error != nil {
		n, typ, body = n+1, gen.EventTypeError, o.Error
	}
	if n != 1 {
		return gen.EventTypeError, internalError
	}
	if o.Error != nil && !o.Error.Kind.Valid() {
		return typ, &gen.ErrorBody{Kind: gen.ErrorKindInternal, Message: o.Error.Message}
	}
	return typ, body
}

// Runner runs one question to an outcome.
//
// Run reports progress through emit and returns the terminal outcome; the service appends it,
// then done. Run must not make a model call once ctx is done, and should return promptly then
// (a tool call already in flight may complete). The service decides the outcome of a cancelled,
// timed-out or shut-down run itself, so what Run returns after ctx is done is discarded.
type Runner interface {
	Run(ctx context.Context, req Request, emit Emitter) Outcome
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, req Request, emit Emitter) Outcome

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, req Request, emit Emitter) Outcome {
	return f(ctx, req, emit)
}

type identityKey struct{}

// WithIdentity returns a copy of ctx carrying id: the service does this for every request whose
// bearer the Authenticator accepted.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity WithIdentity stored in ctx, and whether there was one.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
