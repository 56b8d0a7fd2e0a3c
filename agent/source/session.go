package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure sessions. Zero values mean defaults.
type Options struct {
	// HTTPClient is the base client; its Transport carries the session's requests (nil means
	// http.DefaultTransport). Its Timeout, if any, bounds each request.
	HTTPClient *http.Client
	// Logger receives one line per call; nil means discard.
	Logger *slog.Logger
	// ClientName and ClientVersion identify the agent to sources; defaults "ask-agent", "1".
	ClientName, ClientVersion string
}

// Session is one run's connection to one source, authenticated as the run's caller. It is
// used by one run at a time; Call may be called from one goroutine at a time.
type Session struct {
	name  string
	cs    *mcp.ClientSession
	tools []Tool
	log   *slog.Logger
}

// Connect opens an MCP session with the source as the holder of token, and discovers its
// tools. Every HTTP request of the session carries `Authorization: Bearer <token>`. A source
// that cannot be reached, rejects the token or fails to list its tools yields a
// *TransportError; the token never appears in it.
func Connect(ctx context.Context, cfg Config, token string, opts Options) (*Session, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := http.DefaultTransport
	hc := &http.Client{}
	if opts.HTTPClient != nil {
		if opts.HTTPClient.Transport != nil {
			base = opts.HTTPClient.Transport
		}
		hc.Timeout = opts.HTTPClient.Timeout
	}
	hc.Transport = &bearer{base: base, source: cfg.Name, token: token}
	name, version := opts.ClientName, opts.ClientVersion
	if name == "" {
		name = "ask-agent"
	}
	if version == "" {
		version = "1"
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: version}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             cfg.URL,
		HTTPClient:           hc,
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return nil, transportError(cfg.Name, "connect", err)
	}
	s := &Session{name: cfg.Name, cs: cs, log: log}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			cs.Close()
			return nil, transportError(cfg.Name, "list tools", err)
		}
		role, phase := Classify(t.Name, t.Meta)
		schema, _ := t.InputSchema.(map[string]any)
		s.tools = append(s.tools, Tool{
			Source: cfg.Name, Name: t.Name, Description: t.Description,
			InputSchema: schema, Role: role, Phase: phase,
		})
	}
	return s, nil
}

// Name is the source's configured name.
func (s *Session) Name() string { return s.name }

// Tools are the tools the source listed, in its order.
func (s *Session) Tools() []Tool { return s.tools }

// Close ends the session.
func (s *Session) Close() error { return s.cs.Close() }

// TransportError is a source that could not be reached, rejected the caller's credentials, or
// broke the protocol. It ends the run with error{kind: transport}.
type TransportError struct {
	Source string
	Op     string
	// Status is the HTTP status when the source rejected the credentials (401/403), else 0.
	Status int
	Err    error
}

func (e *TransportError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("source %s: %s: rejected the credentials (HTTP %d)", e.Source, e.Op, e.Status)
	}
	return fmt.Sprintf("source %s: %s: unreachable or broke the protocol", e.Source, e.Op)
}

func (e *TransportError) Unwrap() error { return e.Err }

func transportError(source, op string, err error) *TransportError {
	te := &TransportError{Source: source, Op: op, Err: err}
	var se *StatusError
	if errors.As(err, &se) {
		te.Status = se.Status
	}
	return te
}
