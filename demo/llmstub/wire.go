package llmstub

import "encoding/json"

// This file holds the subset of the OpenAI Chat Completions wire format the stub reads and writes.
// Fields the stub does not use (temperature, top_p, …) are accepted and ignored, as local
// OpenAI-compatible servers do; the output caps (max_completion_tokens, and the older max_tokens)
// cut the reply as the real API does (see capReply).

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	Model string `json:"model"`
	// Messages is a pointer so that an absent field and an empty array are told apart.
	Messages      *[]wireMessage     `json:"messages"`
	Tools         []wireTool         `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
	Stream        bool               `json:"stream"`
	StreamOptions *wireStreamOptions `json:"stream_options"`
	// MaxCompletionTokens caps the reply; MaxTokens is its older spelling.
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	MaxTokens           *int `json:"max_tokens"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage is one message as sent. Content is either a string, null, or an array of parts.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
}

type wireContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// completion is a non-streaming response.
type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             usage              `json:"usage"`
}

type completionChoice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type responseMessage struct {
	Role      string             `json:"role"`
	Content   *string            `json:"content"`
	Refusal   *string            `json:"refusal"`
	ToolCalls []responseToolCall `json:"tool_calls,omitempty"`
}

// responseToolCall is a tool call in a response; Index is set only in streamed deltas.
type responseToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function responseFunction `json:"function"`
}

type responseFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chunk is one streamed `data:` payload.
type chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	// Usage is omitted unless the request asked for it; then it is null on every chunk but the
	// last, which carries it with no choices — as the real API does.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role      string             `json:"role,omitempty"`
	Content   *string            `json:"content,omitempty"`
	ToolCalls []responseToolCall `json:"tool_calls,omitempty"`
}

// modelList is the body of GET /v1/models.
type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
