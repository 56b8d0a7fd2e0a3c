package llmstub

import (
	"encoding/json"
	"strings"
)

// toolResult is the outcome of one step of an ask: the tool message answering the first tool call
// of one assistant turn.
type toolResult struct {
	tool   string
	args   string // the call's JSON arguments
	value  any    // the parsed JSON (numbers kept as json.Number), or the text when it is not JSON
	text   string
	failed bool
}

// toolTurns returns, oldest first, the result of each assistant tool-call turn in msgs (the
// messages after the latest user message). Requests are validated first, so every tool call has
// its answer.
func toolTurns(msgs []Message) []toolResult {
	var out []toolResult
	for i, m := range msgs {
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		call := m.ToolCalls[0]
		r := toolResult{tool: call.Name, args: call.Arguments}
		for _, t := range msgs[i+1:] {
			if t.Role == "tool" && t.ToolCallID == call.ID {
				r.text = t.Content
				r.value, r.failed = classify(t.Content)
				break
			}
		}
		out = append(out, r)
	}
	return out
}

// classify decides whether a tool message reports a failure. The Chat Completions format has no
// error flag on a tool message, so the convention is: a successful result is the tool's JSON (the
// source contract sends the same JSON as its text content); a failure is text that is not JSON, or
// a JSON object with a non-null, non-false "error" or a true "is_error"/"isError".
func classify(text string) (value any, failed bool) {
	if !json.Valid([]byte(text)) {
		return text, true
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if dec.Decode(&value) != nil {
		return text, true
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return value, false
	}
	if e, ok := obj["error"]; ok && e != nil && e != false {
		return value, true
	}
	for _, k := range []string{"is_error", "isError"} {
		if b, ok := obj[k].(bool); ok && b {
			return value, true
		}
	}
	return value, false
}

// isEmpty reports whether a tool result found nothing: null, a blank string, an empty list or
// object, or an object in which one of the contract's list fields (terms, rows, tables, columns)
// is present and empty or null.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(x) == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		if len(x) == 0 {
			return true
		}
		// The contract's list fields: a result whose list is empty found nothing.
		for _, k := range [...]string{"terms", "rows", "tables", "columns"} {
			if f, ok := x[k]; ok {
				if l, isList := f.([]any); f == nil || (isList && len(l) == 0) {
					return true
				}
			}
		}
	}
	return false
}
