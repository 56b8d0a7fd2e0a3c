package agent_test

import (
	"fmt"

	"github.com/das-ask/ask/agent"
)

// The stub on its dev address and the demo source: what an environment that sets nothing gets
// (package config reads the variables).
func ExampleDefaultConfig() {
	fmt.Println(agent.DefaultConfig())
	// Output: agent.Config{llm=stub model=stub base_url=http://127.0.0.1:8092/v1 sources=1 max_model_calls=12}
}
