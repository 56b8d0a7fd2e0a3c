package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/model/anthropic"
	"github.com/das-ask/ask/agent/model/openai"
	"github.com/das-ask/ask/agent/source"
)

// The model providers ASK_LLM selects.
const (
	LLMAnthropic = "anthropic"
	LLMOpenAI    = "openai"
	LLMStub      = "stub"
	// LLMReal is the specification's spelling: whichever provider's key is set (package config
	// resolves it to LLMAnthropic or LLMOpenAI when it reads ASK_LLM).
	LLMReal = "real"
)

// Defaults of Config (DefaultConfig) and of Options' zero values.
const (
	DefaultStubBaseURL = "http://127.0.0.1:8092/v1"
	// DefaultMaxModelCalls caps one run's model calls (ASK_MAX_TURNS); the asks of a
	// conversation are capped by server.DefaultMaxTurnsPerConversation instead.
	DefaultMaxModelCalls = 12
	DefaultTimeout       = 120 * time.Second
	DefaultMaxRetries    = 2
	DefaultMaxTokens     = 4096
)

// DefaultSources is the demo source on its dev address (DAS_SOURCES when unset).
var DefaultSources = []SourceConfig{{Name: "demo", URL: "http://127.0.0.1:8091/mcp"}}

// SourceConfig names one MCP source.
type SourceConfig = source.Config

// Config is the model and the sources, the "agent" section of package config's tree (which
// reads them from ASK_LLM*, the provider keys and DAS_SOURCES). Zero values mean the defaults;
// "none" is negative (MaxRetries). It holds a provider key: print it only through String or
// LogValue, which leave the key out.
type Config struct {
	// LLM is anthropic, openai or stub.
	LLM string
	// Model is the provider's model name.
	Model string
	// BaseURL is the provider's API root; empty means the provider's own.
	BaseURL string
	// APIKey is the provider key (a dummy for stub).
	APIKey string
	// Timeout bounds one attempt of one model call; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how often a 429/5xx/overloaded model call is retried within the deadline;
	// 0 means DefaultMaxRetries, negative none.
	MaxRetries int
	// MaxTokens caps the model's output per call; 0 means DefaultMaxTokens.
	MaxTokens int64
	// MaxModelCalls caps the model calls of one run; 0 means DefaultMaxModelCalls.
	MaxModelCalls int
	// Sources are the MCP sources.
	Sources []SourceConfig
	// Phase is 1 (one loop) or 2 (a branch per source); 0 means 1.
	Phase int
	// DivergenceTurns caps the catalog-withheld branch's model calls in phase 2 (0: no
	// divergence; package config reads ASK_DIVERGENCE_TURNS, DefaultDivergenceTurns in phase 2
	// when unset).
	DivergenceTurns int
}

// DefaultConfig is the llm-stub on its dev address and the demo source, every limit spelled out.
func DefaultConfig() Config {
	return Config{
		LLM: LLMStub, Model: "stub", BaseURL: DefaultStubBaseURL, APIKey: "stub",
		Timeout: DefaultTimeout, MaxRetries: DefaultMaxRetries, MaxTokens: DefaultMaxTokens,
		MaxModelCalls: DefaultMaxModelCalls, Sources: append([]SourceConfig(nil), DefaultSources...),
	}
}

// DefaultDivergenceTurns is ASK_DIVERGENCE_TURNS's default in phase 2: enough for the
// catalog-withheld branch to discover a table or two, query and answer.
const DefaultDivergenceTurns = 6

// NewModel builds the model adapter the configuration names: the Anthropic adapter, or the
// OpenAI-compatible one (for openai and for stub, which is that adapter pointed at the llm-stub).
// hc and log may be nil.
func (c Config) NewModel(hc *http.Client, log *slog.Logger) (model.Model, error) {
	// RetryPolicy reads zero and negative as Config does.
	retry := model.RetryPolicy{MaxRetries: c.MaxRetries}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	switch c.LLM {
	case LLMAnthropic:
		return anthropic.New(anthropic.Options{
			BaseURL: c.BaseURL, Model: c.Model, APIKey: c.APIKey, Timeout: c.Timeout,
			Retry: retry, MaxTokens: c.MaxTokens, HTTPClient: hc, Logger: log,
		})
	case LLMOpenAI, LLMStub:
		return openai.New(openai.Options{
			BaseURL: c.BaseURL, Model: c.Model, APIKey: c.APIKey, Timeout: c.Timeout,
			Retry: retry, MaxTokens: c.MaxTokens, HTTPClient: hc, Logger: log, Provider: c.LLM,
		})
	}
	return nil, fmt.Errorf("ASK_LLM=%q: want anthropic, openai or stub", c.LLM)
}

// String describes the configuration without its key, or a password in its base URL.
func (c Config) String() string {
	return fmt.Sprintf("agent.Config{llm=%s model=%s base_url=%s sources=%d max_model_calls=%d}", c.LLM, c.Model, redactURL(c.BaseURL), len(c.Sources), c.MaxModelCalls)
}

// redactURL is u with any password shown as xxxxx (ASK_LLM_BASE_URL may carry one for a
// proxy in front of a local model server).
func redactURL(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return u
}

// LogValue logs the configuration without its key, or a password in its base URL.
func (c Config) LogValue() slog.Value {
	names := make([]string, len(c.Sources))
	for i, s := range c.Sources {
		names[i] = s.Name
	}
	return slog.GroupValue(
		slog.String("llm", c.LLM), slog.String("model", c.Model), slog.String("base_url", redactURL(c.BaseURL)),
		slog.Any("sources", names), slog.Int("max_model_calls", c.MaxModelCalls),
		slog.Int("phase", c.Phase), slog.Int("divergence_turns", c.DivergenceTurns),
		slog.Duration("timeout", c.Timeout), slog.Int("max_retries", c.MaxRetries),
	)
}
