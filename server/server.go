package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logthrottle"
	"github.com/das-ask/ask/internal/requestid"
	"github.com/das-ask/ask/openapi"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/webhook"
)

// Options configure New. Zero values mean the defaults in Config's documentation; New refuses
// a negative limit or duration (ShutdownGrace aside, where negative means none), and a
// MaxRetainedPerID below MaxInFlight.
type Options struct {
	// Runner runs each ask. Required.
	Runner ask.Runner
	// Authenticator validates every bearer (package auth in production). Required.
	Authenticator ask.Authenticator
	// Store is the run registry; nil means a store.Memory with TTL and MaxEvents. Shutdown
	// leaves the store as it is: finished tickets stay readable until their TTL.
	Store store.Store
	// Logger receives the service's logs; nil discards them. No line carries the question
	// text or a token.
	Logger *slog.Logger

	// BasePath is where the API is served (DAS_ASK_PATH); "" means DefaultBasePath and "/"
	// the root.
	BasePath string
	// TTL is how long finished tickets and idle conversations are kept (the Memory store's).
	TTL time.Duration
	// MaxEvents bounds each ticket's retained events: the Memory store's bound, when Store is
	// nil (a given store has its own).
	MaxEvents int
	// KeepAlive is the interval of `: keepalive` comments on a quiet stream.
	KeepAlive time.Duration
	// StreamWriteTimeout bounds each write of at most 64 KiB to an event stream (0:
	// DefaultStreamWriteTimeout): a client that takes less than 64 KiB in this long, having
	// stopped reading, is let go (the stream ends; the run goes on, and a reconnect with
	// Last-Event-ID misses nothing), so that it holds no handler, buffer or connection for
	// good. A client reading slowly is kept, however large an event.
	StreamWriteTimeout time.Duration
	// BodyReadTimeout bounds the time a request's body may take to arrive, from the end of its
	// header (0: DefaultBodyReadTimeout). The HTTP server's own ReadTimeout cannot be used (it
	// would end every event stream), so without this a client that declared a body and sent
	// less held a connection and a handler for good, before authentication too.
	BodyReadTimeout time.Duration
	// Deadline bounds each run from admission to done.
	Deadline time.Duration
	// MaxInFlight is the number of running asks one identity may have (429 beyond).
	MaxInFlight int
	// MaxTickets caps the tickets (and, separately, the conversations) held (503 beyond).
	MaxTickets int
	// MaxConversationsPerID caps the conversations one identity holds, and MaxRetainedPerID
	// the tickets it holds, running or finished within their TTL (429 beyond): no identity
	// can fill MaxTickets for everyone.
	MaxConversationsPerID int
	MaxRetainedPerID      int
	// MaxTurns caps the asks in one conversation (409 beyond: start a new one).
	MaxTurns int
	// MaxBodyBytes caps request bodies (413 beyond).
	MaxBodyBytes int64
	// ShutdownGrace is how long Shutdown lets running asks finish before ending them with
	// error{shutdown}; negative means no grace.
	ShutdownGrace time.Duration
	// StoreWait bounds how long a request waits for each call to a stalled store: past it the
	// request answers 503 + Retry-After (a stream keeps its keep-alives and reads again). A
	// create without an Idempotency-Key waits for the store at most this long in all, and an
	// ask whose creation the store takes after that is ended at once, error{interrupted}, unrun
	// (the answer said it was not started). A keyed create waits longer (a retry with its key
	// finds what it made).
	StoreWait time.Duration
	// Webhooks configure delivery of a run's end to the webhook its ask named.
	Webhooks WebhookOptions

	// Hooks report the service's lifecycle (package obs attaches through them).
	Hooks Hooks
}

// Options returns the Options c describes, field for field (both read zero as the default);
// the caller adds Runner, Authenticator, Store and Logger.
func (c Config) Options() Options {
	return Options{
		BasePath:              c.BasePath,
		TTL:                   c.TTL,
		MaxEvents:             c.MaxEvents,
		KeepAlive:             c.KeepAlive,
		Deadline:              c.Deadline,
		MaxInFlight:           c.MaxInFlight,
		MaxTickets:            c.MaxTickets,
		MaxConversationsPerID: c.MaxConversationsPerID,
		MaxRetainedPerID:      c.MaxRetainedPerID,
		MaxTurns:              c.MaxTurns,
		MaxBodyBytes:          c.MaxBodyBytes,
		ShutdownGrace:         c.ShutdownGrace,
		StoreWait:             c.StoreWait,
	}
}

// Server is the ask service: the Echo handler for the generated interface, the run registry
// and the runs in flight. It is safe for concurrent use.
type Server struct {
	opts  Options
	log   *slog.Logger
	store store.Store
	// edge is the service's HTTP surface: Echo behind what precedes routing (paths.go, head.go).
	edge http.Handler
	// contractYAML and contractJSON are the contract as this mount publishes it (openapi.Mounted).
	contractYAML, contractJSON []byte

	// base is the parent of every run's context: runs outlive the requests that start them.
	base       context.Context
	cancelBase context.CancelCauseFunc
	// closing is closed at the end of Shutdown: streams and long polls still open return.
	closing chan struct{}
	// streamsCut is cancelled with closing: a stream's write that waits on a client which does
	// not read is cut then, not at StreamWriteTimeout (sse.go, sseWriter.cut).
	streamsCut context.Context
	cutStreams context.CancelFunc
	// graceOver is closed by EndGrace: Shutdown's grace ends there.
	graceOver chan struct{}
	endGrace  sync.Once
	runners   sync.WaitGroup // runner goroutines
	// runnersDone, under mu, is set once Shutdown waits for the runners: a goroutine a
	// request would start then (goRunner) is refused, as a WaitGroup's Add from zero must not
	// race its Wait, and would outlive the Shutdown that returned.
	runnersDone bool
	// sseBufs lends streams their write buffers (*[]byte) for one batch at a time.
	sseBufs sync.Pool

	// gen caches the store's generation for minting ids (see generation).
	gen atomic.Pointer[cachedGeneration]

	// drained is draining, read without mu by every request (edge): a draining server's
	// responses close their connections.
	drained atomic.Bool

	mu       sync.Mutex
	draining bool
	active   int // admitted asks whose log has not ended
	runs     map[string]*run
	idle     chan struct{} // closed when draining and active == 0

	// outage keeps a store outage's log lines bounded (storeoutage.go); sweepLog the sweep's,
	// renewLog the leases' renewals (lease.go).
	outage   *logthrottle.Gate
	sweepLog logthrottle.Gate
	renewLog logthrottle.Gate

	// outbox and hooks deliver webhooks; nil when webhooks are off. stopHooks stops hooks.
	outbox    store.Outbox
	hooks     *webhook.Deliverer
	stopHooks context.CancelFunc

	// finished keeps the ends this replica wrote lately and keyed the idempotency records of
	// its keyed creates, for a restart that lost them, and holdSweepUntil (unix ns) holds the
	// sweep after its store reconnected (reassert.go); sweptAt (unix ns) is when the store last
	// answered a sweep, reconnectedAt (unix ns) when it last said it reconnected.
	finished       recent[finishedEnd]
	keyed          recent[keyedCreate]
	holdSweepUntil atomic.Int64
	sweptAt        atomic.Int64
	reconnectedAt  atomic.Int64
	reassertKick   chan struct{}
	passes         reassertPasses
}

// New builds the service. It fails on missing Runner or Authenticator and on invalid options.
// With the in-memory store it starts nothing; with a store.Shared it starts one goroutine that
// ends the runs of replicas whose lease lapsed, which Shutdown stops.
func New(opts Options) (*Server, error) {
	if opts.Runner == nil {
		return nil, errors.New("server: Options.Runner is required")
	}
	if opts.Authenticator == nil {
		return nil, errors.New("server: Options.Authenticator is required")
	}
	if opts.BasePath == "" {
		opts.BasePath = DefaultBasePath
	}
	base, err := cleanBasePath(opts.BasePath)
	if err != nil {
		return nil, errors.New("server: Options.BasePath: " + err.Error())
	}
	opts.BasePath = base
	if err := negativeOption(opts); err != nil {
		return nil, err
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	if opts.MaxEvents < minMaxEvents {
		return nil, errors.New("server: Options.MaxEvents must be at least 8")
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opts.Deadline <= 0 {
		opts.Deadline = DefaultDeadline
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxTickets <= 0 {
		opts.MaxTickets = DefaultMaxTickets
	}
	if opts.MaxConversationsPerID <= 0 {
		opts.MaxConversationsPerID = DefaultMaxConversationsPerID
	}
	if opts.MaxRetainedPerID <= 0 {
		opts.MaxRetainedPerID = DefaultMaxRetainedPerID
	}
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = DefaultMaxTurnsPerConversation
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.StoreWait <= 0 {
		opts.StoreWait = DefaultStoreWait
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if opts.MaxRetainedPerID < opts.MaxInFlight {
		// Running tickets are retained tickets: the in-flight cap could never be reached, and
		// an identity at the retained cap would be told to wait for a ticket's TTL.
		return nil, fmt.Errorf("server: Options.MaxRetainedPerID (%d) is below MaxInFlight (%d): running asks are retained tickets too",
			opts.MaxRetainedPerID, opts.MaxInFlight)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	contractYAML := openapi.Mounted(opts.BasePath)
	contractJSON, err := openapi.JSON()
	if opts.BasePath != DefaultBasePath {
		contractJSON, err = openapi.YAMLToJSON(contractYAML)
	}
	if err != nil {
		return nil, fmt.Errorf("server: the contract as JSON: %w", err)
	}
	s := &Server{
		opts:         opts,
		log:          log,
		contractYAML: contractYAML,
		contractJSON: contractJSON,
		store:        opts.Store,
		closing:      make(chan struct{}),
		graceOver:    make(chan struct{}),
		runs:         map[string]*run{},
		reassertKick: make(chan struct{}, 1),
		idle:         make(chan struct{}),
		outage:       newStoreOutage(),
	}
	if s.store == nil {
		s.store = MemoryStore(Config{TTL: opts.TTL, MaxEvents: opts.MaxEvents})
	}
	s.base, s.cancelBase = context.WithCancelCause(context.Background())
	s.streamsCut, s.cutStreams = context.WithCancel(context.Background())
	e, err := s.newEcho()
	if err != nil {
		s.cancelBase(errShutdown)
		return nil, err
	}
	s.edge = &edge{e, s.opts.BodyReadTimeout, &s.drained}
	if s.opts.TTL < s.opts.Deadline {
		// Allowed (a test, a demo), but an Idempotency-Key is kept TTL from its first use: a
		// client's retry after that, while the ask it made still runs, asks again once it ends.
		s.log.Warn("DAS_ASK_TTL_S is shorter than DAS_ASK_DEADLINE_S: an Idempotency-Key can expire while the ask it made still runs, and a retry after that asks again",
			"ttl", s.opts.TTL.String(), "deadline", s.opts.Deadline.String())
	}
	if err := s.startWebhooks(); err != nil {
		s.cancelBase(errShutdown)
		return nil, err
	}
	if sh, ok := s.store.(store.Shared); ok {
		s.runners.Add(1)
		go func() {
			defer s.runners.Done()
			s.sweep(sh)
		}()
		if rc, ok := sh.(reconnector); ok {
			s.runners.Add(1)
			go func() {
				defer s.runners.Done()
				s.reassertOnReconnect(sh, rc)
			}()
		}
	}
	return s, nil
}

// negativeOption refuses a negative limit or duration: zero is the default and a negative
// value means nothing else (ShutdownGrace's "none" aside), so it is a caller's mistake, which
// would otherwise pass silently as the default.
func negativeOption(o Options) error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"TTL", int64(o.TTL)}, {"MaxEvents", int64(o.MaxEvents)}, {"KeepAlive", int64(o.KeepAlive)}, {"StreamWriteTimeout", int64(o.StreamWriteTimeout)},
		{"BodyReadTimeout", int64(o.BodyReadTimeout)},
		{"Deadline", int64(o.Deadline)}, {"MaxInFlight", int64(o.MaxInFlight)}, {"MaxTickets", int64(o.MaxTickets)},
		{"MaxConversationsPerID", int64(o.MaxConversationsPerID)}, {"MaxRetainedPerID", int64(o.MaxRetainedPerID)},
		{"MaxTurns", int64(o.MaxTurns)}, {"MaxBodyBytes", o.MaxBodyBytes}, {"StoreWait", int64(o.StoreWait)},
	} {
		if f.v < 0 {
			return fmt.Errorf("server: Options.%s is negative (zero means its default)", f.name)
		}
	}
	return nil
}

// MemoryStore is the in-memory store sized as c sizes the service (its TTL and MaxEvents, zero
// meaning the defaults): what New uses when Options.Store is nil, and what package app builds
// for DAS_ASK_STORE=memory. It is the module's one place that makes a store.Memory.
func MemoryStore(c Config) *store.Memory {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxEvents <= 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	return store.NewMemory(store.MemoryOptions{TTL: c.TTL, MaxEvents: c.MaxEvents})
}

// Handler is the whole HTTP surface, to serve with an http.Server. Every response carries an
// X-Request-Id (the one an outer layer such as package obs set, else the caller's when
// well-formed, else a fresh one), whether or not the service is instrumented. A path with an
// empty or dot segment is 404 (paths.go), never redirected, and one that percent-encodes an
// unreserved character is the plain path (paths.go); HEAD is answered on every GET route
// (head.go).
func (s *Server) Handler() http.Handler { return s.edge }

// edge is the service's HTTP surface: the request id, the unclean paths' 404 (paths.go) and
// HEAD (head.go) before Echo, in one frame. Every frame here stays on the stack of every open
// event stream for its life, and the streams' goroutine stacks sit just under a size at which
// they double: as three nested handlers these took askbench's idle streams from 27.7 KB to
// 35.7 KB a connection (the goroutine stacks from 10 KB to 18 KB), past the 40 KB line; as one,
// 27.7 KB again.
type edge struct {
	e           *echo.Echo
	bodyTimeout time.Duration
	// draining: every response says Connection: close, so that a gateway or client holds no
	// idle connection to a replica that is stopping. Each one the replica closed when its drain
	// ended was a race with a gateway sending a request on it just then, which nginx answers
	// 502 for a POST and does not send again (docs/scale-out.md); now the connections used
	// in the drain close after their response, as their client knows, and the drain's end
	// finds few idle ones to close. The idle ones are not closed when the drain begins: that
	// would be the same race, at its start.
	draining *atomic.Bool
}

// connClose is a draining server's Connection header: net/http closes the connection after
// the response, and says so to the client. One slice for all: net/http only reads it.
var connClose = []string{"close"}

// nosniff is every response's X-Content-Type-Options (the document's description): no browser
// reads a body as another type than its Content-Type, such as a problem's detail or an event's
// text as HTML. One slice for all: net/http only reads it.
var nosniff = []string{"nosniff"}

func (x *edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 { // only `PRI * HTTP/2.0` gets here: net/http refuses other versions
		refuseVersion(w)
		return
	}
	hd := w.Header()
	if hd.Get(requestid.Header) == "" {
		hd.Set(requestid.Header, requestid.Of(r.Header))
	}
	hd["X-Content-Type-Options"] = nosniff
	if x.draining.Load() {
		hd["Connection"] = connClose
	}
	if r.ContentLength != 0 { // a body declared, or chunked: never an event stream's GET
		bodyDeadline(w, x.bodyTimeout)
	}
	if r.URL.RawPath != "" { // escapes the plain path would not have (paths.go)
		decodeUnreserved(r.URL)
	}
	switch {
	case !cleanPath(r.URL.Path):
		writeProblem(w, errNotFound)
	case r.Method == http.MethodHead:
		serveHead(x.e, w, r)
	default:
		x.e.ServeHTTP(w, r)
	}
}

// refuseVersion answers the HTTP/2 connection preface sent as HTTP/1 text (`PRI * HTTP/2.0`,
// which h2c with prior knowledge opens with) as net/http answers every other request line of a
// version other than 1.x, and as the contract's description says: 505, text/plain, no request
// id (not even the one obs, in front, set), the connection closed. net/http passes that one
// request line on to the handler, so that one can take the connection over for HTTP/2; the
// service serves HTTP/1.x, and answered it with a 404 problem as for a path it does not have,
// which an HTTP/2 client cannot read. Kept out of line: edge's frame stays on every stream's
// stack.
//
//go:noinline
func refuseVersion(w http.ResponseWriter) {
	w.Header().Del(requestid.Header) // obs, in front, sets one on every response
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusHTTPVersionNotSupported)
	_, _ = io.WriteString(w, "505 HTTP Version Not Supported: unsupported protocol version")
}

// bodyDeadline gives the request's body d to arrive. readBody lifts it once the body is read;
// a body the service never reads (a 401, a 404) is cut by it when net/http drains it after the
// response, so the response is still written and the connection then closed. Kept out of
// line: edge's frame stays on every stream's stack.
//
//go:noinline
func bodyDeadline(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)) // unsupported: unbounded, as before
}

// newEcho wires Echo: problem+json errors, a debug access log with panic recovery, then per
// operation auth → admission → body limit
// → (for the bodies) JSON text → request validation → the generated wrapper → handlers.
func (s *Server) newEcho() (*echo.Echo, error) {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(io.Discard)
	e.HTTPErrorHandler = errorHandler(s.log, s.outage, s.opts.Hooks.Refused)
	e.Use(s.observe())

	validate, err := s.validator()
	if err != nil {
		return nil, err
	}
	authn := s.authenticate()
	admit := s.admitting()
	limit := s.limitBody()
	served := s.storeServed()
	secured := []echo.MiddlewareFunc{authn, limit, validate}
	read := []echo.MiddlewareFunc{served, authn, limit, validate}
	admitted := []echo.MiddlewareFunc{served, authn, admit, limit, jsonText(), validate}
	gen.RegisterHandlersWithOptions(withHead{e}, &handlers{s: s}, gen.RegisterHandlersOptions{
		BaseURL: s.opts.BasePath,
		OperationMiddlewares: map[string][]echo.MiddlewareFunc{
			"createConversation": admitted,
			"createAsk":          admitted,
			"streamEvents":       secured,
			"getAsk":             read,
			"cancelAsk":          read,
		},
	})
	return e, nil
}

// ErrRunnersLeft is Shutdown's error when its context ended after every ask's end (the
// terminal event and done) was stored but before every runner returned: a run still waiting
// on a source or the model, as a tool call in flight is let complete, bounded by the tool
// timeout. Nothing of any ask is lost then; the operator is told which wait it was.
var ErrRunnersLeft = errors.New("every ask's end was stored, but not every run had returned")

// ErrWebhooksLeft is Shutdown's error when its context ended while it attempted the deliveries
// its runs' ends made due (a receiver slow to answer), after every ask's end was stored: not a
// run left waiting on a source or the model. The deliveries not made are lost with an in-process
// store; with Redis the other replicas make them.
var ErrWebhooksLeft = errors.New("every ask's end was stored, but the due webhook deliveries were still being attempted")

// Shutdown stops admitting (503 from then on), lets running asks finish for the grace period
// (until EndGrace, or until ctx is done), then ends the rest with error{shutdown} and done,
// closes every open stream, attempts the webhook deliveries due, and waits (until ctx is done)
// for the runners to return: ctx's error when it ended first, wrapped in ErrWebhooksLeft when it
// ended in those attempts, or in ErrRunnersLeft when only runners were left. It is
// safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		s.drained.Store(true)
		if s.active == 0 {
			close(s.idle)
		}
	}
	s.mu.Unlock()
	s.log.Info("shutting down", "grace", max(s.opts.ShutdownGrace, 0).String()) // negative: none

	if s.opts.ShutdownGrace > 0 {
		grace := time.NewTimer(s.opts.ShutdownGrace)
		select {
		case <-s.idle:
		case <-grace.C:
		case <-s.graceOver:
		case <-ctx.Done():
		}
		grace.Stop()
	}
	s.mu.Lock()
	var left []*run
	for _, r := range s.runs {
		left = append(left, r)
	}
	// Cancelled with the list taken, under the same lock: a run newRun registers after this
	// was made under a cancelled base, so its runner stops at its first model or tool call;
	// one registered before is in the list and stopped below.
	s.cancelBase(errShutdown)
	s.mu.Unlock()
	for _, r := range left {
		// Each on its own goroutine: a store slow to take the ends must not make them wait
		// for one another (Shutdown waits for them below, until ctx is done).
		s.runners.Add(1)
		go func() {
			defer s.runners.Done()
			r.stop(errShutdown)
		}()
	}

	ended := false // every run's end stored: only runners may be left
	select {
	case <-s.idle:
		ended = true
	case <-ctx.Done():
	}
	// Every run has ended and made its delivery due: attempt them before going.
	inTime := ctx.Err() == nil
	s.drainWebhooks(ctx)
	hooksCut := ended && inTime && ctx.Err() != nil // the bound ran out in the attempts
	s.mu.Lock()
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	s.cutStreams()
	s.runnersDone = true
	s.mu.Unlock()

	returned := make(chan struct{})
	go func() { s.runners.Wait(); close(returned) }()
	if hooksCut {
		return fmt.Errorf("%w: %w", ErrWebhooksLeft, ctx.Err())
	}
	var err error
	select {
	case <-returned:
	case <-ctx.Done():
		err = ctx.Err()
		if ended {
			err = fmt.Errorf("%w: %w", ErrRunnersLeft, err)
		}
	}
	return err
}

// EndGrace ends Shutdown's grace now, or makes a later Shutdown skip it: the asks still
// running end with error{shutdown} and done at once, as they would when the grace runs out
// (an operator's second SIGTERM, say). It does not stop admitting by itself; safe to call more
// than once and from any goroutine.
func (s *Server) EndGrace() { s.endGrace.Do(func() { close(s.graceOver) }) }

// Active reports how many asks this instance holds: admitted (or being admitted) and whose log
// has not ended here yet, its end written to the store. It is zero once every run has ended and
// its end is stored; the benchmark waits for that before it reads a burst's CPU, so that a burst
// pays for its own runs' ends.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// release gives back a slot admitCreate reserved (the ask was refused, or its log has ended).
func (s *Server) release(ticket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ticket != "" {
		delete(s.runs, ticket)
	}
	s.active--
	if s.draining && s.active == 0 {
		close(s.idle)
	}
}
