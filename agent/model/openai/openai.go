// Package openai is the model adapter for OpenAI-compatible Chat Completions with tool calls,
// built on github.com/openai/openai-go/v3. It works against any server speaking that wire
// format by base URL alone: OpenAI, Ollama, vLLM, llama.cpp, and the llm-stub.
package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/das-ask/ask/agent/model"
)

// Options configure the adapter. Zero values mean defaults.
type Options struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1.
	// Empty means OpenAI's (DefaultBaseURL); the SDK's OPENAI_BASE_URL is not read.
	BaseURL string
	// Model is the model name sent with every request. Required.
	Model string
	// APIKey is sent as the bearer. Local servers accept any non-empty value.
	APIKey string
	// Timeout bounds one attempt of one call; zero means 120s.
	Timeout time.Duration
	// Retry is the retry policy for 429/5xx, bounded by the caller's deadline.
	Retry model.RetryPolicy
	// MaxTokens caps the model's output per call; zero leaves it to the server.
	MaxTokens int64
	// HTTPClient is the client requests go through; nil means one like http.DefaultClient
	// whose response headers are bounded (model.MaxResponseHeaderBytes). Either way a
	// redirect off the base URL's origin is not followed (model.SameOriginClient).
	HTTPClient *http.Client
	// Logger receives one line per failed attempt; nil means discard.
	Logger *slog.Logger
	// Provider is the provider those lines name, as the service's metrics and spans do (the
	// llm-stub is "stub", not this adapter's "openai"); empty means "openai".
	Provider string
}

// DefaultBaseURL is the API root when Options.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Model is the adapter. It is safe for concurrent use.
type Model struct {
	chat openai.ChatCompletionService
	opts Options
	log  *slog.Logger
}

var _ model.Model = (*Model)(nil)

// New returns the adapter. It fails only when Model is empty.
//
// Nothing but opts configures it: the SDK's client would read OPENAI_BASE_URL, OPENAI_ORG_ID,
// OPENAI_PROJECT_ID and OPENAI_CUSTOM_HEADERS from the process's environment, and with
// ASK_LLM_BASE_URL unset the key and the conversation went wherever OPENAI_BASE_URL pointed,
// with whatever headers the others named, so the adapter builds its service without them.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("openai: a model name is required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 120 * time.Second
	}
	if opts.Provider == "" {
		opts.Provider = "openai"
	}
	hc := model.SameOriginClient(opts.HTTPClient, model.ResponseBound(opts.MaxTokens))
	ro := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(opts.Timeout),
		option.WithAPIKey(opts.APIKey),
		option.WithBaseURL(cmp.Or(opts.BaseURL, DefaultBaseURL)),
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Not openai.NewClient, which puts options read from the environment before these.
	return &Model{chat: openai.NewChatCompletionService(ro...), opts: opts, log: log}, nil
}

// Complete makes one Chat Completions call, retrying 429/5xx within ctx's deadline.
func (m *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	params := m.params(req)
	return m.opts.Retry.Do(ctx, func(ctx context.Context) (model.Response, error) {
		resp, err := m.once(ctx, params)
		if err != nil && ctx.Err() == nil {
			m.log.WarnContext(ctx, "model call failed", append([]any{"provider", m.opts.Provider, "model", m.opts.Model}, model.LogAttrs(err)...)...)
		}
		return resp, err
	})
}

func (m *Model) once(ctx context.Context, params openai.ChatCompletionNewParams) (model.Response, error) {
	cc, err := m.chat.New(ctx, params)
	if err != nil {
		return model.Response{}, classify(ctx, err)
	}
	usage := model.Usage{InputTokens: cc.Usage.PromptTokens, OutputTokens: cc.Usage.CompletionTokens}
	if len(cc.Choices) == 0 {
		return model.Response{Usage: usage}, &model.Error{Kind: model.KindTransport, Message: "response has no choices"}
	}
	ch := cc.Choices[0]
	if ch.FinishReason == "content_filter" {
		return model.Response{Usage: usage}, &model.Error{Kind: model.KindContentFilter, Message: "the provider's content filter stopped the turn"}
	}
	if ch.Message.Refusal != "" {
		return model.Response{Usage: usage}, &model.Error{Kind: model.KindRefused, Message: "the model refused"}
	}
	if ch.FinishReason == "length" {
		// Cut at MaxCompletionTokens: the prose ends mid-sentence, a tool call's arguments
		// mid-JSON. Neither is the model's turn.
		return model.Response{Usage: usage}, &model.Error{Kind: model.KindTruncated, Message: model.MessageOutputCap}
	}
	out := model.Response{Text: ch.Message.Content, Usage: usage}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		args := json.RawMessage(tc.Function.Arguments)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args})
	}
	return out, nil
}

// params translates the request into the wire format. Prior turns, tool calls and tool results
// are all sent, in order, on every call.
func (m *Model) params(req model.Request) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.opts.Model)}
	if m.opts.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(m.opts.MaxTokens)
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		p.Messages = append(p.Messages, messages(msg)...)
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema(t.InputSchema))}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return p
}

func messages(msg model.Message) []openai.ChatCompletionMessageParamUnion {
	switch msg.Role {
	case model.RoleAssistant:
		a := openai.ChatCompletionAssistantMessageParam{}
		if msg.Text != "" {
			a.Content.OfString = openai.String(msg.Text)
		}
		for _, tc := range msg.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name: tc.Name, Arguments: string(tc.Args),
					},
				},
			})
		}
		return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &a}}
	default:
		var out []openai.ChatCompletionMessageParamUnion
		for _, tr := range msg.ToolResults {
			content := tr.Content
			if tr.IsError {
				content = "Error: " + content
			}
			out = append(out, openai.ToolMessage(content, tr.CallID))
		}
		if msg.Text != "" {
			out = append(out, openai.UserMessage(msg.Text))
		}
		return out
	}
}

// schema makes sure a tool's parameters are an object schema, as the wire format requires.
func schema(s map[string]any) map[string]any {
	if s == nil {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return s
}

// classify turns an SDK error into a *model.Error; a ctx error is returned as is.
func classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var ae *openai.Error
	if errors.As(err, &ae) {
		// Not ae.Message nor its code or type: a provider (or a gateway at the base URL) may
		// quote the request in them — the question, the key — and the message reaches the
		// run's error event (found by hardening's privacy test). The status decides.
		me := &model.Error{Kind: model.StatusKind(ae.StatusCode), Status: ae.StatusCode, Message: statusMessage(ae.StatusCode), Err: err}
		switch ae.Code {
		case "content_filter":
			me.Kind = model.KindContentFilter
		case "context_length_exceeded":
			me.Message = model.MessageContextFull
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
	return &model.Error{Kind: model.KindTransport, Message: "provider unreachable or response unreadable", Err: err}
}

// statusMessage is the phrase of model.Vocabulary for an HTTP status from the provider.
func statusMessage(status int) string {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity:
		return "invalid request"
	case status == http.StatusUnauthorized:
		return "authentication failed"
	case status == http.StatusPaymentRequired:
		return "billing"
	case status == http.StatusForbidden:
		return "permission denied"
	case status == http.StatusNotFound:
		return "not found"
	case status == http.StatusConflict:
		return "conflict"
	case status == http.StatusRequestEntityTooLarge:
		return "request too large"
	case status == http.StatusTooManyRequests:
		return "rate limited"
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return "timed out"
	case status == http.StatusServiceUnavailable, status == 529:
		return "overloaded"
	case status >= 500:
		return "provider failure"
	}
	return model.GenericMessage
}
