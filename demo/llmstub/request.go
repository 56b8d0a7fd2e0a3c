package llmstub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Message is one message of a request as the stub understood it: the text of its content (parts
// joined by newlines) and, for an assistant, its tool calls.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is one function call an assistant message made (in a request) or the stub made (in a
// response). Arguments is the JSON text, as on the wire.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// request is a validated chat completion request.
type request struct {
	model        string
	messages     []Message
	tools        []string // offered function names; none when tool_choice is "none"
	toolBytes    int      // size of the tool definitions, for prompt token counts
	stream       bool
	includeUsage bool
	maxTokens    int // the output cap; 0 when none was set
}

// functionName is the alphabet of a function's name, and maxFunctionName and maxTools the bounds
// the real API puts on a name's length and on the number of tools in one request: it refuses a
// request that breaks any of them with a 400, as Anthropic's does (its pattern is
// ^[a-zA-Z0-9_-]{1,64}$ too), so an agent that sends such a request fails here as it would there.
var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

const (
	maxFunctionName = 64
	maxTools        = 128
)

// parseRequest decodes and validates body the way the real API does, returning a 400 apiError
// for what it would reject.
func parseRequest(body []byte) (*request, *apiError) {
	var cr chatRequest
	if err := json.Unmarshal(body, &cr); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, invalidRequest(te.Field, "invalid_type",
				fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", te.Field, te.Type, te.Value))
		}
		return nil, invalidRequest("", "", "We could not parse the JSON body of your request. "+
			"The OpenAI API expects a JSON payload, but what was sent was not valid JSON.")
	}
	if cr.Model == "" {
		return nil, invalidRequest("", "", "you must provide a model parameter")
	}
	if cr.Messages == nil {
		return nil, invalidRequest("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	if len(*cr.Messages) == 0 {
		return nil, invalidRequest("messages", "empty_array",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if cr.StreamOptions != nil && !cr.Stream {
		return nil, invalidRequest("stream_options", "invalid_value",
			"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	r := &request{model: cr.Model, stream: cr.Stream, includeUsage: cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage}
	for _, c := range []struct {
		param string
		v     *int
	}{{"max_completion_tokens", cr.MaxCompletionTokens}, {"max_tokens", cr.MaxTokens}} {
		if c.v == nil {
			continue
		}
		if *c.v < 1 {
			return nil, invalidRequest(c.param, "integer_below_min_value", fmt.Sprintf(
				"Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", c.param, *c.v))
		}
		if r.maxTokens == 0 || *c.v < r.maxTokens {
			r.maxTokens = *c.v
		}
	}
	tools, toolBytes, aerr := parseTools(cr.Tools, cr.ToolChoice)
	if aerr != nil {
		return nil, aerr
	}
	r.tools, r.toolBytes = tools, toolBytes
	msgs, aerr := parseMessages(*cr.Messages)
	if aerr != nil {
		return nil, aerr
	}
	r.messages = msgs
	return r, nil
}

func parseTools(tools []wireTool, choice json.RawMessage) ([]string, int, *apiError) {
	if len(tools) > maxTools {
		return nil, 0, invalidRequest("tools", "array_above_max_length", fmt.Sprintf(
			"Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", maxTools, len(tools)))
	}
	names := make([]string, 0, len(tools))
	size := 0
	for i, t := range tools {
		if t.Type != "function" {
			return nil, 0, invalidRequest(fmt.Sprintf("tools[%d].type", i), "invalid_value",
				fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type))
		}
		if n := len(t.Function.Name); n > maxFunctionName {
			return nil, 0, invalidRequest(fmt.Sprintf("tools[%d].function.name", i), "string_above_max_length", fmt.Sprintf(
				"Invalid 'tools[%d].function.name': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", i, maxFunctionName, n))
		}
		if !functionName.MatchString(t.Function.Name) {
			return nil, 0, invalidRequest(fmt.Sprintf("tools[%d].function.name", i), "invalid_value",
				fmt.Sprintf("Invalid 'tools[%d].function.name': string does not match pattern. "+
					"Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i))
		}
		names = append(names, t.Function.Name)
		size += len(t.Function.Name) + 32
	}
	choice = bytes.TrimSpace(choice)
	if len(choice) > 0 && !bytes.Equal(choice, []byte("null")) {
		if len(tools) == 0 {
			return nil, 0, invalidRequest("tool_choice", "",
				"Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
		}
		var s string
		if json.Unmarshal(choice, &s) == nil && s == "none" {
			// The model may not call tools: for the script it is as if none were offered.
			names = nil
		}
	}
	return names, size, nil
}

// parseMessages normalises the messages and checks what the real API checks: known roles, content
// where it is required, and tool messages that answer, immediately and exactly, the tool calls of
// the assistant message before them.
func parseMessages(in []wireMessage) ([]Message, *apiError) {
	out := make([]Message, 0, len(in))
	pending := map[string]bool{} // tool_call_ids of the last assistant message not yet answered
	pendingAt := -1
	unanswered := func() *apiError {
		if len(pending) == 0 {
			return nil
		}
		ids := make([]string, 0, len(pending))
		for _, m := range out[pendingAt].ToolCalls {
			if pending[m.ID] {
				ids = append(ids, m.ID)
			}
		}
		return invalidRequest(fmt.Sprintf("messages.[%d].role", pendingAt), "",
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each "+
				"'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(ids, ", "))
	}
	for i, wm := range in {
		text, present, aerr := contentText(i, wm.Content)
		if aerr != nil {
			return nil, aerr
		}
		m := Message{Role: wm.Role, Content: text, ToolCallID: wm.ToolCallID}
		if wm.Role != "tool" {
			if aerr := unanswered(); aerr != nil {
				return nil, aerr
			}
		}
		switch wm.Role {
		case "":
			return nil, invalidRequest(fmt.Sprintf("messages[%d].role", i), "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: 'messages[%d].role'.", i))
		case "system", "developer", "user":
			if !present {
				return nil, missingContent(i)
			}
		case "function":
			// Deprecated by the API but still accepted; the stub gives it no meaning.
		case "assistant":
			calls, aerr := parseToolCalls(i, wm.ToolCalls)
			if aerr != nil {
				return nil, aerr
			}
			if !present && len(calls) == 0 {
				return nil, invalidRequest(fmt.Sprintf("messages.[%d].content", i), "",
					"Invalid value for 'content': expected a string, got null.")
			}
			m.ToolCalls = calls
			if len(calls) > 0 {
				pending, pendingAt = map[string]bool{}, i
				for _, c := range calls {
					pending[c.ID] = true
				}
			}
		case "tool":
			if !present {
				return nil, missingContent(i)
			}
			if wm.ToolCallID == "" {
				return nil, invalidRequest(fmt.Sprintf("messages[%d].tool_call_id", i), "missing_required_parameter",
					fmt.Sprintf("Missing required parameter: 'messages[%d].tool_call_id'.", i))
			}
			if !pending[wm.ToolCallID] {
				return nil, invalidRequest(fmt.Sprintf("messages.[%d].role", i), "",
					"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			delete(pending, wm.ToolCallID)
		default:
			return nil, invalidRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", wm.Role))
		}
		out = append(out, m)
	}
	if aerr := unanswered(); aerr != nil {
		return nil, aerr
	}
	return out, nil
}

func missingContent(i int) *apiError {
	return invalidRequest(fmt.Sprintf("messages[%d].content", i), "missing_required_parameter",
		fmt.Sprintf("Missing required parameter: 'messages[%d].content'.", i))
}

func parseToolCalls(i int, in []wireToolCall) ([]ToolCall, *apiError) {
	if len(in) == 0 {
		return nil, nil
	}
	calls := make([]ToolCall, 0, len(in))
	for j, c := range in {
		param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		switch {
		case c.ID == "":
			return nil, invalidRequest(param+".id", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.id'.", param))
		case c.Type != "function":
			return nil, invalidRequest(param+".type", "invalid_value",
				fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", c.Type))
		case c.Function.Name == "":
			return nil, invalidRequest(param+".function.name", "missing_required_parameter",
				fmt.Sprintf("Missing required parameter: '%s.function.name'.", param))
		}
		calls = append(calls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return calls, nil
}

// contentText returns the text of a message's content: a string, or the text parts of an array
// joined by newlines. present is false for an absent or null content.
func contentText(i int, raw json.RawMessage) (text string, present bool, aerr *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false, nil
	}
	if json.Unmarshal(raw, &text) == nil {
		return text, true, nil
	}
	var parts []wireContentPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", false, invalidRequest(fmt.Sprintf("messages[%d].content", i), "invalid_type",
			fmt.Sprintf("Invalid type for 'messages[%d].content': expected one of a string or array of objects.", i))
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), true, nil
}
