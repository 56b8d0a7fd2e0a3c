package agent_test

import (
	"fmt"

	"github.com/das-ask/ask/agent"
)

// A local OpenAI-compatible server (here Ollama) needs only its base URL and a model name.
func ExampleConfigFromLookup() {
	env := map[string]string{
		"ASK_LLM":          "openai",
		"ASK_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
		"ASK_LLM_MODEL":    "llama3.1",
		"DAS_SOURCES":      "demo=http://127.0.0.1:8091/mcp",
	}
	cfg, err := agent.ConfigFromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg)
	// Output: agent.Config{llm=openai model=llama3.1 base_url=http://127.0.0.1:11434/v1 sources=1 max_turns=12}
}
