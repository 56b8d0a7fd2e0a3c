package agent

import "errors"

// realProvider resolves ASK_LLM=real, the specification's spelling for "a real model once a key
// is set": the provider whose key is set. Neither key, or both, is an error naming both
// variables, since guessing would spend someone's money on the wrong account.
func realProvider(get func(string) string) (string, error) {
	anthropicKey, openaiKey := get("ANTHROPIC_API_KEY") != "", get("OPENAI_API_KEY") != ""
	switch {
	case anthropicKey && openaiKey:
		return "", errors.New("ASK_LLM=real: both ANTHROPIC_API_KEY and OPENAI_API_KEY are set; unset one, or choose with ASK_LLM=anthropic or ASK_LLM=openai")
	case anthropicKey:
		return LLMAnthropic, nil
	case openaiKey:
		return LLMOpenAI, nil
	}
	return "", errors.New("ASK_LLM=real needs a provider key: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or ASK_LLM=openai with ASK_LLM_BASE_URL for a local server)")
}
