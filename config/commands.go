package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/das-ask/ask/auth"
)

// Process is the lookup over this process's environment: the one place in the module that
// touches it (TestOnlyConfigReadsTheEnvironment keeps it so). A command's main hands it to
// FromEnv or to its own section's reader below; its tests hand a MapEnv instead.
func Process(name string) (string, bool) { return os.LookupEnv(name) }

// read runs one section's reader over lookup and reports every invalid value at once.
func read[T any](lookup func(string) (string, bool), section func(*Env) T) (T, error) {
	e := NewEnv(lookup)
	v := section(e)
	if err := e.Err(); err != nil {
		var zero T
		return zero, fmt.Errorf("configuration: %w", err)
	}
	return v, nil
}

// The sections below are the environment of the commands that are not the service: each is a
// struct with its defaults and a FromEnv, which the command turns into its flags' defaults
// (flags win over the environment, the environment over the defaults).

// Client is the ask command's environment (cmd/ask).
type Client struct {
	// URL is the service, gateway prefix included (ASK_URL).
	URL string
	// Token is the caller's bearer (ASK_TOKEN); "" means mint one from IdP for OID.
	Token string
	// OID is the identity to mint a development token for (ASK_OID).
	OID string
	// IdP is the development identity provider's root (ASK_IDP).
	IdP string
	// Webhook is the URL the run's end is POSTed to, signed (ASK_WEBHOOK); "" means none.
	Webhook string
	// Progress forces the progress style (ASK_PROGRESS): "tty" or "plain"; "" means by the
	// terminal.
	Progress string
	// DumbTerminal is TERM=dumb: no spinner even on a terminal.
	DumbTerminal bool
	// StateDir holds the command's state (the last conversation per URL and identity):
	// $XDG_STATE_HOME, else $HOME/.local/state; "" when neither is set.
	StateDir string
}

// Defaults of the ask command: the dev stack's addresses (make ask-serve).
const (
	DefaultClientURL = "http://127.0.0.1:8080/ask"
	DefaultClientIdP = auth.DevIssuer
	DefaultClientOID = "alice"
)

// DefaultClient is the ask command's settings when the environment sets none.
func DefaultClient() Client {
	return Client{URL: DefaultClientURL, OID: DefaultClientOID, IdP: DefaultClientIdP}
}

// ClientFromEnv is DefaultClient with lookup's variables applied.
func ClientFromEnv(lookup func(string) (string, bool)) (Client, error) {
	return read(lookup, func(e *Env) Client {
		c := DefaultClient()
		c.URL = e.String("ASK_URL", c.URL)
		c.Token = e.String("ASK_TOKEN", c.Token)
		c.OID = e.String("ASK_OID", c.OID)
		c.IdP = e.String("ASK_IDP", c.IdP)
		c.Webhook = e.String("ASK_WEBHOOK", c.Webhook)
		switch c.Progress = e.String("ASK_PROGRESS", ""); c.Progress {
		case "", "tty", "plain":
		default:
			e.Failf("ASK_PROGRESS", "%q: want tty or plain", c.Progress)
		}
		c.DumbTerminal = e.String("TERM", "") == "dumb"
		c.StateDir = e.String("XDG_STATE_HOME", "")
		if home := e.String("HOME", ""); c.StateDir == "" && home != "" {
			c.StateDir = filepath.Join(home, ".local", "state")
		}
		return c
	})
}

// DevIdPToken is dev-idp token's environment (cmd/dev-idp).
type DevIdPToken struct {
	// IdP is the running identity provider asked for the token (ASK_IDP), the one the ask CLI
	// mints from; default DefaultClientIdP.
	IdP string
}

// DevIdPTokenFromEnv reads ASK_IDP.
func DevIdPTokenFromEnv(lookup func(string) (string, bool)) (DevIdPToken, error) {
	return read(lookup, func(e *Env) DevIdPToken { return DevIdPToken{IdP: e.String("ASK_IDP", DefaultClientIdP)} })
}

// Target is where a harness (cmd/conformance, cmd/ask-eval) sends its asks.
type Target struct {
	// URL is the service's base URL, a gateway prefix allowed (ASK_URL).
	URL string
	// IdP is a development identity provider's root, to mint the harness's tokens (ASK_IDP,
	// as for the ask CLI, the Python client and make token; or ASK_IDP_URL, its older name
	// here, which wins when both are set).
	IdP string
}

// TargetFromEnv reads ASK_URL and ASK_IDP (or ASK_IDP_URL); neither has a default.
func TargetFromEnv(lookup func(string) (string, bool)) (Target, error) {
	return read(lookup, targetFrom)
}

func targetFrom(e *Env) Target {
	// ASK_IDP is the IdP's name everywhere a user gives it; a harness read only ASK_IDP_URL, and
	// a caller who had exported ASK_IDP for the CLI was told to give --idp. ASK_IDP_URL still
	// works and, set beside ASK_IDP, wins: it names the harness's IdP alone, and a setup that set
	// both for two IdPs behaves as before.
	return Target{URL: e.String("ASK_URL", ""), IdP: e.String("ASK_IDP_URL", e.String("ASK_IDP", ""))}
}

// Eval is the eval harness's environment (cmd/ask-eval).
type Eval struct {
	Target
	// Tokens are bearers by identity, "alice=TOKEN bob=TOKEN" (ASK_EVAL_TOKENS): what --token
	// gives, kept off the command line, which every user of the machine can read.
	Tokens string
}

// EvalFromEnv reads ASK_URL, ASK_IDP (or ASK_IDP_URL) and ASK_EVAL_TOKENS; none has a default.
func EvalFromEnv(lookup func(string) (string, bool)) (Eval, error) {
	return read(lookup, func(e *Env) Eval {
		return Eval{Target: targetFrom(e), Tokens: e.String("ASK_EVAL_TOKENS", "")}
	})
}

// Conformance is the conformance suite's environment (cmd/conformance).
type Conformance struct {
	Target
	// TokenA and TokenB are bearers of identities A and B, without an IdP (ASK_TOKEN_A,
	// ASK_TOKEN_B).
	TokenA, TokenB string
	// Audit is a source's root serving GET /audit, or several comma-separated (ASK_AUDIT_URL).
	Audit string
	// Phase2 is ASK_PHASE=2: the target runs a branch per source, and divergence.
	Phase2 bool
	// WebhookSecrets are the target's webhook signing secrets, comma-separated
	// (ASK_WEBHOOK_SECRETS).
	WebhookSecrets string
}

// ConformanceFromEnv reads the suite's variables; none has a default.
func ConformanceFromEnv(lookup func(string) (string, bool)) (Conformance, error) {
	return read(lookup, func(e *Env) Conformance {
		return Conformance{
			Target: targetFrom(e),
			TokenA: e.String("ASK_TOKEN_A", ""), TokenB: e.String("ASK_TOKEN_B", ""),
			Audit:          e.String("ASK_AUDIT_URL", ""),
			Phase2:         e.Int("ASK_PHASE", 1, 1, 2) == 2,
			WebhookSecrets: e.String("ASK_WEBHOOK_SECRETS", ""),
		}
	})
}

// Stub is the llm-stub's environment (cmd/llm-stub).
type Stub struct {
	// Script is the script file (ASK_STUB_SCRIPT); "" means the embedded one.
	Script string
}

// StubFromEnv reads ASK_STUB_SCRIPT.
func StubFromEnv(lookup func(string) (string, bool)) (Stub, error) {
	return read(lookup, stubFrom)
}

func stubFrom(e *Env) Stub { return Stub{Script: e.String("ASK_STUB_SCRIPT", "")} }

// DemoSource is the demo source's environment (cmd/demo-source).
type DemoSource struct {
	// Addr is the listen address (DAS_DEMO_SOURCE_ADDR).
	Addr string
	// Audit is the append-only audit log file (DAS_DEMO_SOURCE_AUDIT).
	Audit string
	// RowCap is the most rows one query returns (DAS_DEMO_SOURCE_ROW_CAP); 0 means
	// demo/source's default.
	RowCap int
	// QueryTimeout is one query's time limit, a Go duration such as 5s
	// (DAS_DEMO_SOURCE_QUERY_TIMEOUT); 0 means demo/source's default.
	QueryTimeout time.Duration
	// Serves is all, catalog or warehouse (DAS_DEMO_SOURCE_SERVES); the command checks it.
	Serves string
	// ResourceURL is the URL clients reach the MCP endpoint at behind a gateway
	// (DAS_DEMO_SOURCE_RESOURCE_URL; demo/source's Options.ResourceURL); "" means each
	// request's own.
	ResourceURL string
	// Auth is bearer validation, the same DAS_* settings the service reads (AuthFrom). When
	// none of DAS_JWKS_URL, DAS_ISSUER and DAS_AUDIENCE is set it is auth.DevConfig() and
	// DevAuth is true, so the command can warn.
	Auth    auth.Config
	DevAuth bool
}

// Defaults of the demo source.
const (
	DefaultDemoSourceAddr  = "127.0.0.1:8091"
	DefaultDemoSourceAudit = ".state/demo-source/audit.jsonl"
)

// The demo source's ranges beside 1 row at least (README's Configuration): its flags are held
// to them as its variables are.
const (
	DemoSourceMaxRowCap       = maxCount
	DemoSourceMinQueryTimeout = time.Millisecond
	DemoSourceMaxQueryTimeout = time.Hour
)

// DefaultDemoSource is the demo source's settings when the environment sets none.
func DefaultDemoSource() DemoSource {
	return DemoSource{
		Addr: DefaultDemoSourceAddr, Audit: DefaultDemoSourceAudit, Serves: "all",
		Auth: auth.DevConfig(), DevAuth: true,
	}
}

// DemoSourceFromEnv is DefaultDemoSource with lookup's variables applied.
func DemoSourceFromEnv(lookup func(string) (string, bool)) (DemoSource, error) {
	return read(lookup, func(e *Env) DemoSource {
		c := DefaultDemoSource()
		c.Addr = e.String("DAS_DEMO_SOURCE_ADDR", c.Addr)
		c.Audit = e.String("DAS_DEMO_SOURCE_AUDIT", c.Audit)
		c.RowCap = int(e.Int("DAS_DEMO_SOURCE_ROW_CAP", int64(c.RowCap), 1, DemoSourceMaxRowCap))
		c.QueryTimeout = e.Duration("DAS_DEMO_SOURCE_QUERY_TIMEOUT", c.QueryTimeout, DemoSourceMinQueryTimeout, DemoSourceMaxQueryTimeout)
		c.Serves = e.String("DAS_DEMO_SOURCE_SERVES", c.Serves)
		c.ResourceURL = e.String("DAS_DEMO_SOURCE_RESOURCE_URL", c.ResourceURL)
		if e.Set(auth.EnvJWKSURL) || e.Set(auth.EnvIssuer) || e.Set(auth.EnvAudience) {
			c.Auth, c.DevAuth = AuthFrom(e, DefaultConfig().Auth), false
		}
		return c
	})
}
