package llmstub

import "unicode/utf8"

// Token counts are a deterministic estimate (about four characters a token, as for English with
// OpenAI's tokenizers), so a run's reported usage is the same every time and grows with what is
// sent, which is all a test or a usage report needs.

func tokens(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

// promptTokens counts the messages (with a fixed per-message overhead) and the tool definitions.
func promptTokens(r *request) int {
	n := 3 + (r.toolBytes+3)/4
	for _, m := range r.messages {
		n += 4 + tokens(m.Content)
		for _, c := range m.ToolCalls {
			n += 3 + tokens(c.Name) + tokens(c.Arguments)
		}
	}
	return n
}

// completionTokens counts what the reply says.
func completionTokens(rp reply) int {
	if rp.call != nil {
		return 3 + tokens(rp.call.Name) + tokens(rp.call.Arguments)
	}
	return 1 + tokens(rp.content)
}

func usageOf(r *request, rp reply) usage {
	p, c := promptTokens(r), completionTokens(rp)
	return usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}
