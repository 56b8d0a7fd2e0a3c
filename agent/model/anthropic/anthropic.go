// Package anthropic is the model adapter for the Anthropic Messages API, built on
// github.com/anthropics/anthropic-sdk-go/v2. It streams every call, so a provider that fails
// mid-response (an overloaded_error event after the 200) is seen as exactly that and retried
// like any other overload.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/das-ask/ask/agent/model"
)

// Options configure the adapter. Zero values mean defaults.
type Options struct {
	// BaseURL is the API root; empty means https://api.anthropic.com/ (the SDK's
	// ANTHROPIC_BASE_URL is not read).
	BaseURL string
	// Model is the model name sent with every request. Required.
	Model string
	// APIKey is the provider key; the SDK sends it as the bearer.
	APIKey string
	// Timeout bounds one attempt of one call; zero means 120s.
	Timeout time.Duration
	// Retry is the retry policy for 429/5xx/overloaded, bounded by the caller's deadline.
	Retry model.RetryPolicy
	// MaxTokens caps the model's output per call; zero means 4096 (the API requires a cap).
	MaxTokens int64
	// HTTPClient is the client requests go through; nil means one like http.DefaultClient
	// whose response headers are bounded (model.MaxResponseHeaderBytes). Either way a
	// redirect off the base URL's origin is not followed (model.SameOriginClient).
	HTTPClient *http.Client
	// Logger receives one line per failed attempt; nil means discard.
	Logger *slog.Logger
}

// Model is the adapter. It is safe for concurrent use.
type Model struct {
	client anthropic.Client
	opts   Options
	log    *slog.Logger
}

var _ model.Model = (*Model)(nil)

// New returns the adapter. It fails only when Model is empty.
//
// Nothing but opts configures it: the SDK's client would read ANTHROPIC_BASE_URL and
// ANTHROPIC_CUSTOM_HEADERS (and, without a key, ANTHROPIC_AUTH_TOKEN and profiles on disk)
// from the process's environment, and with ASK_LLM_BASE_URL unset the key and the
// conversation went wherever ANTHROPIC_BASE_URL pointed, so it is built without them.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("anthropic: a model name is required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 120 * time.Second
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = 4096
	}
	hc := model.SameOriginClient(opts.HTTPClient, model.ResponseBound(opts.MaxTokens))
	ro := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(opts.Timeout),
		option.WithAPIKey(opts.APIKey),
		option.WithoutEnvironmentDefaults(),
	}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Model{client: anthropic.NewClient(ro...), opts: opts, log: log}, nil
}

// Complete makes one streamed Messages call, retrying 429/5xx/overloaded (including an
// overloaded_error mid-stream) within ctx's deadline.
func (m *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	params := m.params(req)
	return m.opts.Retry.Do(ctx, func(ctx context.Context) (model.Response, error) {
		resp, err := m.once(ctx, params)
		if err != nil && ctx.Err() == nil {
			m.log.WarnContext(ctx, "model call failed", append([]any{"provider", "anthropic", "model", m.opts.Model}, model.LogAttrs(err)...)...)
		}
		return resp, err
	})
}

func (m *Model) once(ctx context.Context, params anthropic.MessageNewParams) (model.Response, error) {
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return usage(msg), &model.Error{Kind: model.KindTransport, Message: "stream out of order", Err: err}
		}
	}
	if err := stream.Err(); err != nil {
		return usage(msg), classify(ctx, err)
	}
	if msg.StopReason == anthropic.StopReasonRefusal {
		return usage(msg), &model.Error{Kind: model.KindRefused, Message: "the model refused"}
	}
	if msg.StopReason == "" {
		return usage(msg), &model.Error{Kind: model.KindTransport, Message: "stream ended before the message did"}
	}
	// Cut before the model finished: the prose ends mid-sentence, a tool_use block's input
	// mid-JSON. Neither is the model's turn.
	switch msg.StopReason {
	case anthropic.StopReasonMaxTokens:
		return usage(msg), &model.Error{Kind: model.KindTruncated, Message: model.MessageOutputCap}
	case anthropic.StopReasonModelContextWindowExceeded:
		return usage(msg), &model.Error{Kind: model.KindTruncated, Message: model.MessageContextFull}
	}
	out := usage(msg)
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	out.Text = strings.Join(text, "")
	return out, nil
}

func usage(msg anthropic.Message) model.Response {
	return model.Response{Usage: model.Usage{InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens}}
}

// params translates the request into the wire format. Prior turns, tool calls and tool results
// are all sent, in order, on every call.
func (m *Model) params(req model.Request) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{Model: anthropic.Model(m.opts.Model), MaxTokens: m.opts.MaxTokens}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, msg := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		if msg.Role == model.RoleAssistant {
			if msg.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(msg.Text))
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, tc.Args, tc.Name))
			}
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
			continue
		}
		for _, tr := range msg.ToolResults {
			blocks = append(blocks, anthropic.NewToolResultBlock(tr.CallID, tr.Content, tr.IsError))
		}
		if msg.Text != "" {
			blocks = append(blocks, anthropic.NewTextBlock(msg.Text))
		}
		p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
	}
	for _, t := range req.Tools {
		schema := anthropic.ToolInputSchemaParam{}
		extra := map[string]any{}
		for k, v := range t.InputSchema {
			switch k {
			case "type":
			case "properties":
				schema.Properties = v
			case "required":
				schema.Required = stringList(v)
			default:
				extra[k] = v
			}
		}
		if len(extra) > 0 {
			schema.ExtraFields = extra
		}
		tool := anthropic.ToolUnionParamOfTool(schema, t.Name)
		if t.Description != "" {
			tool.OfTool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, tool)
	}
	return p
}

// stringList reads a JSON Schema "required" list, whichever way it was decoded.
func stringList(v any) []string {
	switch r := v.(type) {
	case []string:
		return r
	case []any:
		out := make([]string, 0, len(r))
		for _, x := range r {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// classify turns an SDK error into a *model.Error; a ctx error is returned as is. An error
// event inside a 200 stream carries its type (overloaded_error, rate_limit_error, api_error)
// but no status, so the type decides.
func classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		// Neither ae.Message nor the type string as sent: a provider (or a gateway at the
		// base URL) may quote the request in either — the question, the key — and the
		// message reaches the run's error event (found by hardening's privacy test). Known
		// types map onto model.Vocabulary; any other is "provider error".
		me := &model.Error{Status: ae.StatusCode, Message: typeMessage(ae.Type()), Err: err}
		switch ae.Type() {
		case anthropic.ErrorTypeOverloadedError, anthropic.ErrorTypeAPIError, anthropic.ErrorTypeTimeoutError:
			me.Kind = model.KindOverloaded
		case anthropic.ErrorTypeRateLimitError:
			me.Kind = model.KindRateLimited
		default:
			me.Kind = model.StatusKind(ae.StatusCode)
		}
		if ae.Type() == anthropic.ErrorTypeInvalidRequestError && strings.HasPrefix(ae.Message, "prompt is too long") {
			me.Message = model.MessageContextFull // read, never shown
		}
		if ae.StatusCode == http.StatusOK {
			me.Status = 0
		}
		if ae.Response != nil {
			me.RetryAfter = model.RetryAfter(ae.Response.Header, time.Now())
		}
		return me
	}
	if errors.Is(err, model.ErrResponseTooLarge) {
		return &model.Error{Kind: model.KindTransport, Message: model.ErrResponseTooLarge.Error(), Err: err}
	}
	if errors.Is(err, model.ErrOffOrigin) {
		return &model.Error{Kind: model.KindTransport, Message: model.ErrOffOrigin.Error(), Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) { // this attempt's Timeout, not ctx's
		return &model.Error{Kind: model.KindTimeout, Message: model.MessageCallTimeout, Err: err}
	}
	return &model.Error{Kind: model.KindTransport, Message: "provider unreachable or stream unreadable", Err: err}
}

// typeMessage is the phrase of model.Vocabulary for an Anthropic error type.
func typeMessage(t anthropic.ErrorType) string {
	switch t {
	case anthropic.ErrorTypeInvalidRequestError:
		return "invalid request"
	case anthropic.ErrorTypeAuthenticationError:
		return "authentication failed"
	case anthropic.ErrorTypeBillingError:
		return "billing"
	case anthropic.ErrorTypePermissionError:
		return "permission denied"
	case anthropic.ErrorTypeNotFoundError:
		return "not found"
	case anthropic.ErrorTypeRateLimitError:
		return "rate limited"
	case anthropic.ErrorTypeTimeoutError:
		return "timed out"
	case anthropic.ErrorTypeAPIError:
		return "provider failure"
	case anthropic.ErrorTypeOverloadedError:
		return "overloaded"
	case anthropic.ErrorTypeConflictError:
		return "conflict"
	}
	return model.GenericMessage
}
