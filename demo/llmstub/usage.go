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

// usageOf is what the reply cost. A reply cut at the cap cost the cap, as the real API counts
// it, even where the stub kept more of it (a tool call's name, at a cap below its cost).
func usageOf(r *request, rp reply) usage {
	p, c := promptTokens(r), completionTokens(rp)
	if rp.cut {
		c = min(c, r.maxTokens)
	}
	return usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

// capReply cuts rp to limit completion tokens (0: no cap), as the real API does when a reply
// reaches max_completion_tokens: the prose, or the tool call's arguments, end where the cap
// fell (arguments then are not valid JSON), and the finish_reason is "length".
func capReply(rp reply, limit int) reply {
	if limit <= 0 || completionTokens(rp) <= limit {
		return rp
	}
	rp.cut = true
	if rp.call != nil {
		c := *rp.call
		c.Arguments = firstRunes(c.Arguments, 4*max(0, limit-3-tokens(c.Name)))
		rp.call = &c
		return rp
	}
	rp.content = firstRunes(rp.content, 4*(limit-1))
	return rp
}

// firstRunes is s's first n runes.
func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
