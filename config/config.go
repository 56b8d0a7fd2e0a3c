// Package config is the service's one configuration: a Config tree with a section per part
// (the service, its store, bearer validation, the model and sources, the operator's side),
// DefaultConfig, and FromEnv, the only reader of the environment (through Env). Every command
// that builds the service (cmd/askd, cmd/ask-serve, the conformance dev stack, the bench child)
// starts from DefaultConfig or FromEnv and hands the result to package app. The other commands
// read their own sections through the same Env (commands.go: Client, Target, Eval, Conformance, Stub,
// DemoSource) into their flags' defaults; Process is the process's lookup, the one use of
// os.LookupEnv in the module.
//
// In every section a zero value means that setting's default, and "none" is spelled as a
// negative duration (a shutdown grace, a JWT leeway, model retries) or "" for an address that
// may be off: zero never means two things. The environment spells "none" as 0 where a setting
// allows it (DAS_ASK_SHUTDOWN_GRACE_S=0, DAS_JWT_LEEWAY_S=0, ASK_LLM_MAX_RETRIES=0) and "off"
// for the admin listener.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/internal/httpurl"
	"github.com/das-ask/ask/internal/redact"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store/seal"
	"github.com/das-ask/ask/webhook"
)

// Defaults that belong to no single part.
const (
	DefaultAddr      = "127.0.0.1:8080"
	DefaultAdminAddr = "127.0.0.1:9090"
)

// Config is the whole service's configuration.
type Config struct {
	// Addr is the API's listen address (DAS_ASK_ADDR).
	Addr string
	// Service is the ask service's settings (DAS_ASK_*; package server).
	Service server.Config
	// Store selects the run registry (DAS_ASK_STORE, DAS_ASK_LEASE_S, DAS_ASK_REDIS_PREFIX,
	// DAS_ASK_REDIS_BUCKETS, DAS_ASK_REDIS_CACHE_MB, DAS_ASK_SEAL_KEYS).
	Store StoreConfig
	// Auth is bearer validation (DAS_JWKS_URL, DAS_ISSUER, …; package auth), the same settings
	// the sources use. The issuer, JWKS URL and audience have no default.
	Auth auth.Config
	// Agent is the model and the MCP sources (ASK_LLM*, provider keys, DAS_SOURCES; package
	// agent). It holds a provider key: print it only through its String or LogValue.
	Agent agent.Config
	// Ops is the operator's side: logs, the admin listener, traces (package obs).
	Ops OpsConfig
	// Webhooks are the signed webhooks on a run's end (DAS_ASK_WEBHOOK_*; package webhook):
	// off unless Allow is set. It holds signing secrets: never print it whole.
	Webhooks webhook.Config
	// StubScript is the llm-stub's script file (ASK_STUB_SCRIPT); "" means the embedded one.
	StubScript string
}

// StoreConfig selects where tickets, events and conversations live.
type StoreConfig struct {
	// URL is "" for the in-memory store (this process only), or redis://[user:pass@]host:port/db
	// (rediss:// for TLS), redis+cluster://host:port[,...] or redis+sentinel://host:port[,...]/master
	// for Redis shared by every replica with the same URL, Prefix and Buckets.
	URL string
	// Lease is how long a replica's lease on a run lasts unrenewed (Redis only); 0 means
	// store/redis's default (10 s).
	Lease time.Duration
	// Prefix starts every Redis key; "" means store/redis's default ("ask:").
	Prefix string
	// Buckets is how many buckets the Redis keys are spread over (DAS_ASK_REDIS_BUCKETS); 0
	// means store/redis's default: 1 on one Redis, 16 on Redis Cluster. Every replica that
	// shares the prefix uses the same value.
	Buckets int
	// CacheMB bounds, in MiB, the memory of store/redis's tail hub, which keeps the logs this
	// replica's readers read (finished ones until their TTL, so replays come from memory); 0
	// means store/redis's default (64 MiB).
	CacheMB int64
	// Seal seals the question at rest (DAS_ASK_SEAL_KEYS, "kid1:base64key,kid2:base64key";
	// Redis only): XChaCha20-Poly1305 with 32-byte keys, the first key seals, all open. nil
	// means unsealed, which store/redis refuses on a Redis that persists (AOF or RDB: the
	// durable mode). Dropping a key crypto-shreds what it sealed.
	Seal *seal.Keys
}

// RedisOnly names the settings c holds that only the Redis store reads (DAS_ASK_LEASE_S,
// DAS_ASK_REDIS_PREFIX, DAS_ASK_REDIS_BUCKETS, DAS_ASK_REDIS_CACHE_MB, DAS_ASK_SEAL_KEYS), each
// set to other than its default: with the in-memory store (URL "") they are ignored, and the
// service says so at start rather than let an operator believe, say, that questions are sealed.
// Names only: a seal key is a secret.
func (c StoreConfig) RedisOnly() []string {
	var names []string
	for _, s := range []struct {
		name string
		set  bool
	}{
		{"DAS_ASK_LEASE_S", c.Lease != 0}, {"DAS_ASK_REDIS_PREFIX", c.Prefix != ""}, {"DAS_ASK_REDIS_BUCKETS", c.Buckets != 0},
		{"DAS_ASK_REDIS_CACHE_MB", c.CacheMB != 0}, {"DAS_ASK_SEAL_KEYS", c.Seal != nil},
	} {
		if s.set {
			names = append(names, s.name)
		}
	}
	return names
}

// WebhooksIgnored names the DAS_ASK_WEBHOOK_* settings c holds while webhooks are off
// (DAS_ASK_WEBHOOK_ALLOW unset), each set to other than its default: they are ignored, and the
// service says so at start rather than let an operator who forgot the allow-list believe
// webhooks on. Names only: a signing secret is a secret.
func WebhooksIgnored(c webhook.Config) []string {
	if c.Enabled() {
		return nil
	}
	var names []string
	for _, s := range []struct {
		name string
		set  bool
	}{
		{"DAS_ASK_WEBHOOK_SECRETS", len(c.Secrets) > 0}, {"DAS_ASK_WEBHOOK_ENDPOINT_SECRETS", len(c.EndpointSecrets) > 0},
		{"DAS_ASK_WEBHOOK_ALLOW_ADDRS", len(c.AllowAddrs) > 0},
		{"DAS_ASK_WEBHOOK_MAX_ATTEMPTS", c.MaxAttempts != 0}, {"DAS_ASK_WEBHOOK_TIMEOUT_S", c.Timeout != 0},
	} {
		if s.set {
			names = append(names, s.name)
		}
	}
	return names
}

// OpsConfig is the operator's side of the service.
type OpsConfig struct {
	// Observe attaches package obs: metrics, request ids, the per-ask log line, traces.
	Observe bool
	// AdminAddr serves /metrics, /healthz and /readyz (DAS_ASK_ADMIN_ADDR); "" means none.
	AdminAddr string
	// AdminOptional: when AdminAddr cannot be listened on, warn and go on without it (true for
	// the default address, which another replica on the host may hold); false stops the start.
	AdminOptional bool
	// LogFormat is json or text (DAS_LOG_FORMAT); LogLevel DAS_LOG_LEVEL.
	LogFormat string
	LogLevel  slog.Level
	// OTLP exports traces over OTLP/HTTP, configured by the standard OTEL_* variables (which the
	// OpenTelemetry SDK reads itself); set when OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is.
	OTLP bool
}

// DefaultConfig is the configuration of an environment that sets nothing: the in-memory store,
// the llm-stub on its dev address, the demo source on its dev address, JSON logs, the admin
// listener on 127.0.0.1:9090 when free. Auth has no issuer: set one (auth.DevConfig for the dev
// stack) before building the service.
func DefaultConfig() Config {
	return Config{
		Addr:    DefaultAddr,
		Service: server.DefaultConfig(),
		Auth: auth.Config{
			Algorithms: strings.Split(auth.DefaultAlgorithms, ","),
			Leeway:     auth.DefaultLeeway,
		},
		Agent: agent.DefaultConfig(),
		Ops: OpsConfig{
			Observe: true, AdminAddr: DefaultAdminAddr, AdminOptional: true,
			LogFormat: "json", LogLevel: slog.LevelInfo,
		},
	}
}

// FromEnv is DefaultConfig with every variable lookup holds applied. All invalid values are
// reported together, each naming its variable; no message holds a key or a password. The
// auth settings that have no default (DAS_JWKS_URL, DAS_ISSUER, DAS_AUDIENCE) are not required
// here: auth.New refuses a configuration without them, naming them, so a dev stack that sets
// its own issuer can still read the rest from the environment.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	e := NewEnv(lookup)
	c := DefaultConfig()
	c.Addr = e.String("DAS_ASK_ADDR", c.Addr)
	checkListenAddr(e, "DAS_ASK_ADDR", c.Addr, "want host:port")
	c.Service = serviceFrom(e, c.Service)
	c.Store = storeFrom(e)
	c.Auth = AuthFrom(e, c.Auth)
	c.Agent = agentFrom(e, c.Agent)
	c.Ops = opsFrom(e, c.Ops)
	if _, port, err := net.SplitHostPort(c.Addr); err == nil && port != "0" && !c.Ops.AdminOptional && c.Ops.AdminAddr == c.Addr {
		// no restart gets past it: a setting to correct (exit 2), not an address another holds
		e.Failf("DAS_ASK_ADMIN_ADDR", "%q: the same address as DAS_ASK_ADDR; give the admin listener its own", c.Ops.AdminAddr)
	}
	c.Webhooks = webhooksFrom(e)
	c.StubScript = stubFrom(e).Script
	if err := e.Err(); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return c, nil
}

// ErrInvalid is what FromEnv's error matches (errors.Is): a setting to correct, which no retry
// of the start would get past (askd exits 2 for it, 1 for a start that failed otherwise).
var ErrInvalid = errors.New("configuration")

// Upper bounds of the service's counts: beyond them a value is a typo, not a plan.
const (
	maxCount    = 100_000_000
	maxSeconds  = 1 << 31
	minEvents   = 8
	maxBodyEdge = 16 << 20
)

func serviceFrom(e *Env, c server.Config) server.Config {
	if v := e.String("DAS_ASK_PATH", ""); v != "" {
		if p, err := server.CleanBasePath(v); err != nil {
			e.Failf("DAS_ASK_PATH", "%q: %v", v, err)
		} else if p == "" {
			c.BasePath = "/"
		} else {
			c.BasePath = p
		}
	}
	c.TTL = e.Seconds("DAS_ASK_TTL_S", c.TTL, 1, maxSeconds)
	c.MaxEvents = int(e.Int("DAS_ASK_MAX_EVENTS", int64(c.MaxEvents), minEvents, 1_000_000))
	c.KeepAlive = e.Seconds("DAS_ASK_KEEPALIVE_S", c.KeepAlive, 1, maxSeconds)
	c.Deadline = e.Seconds("DAS_ASK_DEADLINE_S", c.Deadline, 1, maxSeconds)
	c.MaxInFlight = int(e.Int("DAS_ASK_MAX_INFLIGHT_PER_ID", int64(c.MaxInFlight), 1, 1_000_000))
	c.MaxTickets = int(e.Int("DAS_ASK_MAX_TICKETS", int64(c.MaxTickets), 1, maxCount))
	c.MaxConversationsPerID = int(e.Int("DAS_ASK_MAX_CONVERSATIONS_PER_ID", int64(c.MaxConversationsPerID), 1, maxCount))
	c.MaxRetainedPerID = int(e.Int("DAS_ASK_MAX_RETAINED_PER_ID", int64(c.MaxRetainedPerID), 1, maxCount))
	c.MaxTurns = int(e.Int("DAS_ASK_MAX_TURNS_PER_CONVERSATION", int64(c.MaxTurns), 1, 10_000))
	c.MaxBodyBytes = e.Int("DAS_ASK_MAX_BODY_BYTES", c.MaxBodyBytes, 1024, maxBodyEdge)
	c.StoreWait = e.Seconds("DAS_ASK_STORE_WAIT_S", c.StoreWait, 1, maxSeconds)
	if g := e.Seconds("DAS_ASK_SHUTDOWN_GRACE_S", c.ShutdownGrace, 0, maxSeconds); g == 0 {
		c.ShutdownGrace = -1 // 0 in the environment: no grace
	} else {
		c.ShutdownGrace = g
	}
	if c.MaxRetainedPerID < c.MaxInFlight {
		// Running tickets are held tickets: the in-flight cap could never be reached.
		e.Failf("DAS_ASK_MAX_RETAINED_PER_ID", "=%d: want at least DAS_ASK_MAX_INFLIGHT_PER_ID (%d), since running asks are retained tickets too",
			c.MaxRetainedPerID, c.MaxInFlight)
	}
	return c
}

// redisURL reports whether v names a Redis store: one server, a cluster or a Sentinel-managed
// primary (store/redis's URL forms).
func redisURL(v string) bool {
	for _, p := range []string{"redis://", "rediss://", "redis+cluster://", "rediss+cluster://", "redis+sentinel://", "rediss+sentinel://"} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

func storeFrom(e *Env) StoreConfig {
	var c StoreConfig
	switch v := e.String("DAS_ASK_STORE", "memory"); {
	case v == "memory":
	case redisURL(v):
		c.URL = v
	default:
		// The value may hold a password: say what is wanted, not what was given.
		e.Failf("DAS_ASK_STORE", `: want "memory" or a redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel:// URL`)
	}
	c.Buckets = int(e.Int("DAS_ASK_REDIS_BUCKETS", 0, 0, 1024))
	c.Lease = e.Seconds("DAS_ASK_LEASE_S", 0, 1, 3600)
	c.Prefix = e.String("DAS_ASK_REDIS_PREFIX", "")
	if strings.ContainsAny(c.Prefix, "{}") {
		// Every key starts with the hash tag {<prefix>b<N>} (store/redis/keys.go): a brace in
		// the prefix would make Redis Cluster hash a part of it instead, every bucket in one slot.
		e.Failf("DAS_ASK_REDIS_PREFIX", "%q: want no { or }: the keys' hash tags hold the prefix", c.Prefix)
	}
	c.CacheMB = e.Int("DAS_ASK_REDIS_CACHE_MB", 0, 1, 1<<20)
	if v := strings.TrimSpace(e.String("DAS_ASK_SEAL_KEYS", "")); v != "" {
		if k, err := seal.ParseKeys(v); err != nil {
			// seal's errors name the key id, never the key.
			e.Failf("DAS_ASK_SEAL_KEYS", ": %v", err)
		} else {
			c.Seal = k
		}
	}
	return c
}

// Bounds of the webhook settings: beyond them a value is a typo.
const (
	maxWebhookAttempts = 50
	maxWebhookTimeout  = 300
)

// webhooksFrom is the webhook section:
//
//	DAS_ASK_WEBHOOK_ALLOW         allowed URL prefixes, comma-separated; unset: webhooks off
//	DAS_ASK_WEBHOOK_SECRETS       signing secrets whsec_<base64>, comma-separated (all sign)
//	DAS_ASK_WEBHOOK_ENDPOINT_SECRETS  a prefix's own secrets, instead of the shared ones:
//	                              "prefix whsec_… [whsec_…]", comma-separated entries
//	DAS_ASK_WEBHOOK_ALLOW_ADDRS   private/loopback/link-local CIDRs a destination may resolve to
//	DAS_ASK_WEBHOOK_MAX_ATTEMPTS  attempts per delivery (default 12, at most 50)
//	DAS_ASK_WEBHOOK_TIMEOUT_S     one attempt's timeout (default 15)
//
// No message holds a secret.
func webhooksFrom(e *Env) webhook.Config {
	c := webhook.Config{Allow: e.List("DAS_ASK_WEBHOOK_ALLOW", ",", nil), Secrets: e.List("DAS_ASK_WEBHOOK_SECRETS", ",", nil)}
	for i, entry := range e.List("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS", ",", nil) {
		// Entries are named by their place: what they hold is secret.
		f := strings.Fields(entry)
		if len(f) < 2 {
			e.Failf("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS", ": entry %d: want a prefix of DAS_ASK_WEBHOOK_ALLOW, then its secrets (whsec_<base64>), space-separated", i+1)
			continue
		}
		if c.EndpointSecrets == nil {
			c.EndpointSecrets = map[string][]string{}
		}
		if c.Enabled() && !slices.Contains(c.Allow, f[0]) {
			// Named by its place, as Validate would name it by its sorted one: its first word
			// may be a secret run into the prefix.
			e.Failf("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS", ": entry %d: its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes, as written there", i+1)
			continue
		}
		if _, twice := c.EndpointSecrets[f[0]]; twice {
			e.Failf("DAS_ASK_WEBHOOK_ENDPOINT_SECRETS", ": entry %d: its prefix has an entry already; list all its secrets in one", i+1)
			continue
		}
		c.EndpointSecrets[f[0]] = f[1:]
	}
	for _, s := range e.List("DAS_ASK_WEBHOOK_ALLOW_ADDRS", ",", nil) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				e.Failf("DAS_ASK_WEBHOOK_ALLOW_ADDRS", ": %q: want a CIDR such as 10.1.0.0/16", s)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.AllowAddrs = append(c.AllowAddrs, p.Masked())
	}
	c.MaxAttempts = int(e.Int("DAS_ASK_WEBHOOK_MAX_ATTEMPTS", 0, 1, maxWebhookAttempts))
	c.Timeout = e.Seconds("DAS_ASK_WEBHOOK_TIMEOUT_S", 0, 1, maxWebhookTimeout)
	e.Fail(c.Validate()) // the prefixes, the secrets, each error naming its variable
	return c
}

// maxLeeway bounds DAS_JWT_LEEWAY_S: more than this is a misconfiguration, not clock skew.
const maxLeeway = 600

// AuthFrom is the bearer-validation section read through e over c: the ask service's, and the
// demo source's (cmd/demo-source), since both defend the same resource.
func AuthFrom(e *Env, c auth.Config) auth.Config {
	c.JWKSURL = e.String(auth.EnvJWKSURL, c.JWKSURL)
	c.Issuer = e.String(auth.EnvIssuer, c.Issuer)
	c.Audience = e.String(auth.EnvAudience, c.Audience)
	c.RequiredScope = strings.Join(e.List(auth.EnvRequiredScope, " ", strings.Fields(c.RequiredScope)), " ")
	c.Algorithms = e.List(auth.EnvAlgorithms, ",", c.Algorithms)
	if l := e.Seconds(auth.EnvLeeway, c.Leeway, 0, maxLeeway); l == 0 {
		c.Leeway = -1 // 0 in the environment: no leeway
	} else {
		c.Leeway = l
	}
	return c // auth.New checks the whole section, naming each variable
}

func agentFrom(e *Env, c agent.Config) agent.Config {
	c.LLM = e.String("ASK_LLM", c.LLM)
	if c.LLM == agent.LLMReal {
		c.LLM = realProvider(e)
	}
	switch c.LLM {
	case agent.LLMAnthropic:
		c.Model, c.BaseURL, c.APIKey = "claude-sonnet-4-5", "", e.String("ANTHROPIC_API_KEY", "")
		if c.APIKey == "" {
			e.Failf("ASK_LLM", "=anthropic needs ANTHROPIC_API_KEY")
		}
	case agent.LLMOpenAI:
		c.Model, c.BaseURL, c.APIKey = "gpt-4o-mini", "", e.String("OPENAI_API_KEY", "")
		if c.APIKey == "" && !e.Set("ASK_LLM_BASE_URL") {
			e.Failf("ASK_LLM", "=openai needs OPENAI_API_KEY, or ASK_LLM_BASE_URL for a local server")
		}
		if c.APIKey == "" {
			c.APIKey = "unused"
		}
	case agent.LLMStub:
	case agent.LLMReal: // neither key, or both: realProvider said so
	default:
		e.Failf("ASK_LLM", "%q: want anthropic, openai, real or stub", c.LLM)
	}
	c.Model = e.String("ASK_LLM_MODEL", c.Model)
	c.BaseURL = e.String("ASK_LLM_BASE_URL", c.BaseURL)
	if c.BaseURL != "" {
		if _, err := httpurl.Parse(c.BaseURL); err != nil {
			e.Failf("ASK_LLM_BASE_URL", "%q: want an absolute http(s) URL", redact.URL(c.BaseURL))
		}
	}
	c.Timeout = e.Seconds("ASK_LLM_TIMEOUT_S", c.Timeout, 1, 3600)
	if n := e.Int("ASK_LLM_MAX_RETRIES", int64(c.MaxRetries), 0, 100); n == 0 {
		c.MaxRetries = -1 // 0 in the environment: no retries
	} else {
		c.MaxRetries = int(n)
	}
	c.MaxTokens = e.Int("ASK_LLM_MAX_TOKENS", c.MaxTokens, 1, 1<<30)
	c.MaxModelCalls = int(e.Int("ASK_MAX_TURNS", int64(c.MaxModelCalls), 1, 10_000))
	c.Phase = int(e.Int("ASK_PHASE", int64(max(c.Phase, 1)), 1, 2))
	defTurns := int64(0)
	if c.Phase == 2 {
		defTurns = agent.DefaultDivergenceTurns
	}
	c.DivergenceTurns = int(e.Int("ASK_DIVERGENCE_TURNS", defTurns, 0, 10_000))
	if c.DivergenceTurns > 0 && c.Phase != 2 {
		e.Failf("ASK_DIVERGENCE_TURNS", "=%d: divergence needs ASK_PHASE=2", c.DivergenceTurns)
	}
	if v := e.String("DAS_SOURCES", ""); v != "" {
		srcs, err := source.ParseList(v)
		if err != nil {
			e.Failf("DAS_SOURCES", ": %v", err)
		} else {
			c.Sources = srcs
		}
	}
	return c
}

// realProvider resolves ASK_LLM=real, the specification's spelling for "a real model once a key
// is set": the provider whose key is set. Neither key, or both, is an error naming both
// variables, since guessing would spend someone's money on the wrong account.
func realProvider(e *Env) string {
	anthropicKey, openaiKey := e.Set("ANTHROPIC_API_KEY"), e.Set("OPENAI_API_KEY")
	switch {
	case anthropicKey && openaiKey:
		e.Failf("ASK_LLM", "=real: both ANTHROPIC_API_KEY and OPENAI_API_KEY are set; unset one, or choose with ASK_LLM=anthropic or ASK_LLM=openai")
	case anthropicKey:
		return agent.LLMAnthropic
	case openaiKey:
		return agent.LLMOpenAI
	default:
		e.Failf("ASK_LLM", "=real needs a provider key: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or ASK_LLM=openai with ASK_LLM_BASE_URL for a local server)")
	}
	return agent.LLMReal
}

// checkListenAddr records name's value v as invalid unless it is host:port with a port a
// listener can take (0 to 65535, or a service name this host knows): one that is not would
// fail only at listen, as an ordinary failure to start (exit 1) rather than a setting to
// correct (exit 2). The host is left to the listen: whether it resolves may change.
func checkListenAddr(e *Env, name, v, want string) {
	if !ListenAddrValid(v) {
		e.Failf(name, "%q: %s", v, want)
	}
}

// ListenAddrValid reports whether v is host:port with a port a listener can take (0 to 65535,
// or a service name this host knows), as DAS_ASK_ADDR must be: for a command's own address
// flags, checked before anything starts. The host is left to the listen.
func ListenAddrValid(v string) bool {
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	return err == nil
}

func opsFrom(e *Env, c OpsConfig) OpsConfig {
	switch v := e.String("DAS_ASK_ADMIN_ADDR", ""); v {
	case "":
	case "off":
		c.AdminAddr, c.AdminOptional = "", false
	default:
		checkListenAddr(e, "DAS_ASK_ADMIN_ADDR", v, `want host:port, or "off"`)
		c.AdminAddr, c.AdminOptional = v, false
	}
	switch v := e.String("DAS_LOG_FORMAT", c.LogFormat); v {
	case "json", "text":
		c.LogFormat = v
	default:
		e.Failf("DAS_LOG_FORMAT", "%q: want json or text", v)
	}
	if v := e.String("DAS_LOG_LEVEL", ""); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			e.Failf("DAS_LOG_LEVEL", "%q: want debug, info, warn or error", v)
		}
	}
	c.OTLP = e.Set("OTEL_EXPORTER_OTLP_ENDPOINT") || e.Set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	// The specification's switch for the whole SDK, which the Go SDK does not read itself.
	switch v := strings.ToLower(e.String("OTEL_SDK_DISABLED", "")); v {
	case "", "false":
	case "true":
		c.OTLP = false
	default:
		e.Failf("OTEL_SDK_DISABLED", "%q: want true or false", v)
	}
	// The exporter reads these itself, and one it cannot use it replaces with its default
	// (localhost:4318) after a plain-text line: checked here, so a typo stops the start. The
	// value is not echoed: it may hold credentials.
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v := e.String(name, ""); v != "" {
			if _, err := httpurl.Parse(v); err != nil {
				e.Failf(name, ": want an http:// or https:// URL (traces go over OTLP/HTTP), e.g. http://127.0.0.1:4318")
			}
		}
	}
	if c.OTLP {
		checkOTLPTLS(e)
	}
	// The exporter speaks OTLP/HTTP with protobuf only and ignores these: another protocol, such
	// as grpc beside a collector's gRPC port, would have every batch fail.
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if v := e.String(name, ""); v != "" && v != "http/protobuf" {
			e.Failf(name, "%q: want http/protobuf (askd exports traces over OTLP/HTTP only), or leave it unset", v)
		}
	}
	return c
}

// checkOTLPTLS checks the exporter's TLS files, which it reads itself: a client key without its
// certificate (or the reverse) it ignored without a word, exporting with no client certificate,
// and a file it could not read was one error line, the spans then sent without it. Each pair
// is per scope, as the exporter reads them (OTEL_EXPORTER_OTLP_*, OTEL_EXPORTER_OTLP_TRACES_*).
// The messages name the variable and the file's error, never the file's content.
func checkOTLPTLS(e *Env) {
	for _, scope := range []string{"OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_"} {
		cert, key := scope+"CLIENT_CERTIFICATE", scope+"CLIENT_KEY"
		switch {
		case e.Set(cert) && !e.Set(key):
			e.Failf(cert, ": set without %s: a client certificate needs its key", key)
		case e.Set(key) && !e.Set(cert):
			e.Failf(key, ": set without %s: a client key needs its certificate", cert)
		}
		for _, name := range []string{scope + "CERTIFICATE", cert, key} {
			if path := e.String(name, ""); path != "" {
				if f, err := os.Open(path); err != nil {
					e.Failf(name, ": cannot be read: %v", err)
				} else {
					f.Close()
				}
			}
		}
	}
}
