package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
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
	// LLMReal is the specification's spelling: whichever provider's key is set (see realProvider).
	LLMReal = "real"
)

// Defaults for ConfigFromEnv.
const (
	DefaultStubBaseURL = "http://127.0.0.1:8092/v1"
	DefaultSources     = "demo=http://127.0.0.1:8091/mcp"
	DefaultMaxTurns    = 12
)

// SourceConfig names one MCP source.
type SourceConfig = source.Config

// Config is the agent's configuration, as read by ConfigFromEnv. It holds a provider key:
// print it only through String or LogValue, which leave the key out.
type Config struct {
	// LLM is anthropic, openai or stub.
	LLM string
	// Model is the provider's model name.
	Model string
	// BaseURL is the provider's API root; empty means the provider's own.
	BaseURL string
	// APIKey is the provider key (a dummy for stub).
	APIKey string
	// Timeout bounds one attempt of one model call.
	Timeout time.Duration
	// MaxRetries is how often a 429/5xx/overloaded model call is retried within the deadline.
	MaxRetries int
	// MaxTokens caps the model's output per call.
	MaxTokens int64
	// MaxTurns caps the model calls of one run.
	MaxTurns int
	// Sources are the MCP sources, from DAS_SOURCES.
	Sources []SourceConfig
	// Phase is 1 (one loop) or 2 (a branch per source), from ASK_PHASE.
	Phase int
	// DivergenceTurns caps the catalog-withheld branch's model calls in phase 2 (0: no
	// divergence), from ASK_DIVERGENCE_TURNS.
	DivergenceTurns int
}

// DefaultDivergenceTurns is ASK_DIVERGENCE_TURNS's default in phase 2: enough for the
// catalog-withheld branch to discover a table or two, query and answer.
const DefaultDivergenceTurns = 6

// ConfigFromEnv reads the configuration from the environment (see the package doc). An invalid
// value fails with a message naming the variable; the message never contains a key.
func ConfigFromEnv() (Config, error) { return ConfigFromLookup(os.LookupEnv) }

// ConfigFromLookup is ConfigFromEnv reading variables through lookup.
func ConfigFromLookup(lookup func(string) (string, bool)) (Config, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	c := Config{LLM: get("ASK_LLM"), Model: get("ASK_LLM_MODEL"), BaseURL: get("ASK_LLM_BASE_URL")}
	if c.LLM == "" {
		c.LLM = LLMStub
	}
	if c.LLM == LLMReal {
		p, err := realProvider(get)
		if err != nil {
			return Config{}, err
		}
		c.LLM = p
	}
	switch c.LLM {
	case LLMAnthropic:
		c.APIKey = get("ANTHROPIC_API_KEY")
		if c.APIKey == "" {
			return Config{}, fmt.Errorf("ASK_LLM=anthropic needs ANTHROPIC_API_KEY")
		}
		if c.Model == "" {
			c.Model = "claude-sonnet-4-5"
		}
	case LLMOpenAI:
		c.APIKey = get("OPENAI_API_KEY")
		if c.APIKey == "" && c.BaseURL == "" {
			return Config{}, fmt.Errorf("ASK_LLM=openai needs OPENAI_API_KEY, or ASK_LLM_BASE_URL for a local server")
		}
		if c.APIKey == "" {
			c.APIKey = "unused"
		}
		if c.Model == "" {
			c.Model = "gpt-4o-mini"
		}
	case LLMStub:
		c.APIKey = "stub"
		if c.BaseURL == "" {
			c.BaseURL = DefaultStubBaseURL
		}
		if c.Model == "" {
			c.Model = "stub"
		}
	default:
		return Config{}, fmt.Errorf("ASK_LLM=%q: want anthropic, openai, real or stub", c.LLM)
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, fmt.Errorf("ASK_LLM_BASE_URL=%q: want an absolute http(s) URL", c.BaseURL)
		}
	}
	var err error
	if c.Timeout, err = seconds(get, "ASK_LLM_TIMEOUT_S", 120); err != nil {
		return Config{}, err
	}
	if c.MaxRetries, err = integer(get, "ASK_LLM_MAX_RETRIES", 2, 0); err != nil {
		return Config{}, err
	}
	maxTokens, err := integer(get, "ASK_LLM_MAX_TOKENS", 4096, 1)
	if err != nil {
		return Config{}, err
	}
	c.MaxTokens = int64(maxTokens)
	if c.MaxTurns, err = integer(get, "ASK_MAX_TURNS", DefaultMaxTurns, 1); err != nil {
		return Config{}, err
	}
	if c.Phase, err = integer(get, "ASK_PHASE", 1, 1); err != nil || c.Phase > 2 {
		return Config{}, fmt.Errorf("ASK_PHASE=%q: want 1 or 2", get("ASK_PHASE"))
	}
	defTurns := 0
	if c.Phase == 2 {
		defTurns = DefaultDivergenceTurns
	}
	if c.DivergenceTurns, err = integer(get, "ASK_DIVERGENCE_TURNS", defTurns, 0); err != nil {
		return Config{}, err
	}
	if c.DivergenceTurns > 0 && c.Phase != 2 {
		return Config{}, fmt.Errorf("ASK_DIVERGENCE_TURNS=%q: divergence needs ASK_PHASE=2", get("ASK_DIVERGENCE_TURNS"))
	}
	srcs := get("DAS_SOURCES")
	if srcs == "" {
		srcs = DefaultSources
	}
	if c.Sources, err = source.ParseList(srcs); err != nil {
		return Config{}, fmt.Errorf("DAS_SOURCES: %w", err)
	}
	return c, nil
}

func integer(get func(string) string, key string, def, minimum int) (int, error) {
	v := get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < minimum {
		return 0, fmt.Errorf("%s=%q: want an integer >= %d", key, v, minimum)
	}
	return n, nil
}

func seconds(get func(string) string, key string, def float64) (time.Duration, error) {
	v := get(key)
	if v == "" {
		return time.Duration(def * float64(time.Second)), nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of seconds", key, v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// NewModel builds the model adapter the configuration names: the Anthropic adapter, or the
// OpenAI-compatible one (for openai and for stub, which is that adapter pointed at the llm-stub).
// hc and log may be nil.
func (c Config) NewModel(hc *http.Client, log *slog.Logger) (model.Model, error) {
	retry := model.RetryPolicy{MaxRetries: c.MaxRetries}
	if c.MaxRetries == 0 {
		retry.MaxRetries = -1
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
			Retry: retry, MaxTokens: c.MaxTokens, HTTPClient: hc, Logger: log,
		})
	}
	return nil, fmt.Errorf("ASK_LLM=%q: want anthropic, openai or stub", c.LLM)
}

// String describes the configuration without its key.
func (c Config) String() string {
	return fmt.Sprintf("agent.Config{llm=%s model=%s base_url=%s sources=%d max_turns=%d}", c.LLM, c.Model, c.BaseURL, len(c.Sources), c.MaxTurns)
}

// LogValue logs the configuration without its key.
func (c Config) LogValue() slog.Value {
	names := make([]string, len(c.Sources))
	for i, s := range c.Sources {
		names[i] = s.Name
	}
	return slog.GroupValue(
		slog.String("llm", c.LLM), slog.String("model", c.Model), slog.String("base_url", c.BaseURL),
		slog.Any("sources", names), slog.Int("max_turns", c.MaxTurns),
		slog.Int("phase", c.Phase), slog.Int("divergence_turns", c.DivergenceTurns),
		slog.Duration("timeout", c.Timeout), slog.Int("max_retries", c.MaxRetries),
	)
}
