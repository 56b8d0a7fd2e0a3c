package llmstub

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/das-ask/ask/demo/idp"
)

// Options configures a Stub. Zero values mean defaults.
type Options struct {
	// Script decides the replies; nil means DefaultScript.
	Script *Script
	// Logger receives one line per request (rule, decision, tool name, status — never message
	// text, tool arguments or keys); nil discards.
	Logger *slog.Logger
	// RequireAuth makes every /v1 call require `Authorization: Bearer <key>` with any non-empty
	// key, answering 401 in OpenAI's error shape otherwise, as the real API does.
	RequireAuth bool
	// MaxLogged bounds the request log; the oldest entries are dropped first. 0 means 1000.
	MaxLogged int
	// Now stamps the `created` field of responses; nil means time.Now.
	Now func() time.Time
}

// Stub is a deterministic, scripted model behind the OpenAI Chat Completions HTTP API. It is
// stateless between requests, like a real model: every reply is decided from the messages of the
// request alone. Safe for concurrent use.
type Stub struct {
	script      *Script
	log         *slog.Logger
	requireAuth bool
	now         func() time.Time
	received    *requestLog
}

// maxBody bounds a request body; larger bodies get 413.
const maxBody = 8 << 20

// New returns a Stub. The only error is a default script that does not parse, which the package's
// tests rule out.
func New(opts Options) (*Stub, error) {
	s := &Stub{script: opts.Script, log: opts.Logger, requireAuth: opts.RequireAuth, now: opts.Now,
		received: &requestLog{max: opts.MaxLogged}}
	if s.script == nil {
		var err error
		if s.script, err = DefaultScript(); err != nil {
			return nil, err
		}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.received.max <= 0 {
		s.received.max = 1000
	}
	return s, nil
}

// Handler serves:
//
//	POST   /v1/chat/completions   a scripted reply, as JSON or (stream: true) as SSE chunks
//	GET    /v1/models             the script's model ids
//	GET    /_stub/requests        the request log, as a JSON array of Received
//	DELETE /_stub/requests        clears the request log
//
// Any other path is a 404 in OpenAI's error shape. /_stub takes no bearer, but answers only a
// caller on the loopback interface whose request names a loopback host (403 otherwise), as the
// demo source's /audit does: the request log holds every identity's questions and the tools'
// results, so it is for tests and the operator on the machine, not for the network (a stub
// listening on another address), nor for a web page that DNS rebinding brought to loopback.
func (s *Stub) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /_stub/requests", func(w http.ResponseWriter, r *http.Request) {
		if localOnly(w, r) {
			writeJSON(w, http.StatusOK, s.Requests())
		}
	})
	mux.HandleFunc("DELETE /_stub/requests", func(w http.ResponseWriter, r *http.Request) {
		if localOnly(w, r) {
			s.Reset()
			w.WriteHeader(http.StatusNoContent)
		}
	})
	mux.HandleFunc("/", s.handleNotFound)
	return mux
}

// localOnly reports whether r comes from a loopback peer and names a loopback host; if not,
// it has answered 403 in OpenAI's error shape.
func localOnly(w http.ResponseWriter, r *http.Request) bool {
	if idp.LocalRequest(r) {
		return true
	}
	w.Header().Set("Cache-Control", "no-store")
	writeAPIError(w, &apiError{status: http.StatusForbidden, typ: "invalid_request_error",
		message: "the request log is served to loopback callers only"})
	return false
}

// Requests returns a copy of the request log, oldest first.
func (s *Stub) Requests() []Received { return s.received.list() }

// Reset clears the request log; sequence numbers keep counting.
func (s *Stub) Reset() { s.received.reset() }

// Serve serves the stub on ln until ctx is done, then shuts down: requests in flight (including
// scripted delays, whose contexts derive from ctx) end, and Serve returns once they have. It
// returns nil after a shutdown and the server's error otherwise.
func (s *Stub) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

func (s *Stub) handleModels(w http.ResponseWriter, r *http.Request) {
	rec := Received{Method: r.Method, Path: r.URL.Path, Status: http.StatusOK}
	defer func() { s.received.add(rec) }()
	if aerr := s.authorize(r); aerr != nil {
		rec.Status, rec.Error = aerr.status, aerr.message
		writeAPIError(w, aerr)
		return
	}
	list := modelList{Object: "list", Data: []modelInfo{}}
	for _, id := range s.script.models {
		list.Data = append(list.Data, modelInfo{ID: id, Object: "model", Created: 0, OwnedBy: "das-ask"})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Stub) handleNotFound(w http.ResponseWriter, r *http.Request) {
	aerr := &apiError{status: http.StatusNotFound, typ: "invalid_request_error",
		message: "Invalid URL (" + r.Method + " " + r.URL.Path + ")"}
	s.received.add(Received{Method: r.Method, Path: r.URL.Path, Status: aerr.status, Error: aerr.message})
	writeAPIError(w, aerr)
}

// authorize checks the bearer when RequireAuth is set. The key itself is never looked at again.
func (s *Stub) authorize(r *http.Request) *apiError {
	if !s.requireAuth {
		return nil
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(key) != "" {
		return nil
	}
	return &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error",
		message: "You didn't provide an API key. You need to provide your API key in an Authorization header " +
			"using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
}
