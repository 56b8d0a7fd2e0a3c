// Package model is the small interface between the run loop and a language model: one call
// takes the conversation so far and the tools on offer, and returns prose, tool calls or both.
//
// Adapters live in subpackages (anthropic, openai) and are built on the providers' official Go
// SDKs. An adapter is safe for concurrent use by many runs; it holds no per-run state.
package model

import (
	"context"
	"encoding/json"
)

// Model is one language model behind a provider's API.
//
// Complete makes one model call (retrying transient provider failures within ctx's deadline)
// and returns the model's turn. It returns an *Error for provider failures, and ctx.Err()
// (possibly wrapped) when ctx ends first. A provider refusal or content filter is an *Error,
// never a Response: a refused turn must not read as an answer.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Request is everything one model call sees.
type Request struct {
	// System is the system prompt.
	System string
	// Messages is the conversation, oldest first: prior turns, the question, and the run's own
	// tool calls and results so far.
	Messages []Message
	// Tools are the tools the model may call.
	Tools []ToolSpec
}

// Role says who a message is from.
type Role string

const (
	// RoleUser is the person asking, or tool results sent back on the model's behalf.
	RoleUser Role = "user"
	// RoleAssistant is the model.
	RoleAssistant Role = "assistant"
)

// Message is one message of the conversation. A user message carries Text or ToolResults; an
// assistant message carries Text, ToolCalls or both.
type Message struct {
	Role        Role
	Text        string
	ToolCalls   []ToolCall
	ToolResults []ToolResult
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object for the tool's arguments.
	InputSchema map[string]any
}

// ToolCall is the model asking for one tool call.
type ToolCall struct {
	// ID is the provider's id for the call; the matching ToolResult carries it back.
	ID   string
	Name string
	// Args is the JSON object of arguments as the model wrote it.
	Args json.RawMessage
}

// ToolResult is what one tool call returned, sent back to the model.
type ToolResult struct {
	CallID  string
	Content string
	// IsError marks a tool error the model should correct.
	IsError bool
}

// Response is the model's turn.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
}

// Usage is what one model call cost, summed over any retries that reached the model.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}
