package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask/internal/egress"
	"github.com/das-ask/ask/internal/httpurl"
)

// Options configure sessions. Zero values mean defaults.
type Options struct {
	// HTTPClient is the base client; its Transport carries the session's requests (nil means
	// http.DefaultTransport's settings, except that a plain-http source is never reached
	// through the environment's proxy and a response header is bounded by
	// MaxResponseHeaderBytes: egress.Guarded). Its Timeout, if any, bounds each request.
	HTTPClient *http.Client
	// Logger receives one line per call; nil means discard.
	Logger *slog.Logger
	// ClientName and ClientVersion identify the agent to sources; defaults "ask-agent", "1".
	ClientName, ClientVersion string
	// MaxResponseBytes bounds one HTTP response (and so one tool result) from a source; a
	// larger one fails the call as a transport failure. 0 means DefaultMaxResponseBytes.
	MaxResponseBytes int
	// TokenExpires is when the session's token expires (its `exp`); zero when unknown. A 401
	// once it has passed names the expiry in the error (TransportError.Expired).
	TokenExpires time.Time
	// ToolShown is a tool's name as the session may write it in its log lines and its calls'
	// errors (nil: as it is). A name is the source's own text: one may list a tool named after
	// what it was sent (a "saved search" named with an earlier question), and the agent
	// withholds a name that holds its run's question (agent's ledger).
	ToolShown func(name string) string
}

// Session is one run's connection to one source, authenticated as the run's caller. It is
// used by one run at a time; Call may be called from one goroutine at a time.
type Session struct {
	name  string
	cs    *mcp.ClientSession
	tr    *bearer
	tools []Tool
	log   *slog.Logger
	shown func(string) string // Options.ToolShown; nil: names as they are
}

// Connect opens an MCP session with the source as the holder of token, and discovers its
// tools. Every HTTP request of the session carries `Authorization: Bearer <token>`, and the
// session sends nothing to any origin (scheme, host, port) but cfg.URL's: a redirect within
// that origin is followed, one to anywhere else fails the request before it is sent. A source
// that cannot be reached, rejects the token, redirects elsewhere or fails to list its tools
// yields a *TransportError; the token never appears in it. So does one whose tool list the
// agent cannot offer the model: more than MaxTools tools, or a name validToolName refuses or
// listed twice.
//
// ctx bounds the handshake. Once it ends with the handshake unfinished, the session sends
// nothing more: not the SDK's best-effort notifications/cancelled (which, to a source that
// hangs, held the connection and its goroutines up to 5 s past the end), nor the DELETE of a
// session whose initialize was answered (that session then stays at the source until its idle
// timeout). The agent ends ctx only when the handshake is past waiting for.
func Connect(ctx context.Context, cfg Config, token string, opts Options) (*Session, error) {
	u, err := httpurl.Parse(cfg.URL)
	if err != nil {
		return nil, &TransportError{Source: cfg.Name, Op: "connect", Reason: errBadURL}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := egress.Guarded()
	hc := &http.Client{}
	if opts.HTTPClient != nil {
		if opts.HTTPClient.Transport != nil {
			base = opts.HTTPClient.Transport
		}
		hc.Timeout = opts.HTTPClient.Timeout
	}
	maxBytes := opts.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	tr := &bearer{base: base, source: cfg.Name, token: token, expires: opts.TokenExpires, origin: originOf(u), maxBytes: int64(maxBytes), handshake: ctx}
	hc.Transport, hc.CheckRedirect = tr, tr.checkRedirect
	name, version := opts.ClientName, opts.ClientVersion
	if name == "" {
		name = "ask-agent"
	}
	if version == "" {
		version = "1"
	}
	// No client capabilities: the agent serves sources no roots, no sampling (a model call at
	// the service's expense, the conversation in reach) and no elicitation (there is no user to
	// ask mid-run). Without Capabilities the SDK advertises roots; a source's request for any of
	// them gets a JSON-RPC error.
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             cfg.URL,
		HTTPClient:           hc,
		DisableStandaloneSSE: true,
		// Above the body limit, so that an oversized event is reported as that limit.
		MaxEventSize: maxBytes + 64<<10,
	}, nil)
	if err != nil {
		return nil, transportError(cfg.Name, "connect", err, faultOf(ctx, tr))
	}
	s := &Session{name: cfg.Name, cs: cs, tr: tr, log: log, shown: opts.ToolShown}
	seen := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for pages := 1; ; pages++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			cs.Close()
			return nil, transportError(cfg.Name, "list tools", err, faultOf(ctx, tr))
		}
		for _, t := range res.Tools {
			switch {
			case len(s.tools) == MaxTools:
				err = ErrTooManyTools
			case t == nil || !validToolName(t.Name) || seen[t.Name] || scrubText(t.Name, token) != t.Name:
				err = ErrBadToolName
			}
			if err != nil {
				cs.Close()
				return nil, &TransportError{Source: cfg.Name, Op: "list tools", Reason: err}
			}
			seen[t.Name] = true
			role, phase := Classify(t.Name, t.Meta)
			schema, _ := t.InputSchema.(map[string]any)
			// The description and the schema go to the model provider on every turn: a source
			// that quotes the caller's bearer in them (a tool list made per session) is scrubbed
			// of it as its call results are.
			s.tools = append(s.tools, Tool{
				Source: cfg.Name, Name: t.Name, Description: scrubText(t.Description, token),
				InputSchema: scrubSchema(schema, token), Role: role, Phase: phase,
			})
		}
		if res.NextCursor == "" {
			break
		}
		// MaxTools tools fill MaxTools pages at most, and the next is the last: a source that
		// names a next page after that (empty pages, or one cursor again and again) would
		// otherwise be asked for pages, as fast as it answers, until the tool timeout.
		if pages > MaxTools {
			cs.Close()
			return nil, &TransportError{Source: cfg.Name, Op: "list tools", Reason: ErrEndlessToolList}
		}
		params.Cursor = res.NextCursor
	}
	tr.handshakeDone()
	return s, nil
}

// MaxTools is the most tools one source may list, and the most a run may offer the model from
// all its sources together (the agent checks that sum): every tool goes to the model on every
// turn, and OpenAI takes at most 128 in one request, refusing more with a 400.
const MaxTools = 128

// MaxToolName is the longest tool name, in bytes of UTF-8, a source may list: twice the 128
// characters MCP recommends, room for names that are not ASCII. The model is never given the
// name itself (see the agent's toolset), so its length only bounds what events and logs carry.
const MaxToolName = 256

// Reasons a session refuses a source's tool list, kept in the *TransportError.
var (
	// ErrTooManyTools: the source listed more than MaxTools tools, at once or page by page.
	ErrTooManyTools = errors.New("listed more tools than the limit")
	// ErrBadToolName: a tool's name is empty, longer than MaxToolName, not UTF-8 or holds a
	// control or invisible formatting character or the caller's bearer (which events and logs
	// would carry), or the source listed it twice.
	ErrBadToolName = errors.New("listed a tool with an invalid or repeated name")
	// ErrEndlessToolList: the source named a next page of tools after more pages than MaxTools
	// tools could fill (pages without tools, or one cursor again and again).
	ErrEndlessToolList = errors.New("listed pages of tools without end")
)

// scrubSchema is schema with the caller's bearer (every form secretsOf names) replaced by
// Scrubbed wherever a string of it holds one: base64url and dots, which JSON never escapes.
func scrubSchema(schema map[string]any, token string) map[string]any {
	b, err := json.Marshal(schema)
	if err != nil || scrubText(string(b), token) == string(b) {
		return schema
	}
	var out map[string]any
	if json.Unmarshal([]byte(scrubText(string(b), token)), &out) != nil {
		return nil
	}
	return out
}

// validToolName reports whether name is a tool name the agent can call and show: 1 to
// MaxToolName bytes of UTF-8 without control characters (a newline, an escape sequence) or
// formatting ones (a right-to-left override, a zero-width space), which would let a name print
// as another in an event, a log line or a terminal. MCP asks for ASCII letters, digits, '_', '-'
// and '.', but only as a recommendation: real servers list names with '/', spaces or letters
// outside ASCII, and the model is given a name made from this one (see the agent's toolset).
func validToolName(name string) bool {
	if name == "" || len(name) > MaxToolName || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// faultOf is why a request of the session failed, as far as the session knows: its transport's
// refusal, or ctx's deadline (the tool timeout) passing first; else nil.
func faultOf(ctx context.Context, tr *bearer) error {
	if f := tr.Fault(); f != nil {
		return f
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrNoAnswer
	}
	return nil
}

// MaxResponseHeaderBytes bounds the header of one HTTP response from a source, with the
// default transport, as MaxResponseBytes bounds its body (egress.MaxResponseHeaderBytes).
const MaxResponseHeaderBytes = egress.MaxResponseHeaderBytes

// Name is the source's configured name.
func (s *Session) Name() string { return s.name }

// Tools are the tools the source listed, in its order.
func (s *Session) Tools() []Tool { return s.tools }

// Close ends the session.
func (s *Session) Close() error { return s.cs.Close() }

// TransportError is a source that could not be reached, rejected the caller's credentials,
// redirected off its origin, answered too much or too late, or broke the protocol. It ends the
// run with error{kind: transport}. Its message is made of the source's configured name, the
// operation and a fixed phrase: never the source's own words, a URL or the token.
type TransportError struct {
	Source string
	Op     string
	// Status is the HTTP status when the source rejected the credentials (401/403), else 0.
	Status int
	// Expired is the token's expiry when the source answered 401 after it (the token expired
	// during the run), else zero.
	Expired time.Time
	// Reason is why the session gave up when it did (ErrOffOrigin, ErrTooManyRedirects,
	// ErrResponseTooLarge, ErrTooManyRequests, ErrNoAnswer, ErrTooManyTools, ErrBadToolName),
	// else nil.
	Reason error
	Err    error
}

// ErrNoAnswer: a request of the session — the handshake, a tool call — got no answer within
// the tool timeout (a source that says nothing, or a response that never ends).
var ErrNoAnswer = errors.New("no answer within the tool timeout")

var errBadURL = errors.New("not an absolute http(s) URL")

func (e *TransportError) Error() string {
	switch {
	case e.Status != 0 && !e.Expired.IsZero():
		return fmt.Sprintf("source %s: %s: rejected the credentials (HTTP %d): the caller's token expired at %s",
			e.Source, e.Op, e.Status, e.Expired.UTC().Format(time.RFC3339))
	case e.Status != 0:
		return fmt.Sprintf("source %s: %s: rejected the credentials (HTTP %d)", e.Source, e.Op, e.Status)
	case e.Reason != nil:
		return fmt.Sprintf("source %s: %s: %v", e.Source, e.Op, e.Reason)
	}
	return fmt.Sprintf("source %s: %s: unreachable or broke the protocol", e.Source, e.Op)
}

func (e *TransportError) Unwrap() []error { return []error{e.Reason, e.Err} }

func transportError(source, op string, err, reason error) *TransportError {
	te := &TransportError{Source: source, Op: op, Err: err, Reason: reason}
	var se *StatusError
	if errors.As(err, &se) {
		te.Status, te.Expired = se.Status, se.Expired
	}
	return te
}
