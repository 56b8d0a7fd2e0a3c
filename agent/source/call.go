package source

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Meta keys on a call's params and on a refused result.
const (
	// MetaCallID carries the call id in CallToolParams._meta; the source audits it.
	MetaCallID = "ask/call_id"
	// MetaRefusal marks a result as a refusal: {"code": "forbidden"|"read_only", "reason": "..."}.
	MetaRefusal = "ask/refusal"
)

// Outcome says how one tool call ended.
type Outcome int

const (
	// OK: the tool returned a result.
	OK Outcome = iota
	// ToolError: the tool failed in a way the model can correct (bad SQL, unknown term, a
	// protocol-level error for this call). The text goes back to the model.
	ToolError
	// Refused: the source refused the call (authorization or policy). Ends the run as a refusal.
	Refused
	// Transport: the source could not be reached or rejected the credentials. Ends the run.
	Transport
)

// Result is one tool call as it happened.
type Result struct {
	CallID  string
	Source  string
	Tool    string
	Args    map[string]any
	Ms      int64
	Outcome Outcome
	// Text is what goes back to the model: the result's text content, or the error's.
	Text string
	// Data is the result's structured content as JSON (or its text content when that is JSON),
	// for assembling the answer; nil for anything but OK.
	Data json.RawMessage
	// RefusalCode and RefusalReason describe a refusal, in the source's words.
	RefusalCode, RefusalReason string
	// Err is the transport failure, a *TransportError.
	Err error
}

// Call calls one tool with a fresh call id, carried in the params' _meta and in the
// Ask-Call-Id header, and classifies what happened. Call does not fail: every way a call can
// end is a Result.
func (s *Session) Call(ctx context.Context, tool string, args map[string]any) Result {
	if args == nil {
		args = map[string]any{}
	}
	r := Result{CallID: NewCallID(), Source: s.name, Tool: tool, Args: args}
	shown := tool // as the log lines and r.Err write it (Options.ToolShown)
	if s.shown != nil {
		shown = s.shown(tool)
	}
	start := time.Now()
	res, err := s.cs.CallTool(withCallID(ctx, r.CallID), &mcp.CallToolParams{
		Meta:      mcp.Meta{MetaCallID: r.CallID},
		Name:      tool,
		Arguments: args,
	})
	r.Ms = time.Since(start).Milliseconds()
	classify(&r, shown, res, err, faultOf(ctx, s.tr))
	scrub(&r, s.tr.token)
	// A debug line per call (the ask's one info line is obs's "ask finished"); a warning when
	// the source failed the call, naming it and the failure for the operator. A call its
	// caller cancelled is no failure of the source's; one whose deadline passed (the tool
	// timeout: the agent detaches calls from the run's cancel) is: the source did not answer.
	if r.Outcome == Transport && !errors.Is(ctx.Err(), context.Canceled) {
		s.log.WarnContext(ctx, "tool call", "source", s.name, "tool", shown, "call_id", r.CallID, "ms", r.Ms, "outcome", r.Outcome.String(), "error", r.Err.Error())
	} else {
		s.log.DebugContext(ctx, "tool call", "source", s.name, "tool", shown, "call_id", r.CallID, "ms", r.Ms, "outcome", r.Outcome.String())
	}
	return r
}

// Scrubbed stands in for the caller's bearer wherever a source quoted it back.
const Scrubbed = "[the bearer]"

// scrub takes the caller's bearer out of everything the source said in r. A source holds the
// bearer already, but one that quotes its request back (an error that echoes the Authorization
// header, a "whoami" tool) would otherwise hand it on: r.Text goes to the model provider and,
// with the refusal's reason, into the run's events, which the store keeps, clients and webhooks
// receive, and logs may name. A bearer is base64url and dots, which JSON never escapes, so
// the replacement in r.Data leaves it valid JSON.
func scrub(r *Result, token string) {
	r.Text = scrubText(r.Text, token)
	r.RefusalCode = scrubText(r.RefusalCode, token)
	r.RefusalReason = scrubText(r.RefusalReason, token)
	for _, s := range secretsOf(token) {
		if bytes.Contains(r.Data, []byte(s)) {
			r.Data = bytes.ReplaceAll(r.Data, []byte(s), []byte(Scrubbed))
		}
	}
}

// scrubText is s with every form of token secretsOf names replaced by Scrubbed.
func scrubText(s, token string) string {
	for _, secret := range secretsOf(token) {
		s = strings.ReplaceAll(s, secret, Scrubbed)
	}
	return s
}

// minSignature is the shortest JWS signature scrubbed on its own: an HMAC-SHA256 one is 43
// characters, ES256 and EdDSA 86, RS256 342; a shorter last part is no signature worth the name,
// and replacing a few characters would mangle what a source says for nothing.
const minSignature = 16

// secretsOf are the forms of token a source's words are scrubbed of, the whole token first.
// For a JWS (three parts) its signature is one too: the header and the claims are no secret
// (the claims are readable in any token, the header names a key the JWKS publishes), so a
// source that quotes the signature alone ("signature … does not verify") hands on the whole
// credential to anyone who sees the claims, as the model provider does in a run.
func secretsOf(token string) []string {
	if token == "" {
		return nil
	}
	out := []string{token}
	if strings.Count(token, ".") == 2 {
		if sig := token[strings.LastIndexByte(token, '.')+1:]; len(sig) >= minSignature {
			out = append(out, sig)
		}
	}
	return out
}

// codeRejectedByTransport is the go-sdk's jsonrpc2.ErrRejected (internal to the SDK): its
// client wraps every call whose HTTP exchange failed in it — the source unreachable, a 5xx or
// 429, a connection closed mid-call — as a *jsonrpc.Error. Those are transport failures, not
// tool errors for the model to correct: taking them for tool errors turned a dead source into
// an abstention.
const codeRejectedByTransport = -32005

// classify sorts one call's outcome; reason is the transport's own account of a failure
// (nil when it has none), which decides over whatever the SDK made of it. A transport failure
// names the tool as shown.
func classify(r *Result, shown string, res *mcp.CallToolResult, err, reason error) {
	var se *StatusError
	var we *jsonrpc.Error
	switch {
	case errors.As(err, &se) || (err != nil && reason != nil):
		r.Outcome, r.Err = Transport, transportError(r.Source, "call "+shown, err, reason)
		return
	case errors.As(err, &we) && we.Code != codeRejectedByTransport:
		r.Outcome, r.Text = ToolError, we.Message
		return
	case err != nil:
		r.Outcome, r.Err = Transport, transportError(r.Source, "call "+shown, err, nil)
		return
	}
	r.Text = text(res)
	if res.IsError {
		if ref, ok := res.Meta[MetaRefusal].(map[string]any); ok {
			r.Outcome = Refused
			r.RefusalCode, _ = ref["code"].(string)
			r.RefusalReason, _ = ref["reason"].(string)
			if r.RefusalReason == "" {
				r.RefusalReason = r.Text
			}
			return
		}
		r.Outcome = ToolError
		return
	}
	r.Outcome = OK
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			r.Data = b
		}
	} else if t := bytes.TrimSpace([]byte(r.Text)); json.Valid(t) {
		r.Data = t
	}
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case ToolError:
		return "tool_error"
	case Refused:
		return "refused"
	default:
		return "transport"
	}
}

// NewCallID returns a random, unguessable call id: "call_" and 32 lower-case hex digits.
func NewCallID() string {
	const hex = "0123456789abcdef"
	var b [16]byte
	rand.Read(b[:])
	out := make([]byte, 0, 5+32)
	out = append(out, "call_"...)
	for _, x := range b {
		out = append(out, hex[x>>4], hex[x&15])
	}
	return string(out)
}
