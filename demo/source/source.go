// Package source is the demo source: a real MCP server (streamable HTTP, the official Go SDK)
// over an embedded, read-only SQLite database of teams, services, incidents, deployments and
// on-call pay, with a glossary catalog beside it. It is what `make ask-serve` runs on
// 127.0.0.1:8091, and what tests start in process on httptest.
//
// It is its own authority, as a production source would be: it validates every request's bearer
// itself (401 otherwise), applies that identity's permissions (analysts read everything; anyone
// else may not read oncall_pay), refuses every write, and writes one audit line per tool call
// naming the identity and the caller's call id. Refusals are tool results marked with
// `ask/refusal` meta, never HTTP errors. docs/sources.md is the contract it implements.
package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask"
)

// Defaults for Options' zero values.
const (
	DefaultRowCap       = 500
	DefaultQueryTimeout = 5 * time.Second
	DefaultAuditKeep    = 10000
	DefaultReadConns    = 4
	// MaxQueriesPerIdentity is how many run_query calls of one identity run at once: half the
	// read connections, so that one identity's slow queries leave the others some. A call beyond
	// waits for one of its own to end, within the query time limit.
	MaxQueriesPerIdentity = DefaultReadConns / 2
	// DefaultMaxSessionsPerIdentity is Options.MaxSessionsPerIdentity's default: far more than
	// one identity's asks running at once need (each holds one session per source).
	DefaultMaxSessionsPerIdentity = 32
	// DefaultBodyReadTimeout is Options.BodyReadTimeout's default, as askd's.
	DefaultBodyReadTimeout = 60 * time.Second
)

// Options configure a Source. Zero values mean the defaults; only Authenticator is required.
type Options struct {
	// Authenticator validates the bearer of every MCP request (an *auth.Validator in
	// production). Required.
	Authenticator ask.Authenticator
	// Data is the dataset folder (schema.yaml, catalog.yaml and one CSV per table); nil means
	// the dataset committed under data/ and embedded in the binary.
	Data fs.FS
	// AuditPath is the append-only JSON-lines audit file; "" keeps the audit in memory only.
	AuditPath string
	// AuditKeep is how many of the newest audit entries GET /audit can return; 0 means
	// DefaultAuditKeep.
	AuditKeep int
	// RowCap is the most rows run_query returns (the result says truncated when there were
	// more); 0 means DefaultRowCap.
	RowCap int
	// QueryTimeout bounds one run_query; 0 means DefaultQueryTimeout.
	QueryTimeout time.Duration
	// Analysts are the oids that may read every table; nil means just "alice". They are oids of
	// AnalystTenant: the same oid of another tenant is anyone else.
	Analysts []string
	// AnalystTenant is the tenant (ask.Identity.Tenant: the issuer, with ` tid="…"` when tokens
	// carry a `tid`) whose oids Analysts names; "" means the tenant of tokens with no `tid` claim.
	AnalystTenant string
	// Restricted are the tables only analysts may read; nil means just "oncall_pay".
	Restricted []string
	// BodyReadTimeout bounds the time a request's body may take to arrive, from the end of its
	// header; 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// MaxSessionsPerIdentity is the most MCP sessions one identity (an oid within its tenant)
	// may have open at once; a request that would open one more is answered 429. A session ends
	// with its DELETE (its slot is free once the DELETE is answered), or after 30 minutes idle.
	// 0 means DefaultMaxSessionsPerIdentity.
	MaxSessionsPerIdentity int
	// Logger receives operational logs; nil discards them. Tokens are never logged.
	Logger *slog.Logger
	// Now is the clock for audit timestamps; nil means time.Now.
	Now func() time.Time
	// ResourceURL is the URL clients reach the MCP endpoint at, when it is not this server's own
	// /mcp: behind a gateway that mounts the source under a prefix, such as
	// https://gw.example/warehouse/mcp. It is the `resource` of the protected resource metadata
	// (RFC 9728) and gives the metadata URL every challenge names (its well-known URL,
	// https://gw.example/.well-known/oauth-protected-resource/warehouse/mcp). "" means the URL
	// each request was sent to: its scheme and Host, path /mcp.
	ResourceURL string
	// AuthorizationServers are the issuers whose tokens the source takes, published in its
	// metadata; nil means the Authenticator's issuer when it names one (an *auth.Validator does).
	AuthorizationServers []string
	// Scopes are the scopes a token must grant, published in the metadata and named in every
	// challenge; nil means the Authenticator's required scopes when it names them (an
	// *auth.Validator does).
	Scopes []string
	// Serves is what part of the demo this source serves: PartAll ("", every tool), PartCatalog
	// (the glossary: search_catalog, define_term) or PartWarehouse (the tables: list_tables,
	// describe_table, run_query). The dev stack runs a catalog source and a warehouse source, so
	// that DAS_SOURCES names two; each validates bearers and audits on its own.
	Serves Part
}

// Part is what part of the demo a source serves.
type Part string

// The parts a source can serve.
const (
	PartAll       Part = ""
	PartCatalog   Part = "catalog"
	PartWarehouse Part = "warehouse"
)

// ParsePart reads a part's name ("all" or "" for every tool).
func ParsePart(s string) (Part, error) {
	switch p := Part(s); p {
	case PartCatalog, PartWarehouse, PartAll:
		return p, nil
	case "all":
		return PartAll, nil
	}
	return "", errors.New(`source: want a part of "all", "catalog" or "warehouse"`)
}

// Source is a running demo source. Its handler is safe for concurrent use.
type Source struct {
	db      *database
	catalog *catalog
	tables  []Table
	querier *querier
	audit   *auditLog
	auth    ask.Authenticator
	log     *slog.Logger
	now     func() time.Time
	mcp     *mcp.Server
	part    Part
	// bodyTimeout is Options.BodyReadTimeout.
	bodyTimeout time.Duration
	// maxSessions is Options.MaxSessionsPerIdentity.
	maxSessions int
	// resourceURL is Options.ResourceURL parsed; nil for each request's own URL.
	resourceURL *url.URL
	// authServers and scopes are Options.AuthorizationServers and Options.Scopes, defaults applied.
	authServers, scopes []string
}

// ErrAudit is what New's error matches (errors.Is) when Options.AuditPath cannot be opened for
// appending.
var ErrAudit = errors.New("source: the audit log cannot be opened")

// New loads the dataset into a fresh in-memory database and builds the MCP server. ctx bounds
// the loading only. Close releases the database and the audit file.
func New(ctx context.Context, opts Options) (*Source, error) {
	if opts.Authenticator == nil {
		return nil, errors.New("source: Options.Authenticator is required: the source validates every bearer itself")
	}
	if opts.Data == nil {
		data, err := embeddedData()
		if err != nil {
			return nil, err
		}
		opts.Data = data
	}
	if opts.AuditKeep <= 0 {
		opts.AuditKeep = DefaultAuditKeep
	}
	if opts.RowCap <= 0 {
		opts.RowCap = DefaultRowCap
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = DefaultQueryTimeout
	}
	if opts.Analysts == nil {
		opts.Analysts = []string{"alice"}
	}
	if opts.Restricted == nil {
		opts.Restricted = []string{"oncall_pay"}
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opts.MaxSessionsPerIdentity <= 0 {
		opts.MaxSessionsPerIdentity = DefaultMaxSessionsPerIdentity
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if _, err := ParsePart(string(opts.Serves)); err != nil {
		return nil, err
	}
	resourceURL, err := parseResourceURL(opts.ResourceURL)
	if err != nil {
		return nil, err
	}
	if ts, ok := opts.Authenticator.(tokenSettings); ok {
		if opts.AuthorizationServers == nil && ts.Issuer() != "" {
			opts.AuthorizationServers = []string{ts.Issuer()}
		}
		if opts.Scopes == nil {
			opts.Scopes = ts.RequiredScopes()
		}
	}

	ds, err := loadDataset(opts.Data)
	if err != nil {
		return nil, err
	}
	db, err := openDatabase(ctx, ds, DefaultReadConns)
	if err != nil {
		return nil, err
	}
	audit, err := openAudit(opts.AuditPath, opts.AuditKeep)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	s := &Source{
		db:      db,
		catalog: &catalog{terms: ds.terms},
		tables:  ds.tables,
		querier: newQuerier(db.read, ds.tables, policy{analysts: opts.Analysts, restricted: opts.Restricted, tenant: opts.AnalystTenant},
			opts.RowCap, MaxResultBytes, MaxQueriesPerIdentity, opts.QueryTimeout),
		audit: audit,
		auth:  opts.Authenticator,
		log:   opts.Logger,
		now:   opts.Now,
		part:  opts.Serves,

		bodyTimeout: opts.BodyReadTimeout,
		maxSessions: opts.MaxSessionsPerIdentity,
		resourceURL: resourceURL,
		authServers: opts.AuthorizationServers,
		scopes:      opts.Scopes,
	}
	s.mcp = s.newServer()
	return s, nil
}

// Handler serves the source:
//
//	/mcp      the MCP server, streamable HTTP; every request needs a valid bearer (401 otherwise,
//	          403 for a token without a required scope), each challenge naming the metadata below
//	/.well-known/oauth-protected-resource/mcp
//	          GET, the endpoint's protected resource metadata (RFC 9728), public; also at the
//	          well-known path of Options.ResourceURL
//	/audit    GET, the retained audit entries as JSON lines (loopback callers only; ?call_id= and ?oid= filter)
//	/healthz  GET, 200 once the source is serving
//
// A request's body has Options.BodyReadTimeout to arrive from the end of its header.
func (s *Source) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.mcpHandler())
	mux.HandleFunc(wellKnownPRM+"/", s.metadataHandler)
	mux.HandleFunc("/audit", s.auditHandler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 { // a body declared, or chunked: never the session's event stream
			// The body has bodyTimeout to arrive. net/http lifts the deadline once it is read
			// whole (to watch for the client's close); a body nothing reads (a 401) is cut by it
			// when net/http drains it after the response, which is then written and the
			// connection closed. The server's ReadTimeout would end every event stream.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
		}
		mux.ServeHTTP(w, r)
	})
}

// Close ends every MCP session still open, releases the database and closes the audit file.
// Serve nothing after Close. Without ending them, a session whose client never sent its DELETE
// (a client that died, or gave up mid-handshake) would keep its goroutines until the idle
// timeout, after its owner is gone (found by the hardening tests under goleak).
func (s *Source) Close() error {
	var open []*mcp.ServerSession
	for ss := range s.mcp.Sessions() {
		open = append(open, ss)
	}
	errs := make([]error, 0, len(open)+2)
	for _, ss := range open {
		errs = append(errs, ss.Close())
	}
	return errors.Join(append(errs, s.db.Close(), s.audit.close())...)
}
