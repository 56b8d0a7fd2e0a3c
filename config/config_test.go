package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store/seal"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return config.MapEnv(m)
}

func TestNothingSetIsDefaultConfig(t *testing.T) {
	got, err := config.FromEnv(env())
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultConfig()
	if got.Service != want.Service || got.Store != want.Store || got.Ops != want.Ops || got.Addr != want.Addr ||
		!slices.Equal(got.Agent.Sources, want.Agent.Sources) || got.Agent.String() != want.Agent.String() {
		t.Errorf("FromEnv(nothing) = %+v, want DefaultConfig %+v", got, want)
	}
	s := got.Service
	if s.BasePath != "/ask" || s.TTL != 900*time.Second || s.MaxEvents != 1000 || s.KeepAlive != 10*time.Second ||
		s.Deadline != 120*time.Second || s.MaxInFlight != 4 || s.MaxTickets != 10000 || s.MaxBodyBytes != 81920 ||
		s.ShutdownGrace != 10*time.Second || s.MaxConversationsPerID != 100 || s.MaxRetainedPerID != 1000 || s.MaxTurns != 50 || s.StoreWait != 4*time.Second {
		t.Errorf("service defaults = %+v", s)
	}
	a := got.Agent
	if a.LLM != "stub" || a.BaseURL != "http://127.0.0.1:8092/v1" || a.Timeout != 120*time.Second || a.MaxRetries != 2 ||
		a.MaxModelCalls != 12 || a.MaxTokens != 4096 || len(a.Sources) != 1 || a.Sources[0].URL != "http://127.0.0.1:8091/mcp" {
		t.Errorf("agent defaults = %+v", a)
	}
	if got.Auth.Leeway != 30*time.Second || !slices.Equal(got.Auth.Algorithms, []string{"RS256", "ES256"}) {
		t.Errorf("auth defaults = %+v", got.Auth)
	}
	if got.Ops.AdminAddr != "127.0.0.1:9090" || !got.Ops.AdminOptional || got.Ops.LogFormat != "json" || !got.Ops.Observe {
		t.Errorf("ops defaults = %+v", got.Ops)
	}
}

func TestEverySettingIsRead(t *testing.T) {
	got, err := config.FromEnv(env(
		"DAS_ASK_ADDR", "0.0.0.0:80",
		"DAS_ASK_PATH", "/gw/ask/", "DAS_ASK_TTL_S", "60", "DAS_ASK_MAX_EVENTS", "50",
		"DAS_ASK_KEEPALIVE_S", "3", "DAS_ASK_DEADLINE_S", "30", "DAS_ASK_MAX_INFLIGHT_PER_ID", "2", "DAS_ASK_MAX_TICKETS", "10",
		"DAS_ASK_MAX_BODY_BYTES", "4096", "DAS_ASK_SHUTDOWN_GRACE_S", "0", "DAS_ASK_MAX_CONVERSATIONS_PER_ID", "7",
		"DAS_ASK_MAX_RETAINED_PER_ID", "2", "DAS_ASK_MAX_TURNS_PER_CONVERSATION", "9", "DAS_ASK_STORE_WAIT_S", "2",
		"DAS_ASK_STORE", "redis://127.0.0.1:6390/0", "DAS_ASK_LEASE_S", "3", "DAS_ASK_REDIS_PREFIX", "x:", "DAS_ASK_REDIS_CACHE_MB", "16",
		"DAS_JWKS_URL", "https://login.example/keys", "DAS_ISSUER", "https://login.example/", "DAS_AUDIENCE", "api://das",
		"DAS_REQUIRED_SCOPE", "  das  extra ", "DAS_JWT_ALGS", " ES256 , PS256", "DAS_JWT_LEEWAY_S", "0",
		"ASK_LLM", "anthropic", "ANTHROPIC_API_KEY", "sk-ant-secret", "ASK_LLM_MODEL", "claude-x",
		"ASK_LLM_TIMEOUT_S", "30", "ASK_LLM_MAX_RETRIES", "0", "ASK_LLM_MAX_TOKENS", "77", "ASK_MAX_TURNS", "5",
		"DAS_SOURCES", "a=http://127.0.0.1:1/mcp,b=http://127.0.0.1:2/mcp",
		"DAS_ASK_ADMIN_ADDR", "127.0.0.1:0", "DAS_LOG_FORMAT", "text", "DAS_LOG_LEVEL", "debug",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "ASK_STUB_SCRIPT", "/tmp/s.yaml",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf",
	))
	if err != nil {
		t.Fatal(err)
	}
	wantSvc := server.Config{BasePath: "/gw/ask", TTL: time.Minute, MaxEvents: 50, KeepAlive: 3 * time.Second,
		Deadline: 30 * time.Second, MaxInFlight: 2, MaxTickets: 10, MaxBodyBytes: 4096, ShutdownGrace: -1,
		MaxConversationsPerID: 7, MaxRetainedPerID: 2, MaxTurns: 9, StoreWait: 2 * time.Second}
	if got.Service != wantSvc {
		t.Errorf("service: got %+v, want %+v", got.Service, wantSvc)
	}
	if o := got.Service.Options(); o.ShutdownGrace >= 0 || o.BasePath != "/gw/ask" || o.MaxTurns != 9 {
		t.Errorf("Options() = %+v: copied field for field, a zero grace in the environment meaning none", o)
	}
	if got.Addr != "0.0.0.0:80" || got.Store != (config.StoreConfig{URL: "redis://127.0.0.1:6390/0", Lease: 3 * time.Second, Prefix: "x:", CacheMB: 16}) {
		t.Errorf("addr, store = %q, %+v", got.Addr, got.Store)
	}
	if a := got.Auth; a.JWKSURL != "https://login.example/keys" || a.Issuer != "https://login.example/" || a.Audience != "api://das" ||
		a.RequiredScope != "das extra" || !slices.Equal(a.Algorithms, []string{"ES256", "PS256"}) || a.Leeway >= 0 {
		t.Errorf("auth = %+v", a)
	}
	if a := got.Agent; a.LLM != "anthropic" || a.Model != "claude-x" || a.APIKey != "sk-ant-secret" || a.BaseURL != "" ||
		a.Timeout != 30*time.Second || a.MaxRetries >= 0 || a.MaxTokens != 77 || a.MaxModelCalls != 5 || len(a.Sources) != 2 {
		t.Errorf("agent = %+v", a)
	}
	if o := got.Ops; o.AdminAddr != "127.0.0.1:0" || o.AdminOptional || o.LogFormat != "text" || o.LogLevel.String() != "DEBUG" || !o.OTLP {
		t.Errorf("ops = %+v", o)
	}
	if got.StubScript != "/tmp/s.yaml" {
		t.Errorf("stub script = %q", got.StubScript)
	}
	if got, _ := config.FromEnv(env("DAS_ASK_PATH", "/")); got.Service.BasePath != "/" {
		t.Errorf("root path: %q, want /", got.Service.BasePath)
	}
	if got, _ := config.FromEnv(env("DAS_ASK_ADMIN_ADDR", "off")); got.Ops.AdminAddr != "" {
		t.Errorf("admin off: %q", got.Ops.AdminAddr)
	}
	// A local OpenAI-compatible server needs no key.
	got, err = config.FromEnv(env("ASK_LLM", "openai", "ASK_LLM_BASE_URL", "http://127.0.0.1:11434/v1", "ASK_LLM_MODEL", "llama3.1"))
	if err != nil || got.Agent.APIKey == "" || got.Agent.BaseURL != "http://127.0.0.1:11434/v1" || got.Agent.Model != "llama3.1" {
		t.Errorf("ollama config = %+v, %v", got.Agent, err)
	}
	if got, _ := config.FromEnv(env("ASK_LLM", "openai", "OPENAI_API_KEY", "k")); got.Agent.Model != "gpt-4o-mini" || got.Agent.BaseURL != "" {
		t.Errorf("openai defaults = %+v", got.Agent)
	}
	_ = agent.LLMStub
}

func TestWebhooks(t *testing.T) {
	kv := []string{
		"DAS_ASK_WEBHOOK_ALLOW", "https://a.example/x/, http://127.0.0.1:8081/",
		"DAS_ASK_WEBHOOK_SECRETS", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"DAS_ASK_WEBHOOK_ALLOW_ADDRS", "127.0.0.0/8,10.0.0.1",
		"DAS_ASK_WEBHOOK_MAX_ATTEMPTS", "5", "DAS_ASK_WEBHOOK_TIMEOUT_S", "3",
	}
	got, err := config.FromEnv(env(kv...))
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Webhooks; len(c.Allow) != 2 || len(c.AllowAddrs) != 2 || c.MaxAttempts != 5 || c.Timeout != 3*time.Second || !c.Enabled() {
		t.Fatalf("webhooks %+v", c)
	}
	if got, _ := config.FromEnv(env()); got.Webhooks.Enabled() {
		t.Errorf("no DAS_ASK_WEBHOOK_ALLOW: webhooks on")
	}
	for _, bad := range [][]string{
		{"DAS_ASK_WEBHOOK_MAX_ATTEMPTS", "0"}, {"DAS_ASK_WEBHOOK_MAX_ATTEMPTS", "51"}, {"DAS_ASK_WEBHOOK_ALLOW_ADDRS", "nonsense"},
		{"DAS_ASK_WEBHOOK_TIMEOUT_S", "0"}, {"DAS_ASK_WEBHOOK_ALLOW", "ftp://x/"}, {"DAS_ASK_WEBHOOK_SECRETS", "hunter2"},
	} {
		_, err := config.FromEnv(env(append(slices.Clone(kv), bad...)...))
		if err == nil || !strings.Contains(err.Error(), bad[0]) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s=%q: error %v, want one naming the variable and no secret", bad[0], bad[1], err)
		}
	}
}

// TestWebhookEndpointSecrets: DAS_ASK_WEBHOOK_ENDPOINT_SECRETS gives a prefix secrets of its own
// ("prefix secret…", comma-separated), and then DAS_ASK_WEBHOOK_SECRETS is needed only for the
// prefixes without; a malformed entry is named by its place, never by what it holds.
func TestWebhookEndpointSecrets(t *testing.T) {
	const a, b, c = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_dGhpcnR5LXR3by1ieXRlcy1vZi1yYW5kb20hISE=", "whsec_Y2xpZW50LXNpZGUtc2VjcmV0LW9mLXRoaXJ0eS10d28="
	got, err := config.FromEnv(env("DAS_ASK_WEBHOOK_ALLOW", "https://a.example/x/, https://b.example/",
		"DAS_ASK_WEBHOOK_ENDPOINT_SECRETS", "https://a.example/x/ "+a+" "+b+", https://b.example/ "+c))
	if err != nil {
		t.Fatal(err)
	}
	if e := got.Webhooks.EndpointSecrets; len(e) != 2 || !slices.Equal(e["https://a.example/x/"], []string{a, b}) || !slices.Equal(e["https://b.example/"], []string{c}) {
		t.Fatalf("endpoint secrets %v", e)
	}
	for _, bad := range []struct{ endpoint, says string }{
		{"https://a.example/x/ " + a, "DAS_ASK_WEBHOOK_SECRETS: required"}, // b.example has none
		{"https://a.example/x/ " + a + ", " + c, "entry 2: want a prefix"},
		{"https://a.example/x/ " + a + ", https://a.example/x/ " + c, "entry 2: its prefix has an entry already"},
		{c + " https://a.example/x/, https://b.example/ " + c, "entry 1: its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes"},
		{"https://b.example/ " + c + ", https://a.example/x/" + a + " " + b, "entry 2: its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes"},
	} {
		_, err := config.FromEnv(env("DAS_ASK_WEBHOOK_ALLOW", "https://a.example/x/, https://b.example/", "DAS_ASK_WEBHOOK_ENDPOINT_SECRETS", bad.endpoint))
		if err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%q: error %v, want it to say %q", bad.endpoint, err, bad.says)
		}
		for _, sec := range []string{a, b, c} {
			if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(sec, "whsec_")) {
				t.Errorf("%q: the error holds a secret: %v", bad.endpoint, err)
			}
		}
	}
}

func TestSealKeys(t *testing.T) {
	k1, k2 := seal.NewKey("k1"), seal.NewKey("k2")
	got, err := config.FromEnv(env("DAS_ASK_STORE", "redis://127.0.0.1:6390/0", "DAS_ASK_SEAL_KEYS", k2+","+k1))
	if err != nil || got.Store.Seal == nil || got.Store.Seal.SealingKey() != "k2" {
		t.Fatalf("%+v, %v; want keys sealing with k2", got.Store, err)
	}
	if got, _ := config.FromEnv(env()); got.Store.Seal != nil {
		t.Errorf("no DAS_ASK_SEAL_KEYS: seal %v, want none", got.Store.Seal)
	}
}

func TestInvalidValuesNameTheirVariable(t *testing.T) {
	for _, bad := range [][]string{
		{"DAS_ASK_TTL_S", "ten"}, {"DAS_ASK_TTL_S", "0"}, {"DAS_ASK_TTL_S", "-5"}, {"DAS_ASK_MAX_EVENTS", "7"},
		{"DAS_ASK_MAX_EVENTS", "1e3"}, {"DAS_ASK_KEEPALIVE_S", "0"}, {"DAS_ASK_DEADLINE_S", "2m"},
		{"DAS_ASK_MAX_INFLIGHT_PER_ID", "0"}, {"DAS_ASK_MAX_TICKETS", "-1"}, {"DAS_ASK_MAX_BODY_BYTES", "10"},
		{"DAS_ASK_SHUTDOWN_GRACE_S", "-1"}, {"DAS_ASK_PATH", "ask"}, {"DAS_ASK_PATH", "/a?b"}, {"DAS_ASK_PATH", "/a/../b"},
		// A dot segment the edge answers 404 wherever it is (server/paths.go): the service
		// would serve nothing at all.
		{"DAS_ASK_PATH", "/a/./b"}, {"DAS_ASK_PATH", "/ask/."}, {"DAS_ASK_PATH", "/./ask"}, {"DAS_ASK_PATH", "/.."},
		// Not a URL path as written: the service's Location headers and *_url fields begin with
		// the base path, and a header's URI is ASCII (RFC 3986's pchar), never escaped here.
		{"DAS_ASK_PATH", "/é"}, {"DAS_ASK_PATH", `/a"b`}, {"DAS_ASK_PATH", "/a<b>"}, {"DAS_ASK_PATH", "/a\\b"}, {"DAS_ASK_PATH", "/a^b"},
		// An address no listener can take: a setting to correct (exit 2), not a start that failed.
		{"DAS_ASK_ADDR", "nope"}, {"DAS_ASK_ADDR", "127.0.0.1:99999"}, {"DAS_ASK_ADDR", "127.0.0.1:-1"},
		{"DAS_ASK_ADMIN_ADDR", "127.0.0.1:99999"}, {"DAS_ASK_ADMIN_ADDR", ":no-such-service"},
		{"DAS_ASK_MAX_CONVERSATIONS_PER_ID", "0"}, {"DAS_ASK_MAX_CONVERSATIONS_PER_ID", "many"},
		{"DAS_ASK_MAX_RETAINED_PER_ID", "-3"}, {"DAS_ASK_MAX_RETAINED_PER_ID", "1.5"},
		{"DAS_ASK_MAX_TURNS_PER_CONVERSATION", "0"}, {"DAS_ASK_MAX_TURNS_PER_CONVERSATION", "10001"},
		// Below the in-flight cap (4 by default): running asks are retained tickets, so it could
		// never be reached.
		{"DAS_ASK_MAX_RETAINED_PER_ID", "3"},
		{"DAS_ASK_STORE", "postgres://u:hunter2@db/ask"}, {"DAS_ASK_LEASE_S", "0"}, {"DAS_ASK_LEASE_S", "1.5"}, {"DAS_ASK_REDIS_CACHE_MB", "0"}, {"DAS_ASK_REDIS_CACHE_MB", "lots"},
		{"DAS_ASK_SEAL_KEYS", "k1:aHVudGVyMg=="}, {"DAS_ASK_SEAL_KEYS", "hunter2"}, // too short; no id
		// A brace moves the hash tag of every Redis key (store/redis/keys.go: {<prefix>b<N>}),
		// so Redis Cluster would hash a part of the prefix, not the bucket.
		{"DAS_ASK_REDIS_PREFIX", "a{b}:"}, {"DAS_ASK_REDIS_PREFIX", "x}"}, {"DAS_ASK_REDIS_PREFIX", "{"},
		// Set, so not the default, yet naming no algorithm: it was taken as RS256,ES256.
		{"DAS_JWT_ALGS", ","}, {"DAS_JWT_ALGS", " , ,"}, {"DAS_ASK_WEBHOOK_ALLOW", ","},
		{"DAS_JWT_LEEWAY_S", "30s"}, {"DAS_JWT_LEEWAY_S", "-1"}, {"DAS_JWT_LEEWAY_S", "3600"},
		{"ASK_LLM", "gpt"}, {"ASK_LLM", "anthropic"}, {"ASK_LLM", "openai"},
		{"ASK_LLM_BASE_URL", "127.0.0.1:8092"}, {"ASK_LLM_TIMEOUT_S", "-1"}, {"ASK_LLM_TIMEOUT_S", "0.5"},
		{"ASK_LLM_MAX_RETRIES", "many"}, {"ASK_LLM_MAX_TOKENS", "0"}, {"ASK_MAX_TURNS", "0"}, {"DAS_SOURCES", "demo"},
		{"DAS_ASK_ADMIN_ADDR", "everywhere"}, {"DAS_LOG_FORMAT", "xml"}, {"DAS_LOG_LEVEL", "loud"},
		// Not a URL the OTLP/HTTP exporter can use: it would log a plain-text line and export to
		// its default, localhost:4318, instead of stopping the start.
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://collector:4317"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318/v1/traces"}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:hunter2@collector:4318:x"},
		// A protocol the exporter does not speak (it speaks OTLP/HTTP with protobuf only): the
		// setting was ignored without a word, and the spans POSTed as OTLP/HTTP to the collector's
		// gRPC port (4317), where every batch failed.
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"},
		// A URL that is refused is named without its password (found by an operator's audit:
		// these three printed it, DAS_ASK_WEBHOOK_ALLOW and DAS_ASK_STORE did not).
		{"ASK_LLM_BASE_URL", "ftp://u:hunter2@llm/v1"}, {"ASK_LLM_BASE_URL", "http://u:hunter2@llm/%zz"},
		{"DAS_SOURCES", "demo=ftp://u:hunter2@source/mcp"}, {"DAS_SOURCES", "demo=http://u:hunter2@source/%zz"},
		// Not name=URL, or no valid name before '=': the entry was quoted whole, its password
		// with it, and redact.URL finds none where the entry does not begin with a scheme.
		{"DAS_SOURCES", "demo:http://u:hunter2@source/mcp"}, {"DAS_SOURCES", "=http://u:hunter2@source/mcp"},
		{"DAS_SOURCES", "demo=http://127.0.0.1:1/mcp,http://u:hunter2@source/mcp?a=b"},
		// A port without a host: Go's dialer dials the local machine, so each was accepted and
		// asked whatever listened there.
		{"ASK_LLM_BASE_URL", "http://:11434/v1"}, {"DAS_SOURCES", "demo=http://:8091/mcp"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://:4318"}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://u:hunter2@:4318/v1/traces"},
	} {
		_, err := config.FromEnv(env(bad...))
		if err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%q: error %v should name the variable", bad[0], bad[1], err)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "aHVudGVyMg")) {
			t.Errorf("%s: the error carries the password: %v", bad[0], err)
		}
	}
	_, err := config.FromEnv(env("DAS_ASK_TTL_S", "x", "ASK_MAX_TURNS", "y", "DAS_LOG_FORMAT", "z"))
	for _, name := range []string{"DAS_ASK_TTL_S", "ASK_MAX_TURNS", "DAS_LOG_FORMAT"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("all invalid values are reported together: %v lacks %s", err, name)
		}
	}
}

func TestEnvParsesOneWayPerKind(t *testing.T) {
	e := config.NewEnv(env("S", " 7 ", "L", " a, ,b ", "W", "x  y", "BLANK", "  "))
	if got := e.Seconds("S", time.Second, 1, 10); got != 7*time.Second {
		t.Errorf("seconds = %s", got)
	}
	if got := e.List("L", ",", nil); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("list = %q", got)
	}
	if got := e.List("W", " ", nil); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("words = %q", got)
	}
	if got := e.String("BLANK", "def"); got != "def" || e.Set("BLANK") {
		t.Errorf("a blank value is unset: %q", got)
	}
	if e.Err() != nil {
		t.Errorf("no invalid value read, yet %v", e.Err())
	}
	if e.Int("S", 0, 8, 9); e.Err() == nil || !strings.Contains(e.Err().Error(), `S="7"`) {
		t.Errorf("out of range: %v", e.Err())
	}
}

// A message that spells the value itself ("=real needs …") reads NAME=value once, never NAME==value.
func TestFailfSaysTheValueOnce(t *testing.T) {
	_, err := config.FromEnv(env("ASK_LLM", "real"))
	if err == nil || !strings.Contains(err.Error(), "ASK_LLM=real needs a provider key") || strings.Contains(err.Error(), "==") {
		t.Errorf("ASK_LLM=real with no key: %v", err)
	}
	_, err = config.FromEnv(env("ASK_LLM", "anthropic"))
	if err == nil || !strings.Contains(err.Error(), "ASK_LLM=anthropic needs ANTHROPIC_API_KEY") || strings.Contains(err.Error(), "==") {
		t.Errorf("ASK_LLM=anthropic with no key: %v", err)
	}
	e := config.NewEnv(env())
	if e.Failf("X", ": is wrong"); e.Err() == nil || e.Err().Error() != "X: is wrong" {
		t.Errorf("a message after a colon: %v", e.Err())
	}
}

// ASK_LLM=real, the specification's spelling, is the provider whose key is set; neither or both
// is an error naming both variables, never a guess.
func TestConfigReal(t *testing.T) {
	for _, tt := range []struct {
		env     map[string]string
		llm     string
		problem bool
	}{
		{env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}, llm: "anthropic"},
		{env: map[string]string{"OPENAI_API_KEY": "sk-x"}, llm: "openai"},
		{env: map[string]string{}, problem: true},
		{env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_API_KEY": "sk-x"}, problem: true},
	} {
		tt.env["ASK_LLM"] = "real"
		c, err := config.FromEnv(config.MapEnv(tt.env))
		if tt.problem {
			if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || !strings.Contains(err.Error(), "OPENAI_API_KEY") || strings.Contains(err.Error(), "sk-") {
				t.Errorf("%v: err = %v, want one naming both variables (and no key)", tt.env, err)
			}
			continue
		}
		if err != nil || c.Agent.LLM != tt.llm || c.Agent.APIKey == "" {
			t.Errorf("%v: config %v, %v; want %s", tt.env, c.Agent, err, tt.llm)
		}
	}
}

// ASK_PHASE=2 brings divergence's default; ASK_DIVERGENCE_TURNS=0 turns it off, and without
// phase 2 it is an error.
func TestConfigPhase(t *testing.T) {
	if c, err := config.FromEnv(env("ASK_PHASE", "2")); err != nil || c.Agent.Phase != 2 || c.Agent.DivergenceTurns != agent.DefaultDivergenceTurns {
		t.Errorf("phase 2: %+v, %v", c.Agent, err)
	}
	if c, err := config.FromEnv(env("ASK_PHASE", "2", "ASK_DIVERGENCE_TURNS", "0")); err != nil || c.Agent.DivergenceTurns != 0 {
		t.Errorf("phase 2 without divergence: %+v, %v", c.Agent, err)
	}
	if c, _ := config.FromEnv(env()); c.Agent.Phase != 1 || c.Agent.DivergenceTurns != 0 {
		t.Errorf("default: %+v", c.Agent)
	}
	for _, bad := range [][]string{{"ASK_PHASE", "3"}, {"ASK_DIVERGENCE_TURNS", "4"}, {"ASK_DIVERGENCE_TURNS", "-1"}} {
		if _, err := config.FromEnv(env(bad...)); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want an error naming %s", bad, err, bad[0])
		}
	}
}

// The commands' sections: defaults when nothing is set, the variables when set, and every
// invalid value named.
func TestCommandSections(t *testing.T) {
	c, err := config.ClientFromEnv(env("HOME", "/home/u"))
	if err != nil || c != (config.Client{URL: config.DefaultClientURL, OID: "alice", IdP: config.DefaultClientIdP, StateDir: "/home/u/.local/state"}) {
		t.Errorf("ClientFromEnv(HOME) = %+v, %v", c, err)
	}
	c, err = config.ClientFromEnv(env("ASK_URL", "http://gw/ask", "ASK_TOKEN", "t", "ASK_OID", "bob", "ASK_IDP", "http://idp",
		"ASK_WEBHOOK", "https://h/x", "ASK_PROGRESS", "plain", "TERM", "dumb", "XDG_STATE_HOME", "/s", "HOME", "/home/u"))
	if err != nil || c != (config.Client{URL: "http://gw/ask", Token: "t", OID: "bob", IdP: "http://idp", Webhook: "https://h/x",
		Progress: "plain", DumbTerminal: true, StateDir: "/s"}) {
		t.Errorf("ClientFromEnv(all) = %+v, %v", c, err)
	}
	if _, err := config.ClientFromEnv(env("ASK_PROGRESS", "fancy")); err == nil || !strings.Contains(err.Error(), "ASK_PROGRESS") {
		t.Errorf("ASK_PROGRESS=fancy: %v", err)
	}

	k, err := config.ConformanceFromEnv(env("ASK_URL", "u", "ASK_IDP_URL", "i", "ASK_TOKEN_A", "a", "ASK_TOKEN_B", "b",
		"ASK_AUDIT_URL", "x,y", "ASK_PHASE", "2", "ASK_WEBHOOK_SECRETS", "whsec_1"))
	if err != nil || k != (config.Conformance{Target: config.Target{URL: "u", IdP: "i"}, TokenA: "a", TokenB: "b", Audit: "x,y", Phase2: true, WebhookSecrets: "whsec_1"}) {
		t.Errorf("ConformanceFromEnv = %+v, %v", k, err)
	}
	if k, err := config.ConformanceFromEnv(env()); err != nil || k != (config.Conformance{}) {
		t.Errorf("ConformanceFromEnv(nothing) = %+v, %v", k, err)
	}
	if _, err := config.ConformanceFromEnv(env("ASK_PHASE", "3")); err == nil || !strings.Contains(err.Error(), "ASK_PHASE") {
		t.Errorf("ASK_PHASE=3: %v", err)
	}

	if e, err := config.EvalFromEnv(env("ASK_URL", "u", "ASK_IDP_URL", "i", "ASK_EVAL_TOKENS", "alice=a bob=b")); err != nil ||
		e != (config.Eval{Target: config.Target{URL: "u", IdP: "i"}, Tokens: "alice=a bob=b"}) {
		t.Errorf("EvalFromEnv = %+v, %v", e, err)
	}

	// ASK_IDP, the IdP's name for the ask CLI, names the harnesses' too; ASK_IDP_URL, their
	// older name, still works, and wins when both are set. They read only ASK_IDP_URL.
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"ASK_IDP", "http://idp"}, "http://idp"},
		{[]string{"ASK_IDP_URL", "http://old"}, "http://old"},
		{[]string{"ASK_IDP", "http://idp", "ASK_IDP_URL", "http://old"}, "http://old"},
	} {
		k, kerr := config.ConformanceFromEnv(env(c.env...))
		e, eerr := config.EvalFromEnv(env(c.env...))
		g, gerr := config.TargetFromEnv(env(c.env...))
		if kerr != nil || eerr != nil || gerr != nil || k.IdP != c.want || e.IdP != c.want || g.IdP != c.want {
			t.Errorf("%q: conformance's IdP %q, ask-eval's %q, the target's %q (%v, %v, %v); want %q",
				c.env, k.IdP, e.IdP, g.IdP, kerr, eerr, gerr, c.want)
		}
	}

	if s, err := config.StubFromEnv(env("ASK_STUB_SCRIPT", "s.yaml")); err != nil || s.Script != "s.yaml" {
		t.Errorf("StubFromEnv = %+v, %v", s, err)
	}

	d, err := config.DemoSourceFromEnv(env())
	if err != nil || !d.DevAuth || d.Auth.Issuer == "" || d.Addr != config.DefaultDemoSourceAddr || d.Serves != "all" || d.RowCap != 0 {
		t.Errorf("DemoSourceFromEnv(nothing) = %+v, %v", d, err)
	}
	d, err = config.DemoSourceFromEnv(env("DAS_DEMO_SOURCE_ROW_CAP", "7", "DAS_DEMO_SOURCE_QUERY_TIMEOUT", "1500ms",
		"DAS_ISSUER", "https://iss", "DAS_AUDIENCE", "aud", "DAS_JWKS_URL", "https://iss/jwks"))
	if err != nil || d.DevAuth || d.Auth.Issuer != "https://iss" || d.RowCap != 7 || d.QueryTimeout != 1500*time.Millisecond {
		t.Errorf("DemoSourceFromEnv(set) = %+v, %v", d, err)
	}
	_, err = config.DemoSourceFromEnv(env("DAS_DEMO_SOURCE_ROW_CAP", "0", "DAS_DEMO_SOURCE_QUERY_TIMEOUT", "5", "DAS_ISSUER", "x", "DAS_JWT_LEEWAY_S", "soon"))
	for _, name := range []string{"DAS_DEMO_SOURCE_ROW_CAP", "DAS_DEMO_SOURCE_QUERY_TIMEOUT", "DAS_JWT_LEEWAY_S"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("invalid demo source settings: %v, want %s named", err, name)
		}
	}
}

// TestAdminAddrIsNotTheAPIs: DAS_ASK_ADMIN_ADDR set to DAS_ASK_ADDR's address is a setting no
// restart gets past, so an invalid one (exit 2, naming both), not "address already in use"
// (exit 1), which a supervisor restarts on for ever. A port 0 is two ports; the default admin
// address, skipped with a warning when taken, is not the operator's to correct.
func TestAdminAddrIsNotTheAPIs(t *testing.T) {
	_, err := config.FromEnv(env("DAS_ASK_ADDR", "127.0.0.1:28085", "DAS_ASK_ADMIN_ADDR", "127.0.0.1:28085"))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "DAS_ASK_ADMIN_ADDR") || !strings.Contains(err.Error(), "DAS_ASK_ADDR") {
		t.Errorf("the same address for both listeners: %v, want an invalid setting naming both", err)
	}
	for _, ok := range [][]string{
		{"DAS_ASK_ADDR", "127.0.0.1:0", "DAS_ASK_ADMIN_ADDR", "127.0.0.1:0"},
		{"DAS_ASK_ADDR", "127.0.0.1:9090"},
		{"DAS_ASK_ADDR", "127.0.0.1:28085", "DAS_ASK_ADMIN_ADDR", "127.0.0.1:28086"},
	} {
		if _, err := config.FromEnv(env(ok...)); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}

// TestSDKDisabledTurnsTracingOff: OTEL_SDK_DISABLED=true (the OpenTelemetry specification's
// switch, case-insensitive) leaves tracing off though an endpoint is set: askd exported every
// span all the same, to an operator who had turned the SDK off. Any other value than a
// boolean is refused, naming it.
func TestSDKDisabledTurnsTracingOff(t *testing.T) {
	for v, want := range map[string]bool{"true": false, "TRUE": false, "false": true, "": true} {
		c, err := config.FromEnv(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SDK_DISABLED", v))
		if err != nil || c.Ops.OTLP != want {
			t.Errorf("OTEL_SDK_DISABLED=%q: tracing %v (%v), want %v", v, c.Ops.OTLP, err, want)
		}
	}
	if _, err := config.FromEnv(env("OTEL_SDK_DISABLED", "yes")); err == nil || !strings.Contains(err.Error(), "OTEL_SDK_DISABLED") {
		t.Errorf("OTEL_SDK_DISABLED=yes: %v, want an error naming it", err)
	}
}

// TestOTLPTLSFilesAreChecked: with tracing on, a client key without its certificate (or the
// reverse), and a TLS file that cannot be read, stop the start, naming the variable. The
// exporter ignored a lone OTEL_EXPORTER_OTLP_CLIENT_KEY without a word and exported without a
// client certificate, and a CA file it could not read was one error line, the spans then sent
// with the system's roots; with tracing off they are not read.
func TestOTLPTLSFilesAreChecked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tls.pem")
	if err := os.WriteFile(file, []byte("-"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	on := []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318"}
	for _, tc := range []struct {
		kv   []string
		want string // "" for none
	}{
		{[]string{"OTEL_EXPORTER_OTLP_CLIENT_KEY", file}, "OTEL_EXPORTER_OTLP_CLIENT_KEY: set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", file}, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: set without OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"},
		{[]string{"OTEL_EXPORTER_OTLP_CERTIFICATE", missing}, "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot be read"},
		{[]string{"OTEL_EXPORTER_OTLP_CLIENT_KEY", missing, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", file}, "OTEL_EXPORTER_OTLP_CLIENT_KEY: cannot be read"},
		{[]string{"OTEL_EXPORTER_OTLP_CLIENT_KEY", file, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", file, "OTEL_EXPORTER_OTLP_CERTIFICATE", file}, ""},
	} {
		_, err := config.FromEnv(env(append(append([]string{}, on...), tc.kv...)...))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.kv, err, tc.want)
		}
		if _, err := config.FromEnv(env(tc.kv...)); err != nil {
			t.Errorf("%v with tracing off: %v, want no error", tc.kv, err)
		}
	}
}
