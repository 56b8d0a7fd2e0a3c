package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/server"
)

// Child modes.
const (
	// ModeSynthetic serves the service with the synthetic runner, the bare ticket handler, the
	// bare stream writer and the MCP peer, all validating bearers against one IdP.
	ModeSynthetic = "synthetic"
	// ModeStack serves the whole development stack (demo/stack): the service with the agent,
	// the llm-stub at zero delay and the demo source.
	ModeStack = "stack"
)

// ServeOptions configure Serve. Zero values mean defaults.
type ServeOptions struct {
	// Mode is ModeSynthetic (default) or ModeStack.
	Mode string
	// Phase, in ModeStack, is 1 or 2 on the split demo (a catalog and a warehouse source); 0
	// means the one demo source in phase 1.
	Phase int
	// KeepAlive is the service's keep-alive interval; 0 means the service's default.
	KeepAlive time.Duration
	// MaxEvents is the service's per-ticket bound; 0 means 100000 in ModeSynthetic (so that no
	// step of a long synthetic run is evicted while it is measured) and the default otherwise.
	MaxEvents int
	// Store, when not empty, is a redis:// URL (or redis+cluster://seed,… for a Redis
	// Cluster): the synthetic service keeps its tickets, logs and conversations in that Redis
	// (package store/redis, under a prefix of its own) instead of in memory. The baselines are unchanged. ModeSynthetic only.
	Store string
	// Handshake receives one JSON line naming the endpoints once everything listens.
	Handshake io.Writer
	// Logger receives warnings; nil discards.
	Logger *slog.Logger
}

// endpoints is the child's handshake: where each server listens.
type endpoints struct {
	PID int `json:"pid"`
	// Ask is the service's base URL (with its base path); IdP the issuer.
	Ask, IdP string
	// Bare is the bare ticket handler's base URL, BareSSE the bare stream writer's, MCP the
	// peer's endpoint; empty in ModeStack.
	Bare, BareSSE, MCP string
	// Debug is the child's loopback debug endpoint (stats, gc, gates, profiles).
	Debug string
}

// Serve runs the server side of the bench until ctx is done: the child process of Run.
func Serve(ctx context.Context, opts ServeOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := newGates()
	var servers []*http.Server
	serve := func(h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
		return "http://" + ln.Addr().String(), nil
	}
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()

	ep := endpoints{PID: os.Getpid()}
	var active func() int // the service's asks not yet ended (server.Server.Active); nil in ModeStack
	switch opts.Mode {
	case ModeStack:
		if opts.Store != "" {
			return errStoreMode
		}
		cfg := server.DefaultConfig()
		cfg.MaxInFlight = 1 << 17
		cfg.MaxTickets = 1 << 22
		cfg.MaxConversationsPerID, cfg.MaxRetainedPerID = 1<<17, 1<<17
		if opts.KeepAlive > 0 {
			cfg.KeepAlive = opts.KeepAlive
		}
		if opts.MaxEvents > 0 {
			cfg.MaxEvents = opts.MaxEvents
		}
		st, err := stack.Start(ctx, stack.Options{Service: &cfg, Logger: log, Split: opts.Phase > 0, Phase: opts.Phase})
		if err != nil {
			return err
		}
		defer st.Close()
		ep.Ask, ep.IdP = st.AskURL, st.IdPURL
	case ModeSynthetic, "":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		issuer := "http://" + ln.Addr().String()
		p, err := idp.New(idp.Options{Issuer: issuer})
		if err != nil {
			ln.Close()
			return err
		}
		idpSrv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, idpSrv)
		go func() { _ = idpSrv.Serve(ln) }()
		v, err := auth.New(ctx, auth.Config{
			JWKSURL: issuer + "/.well-known/jwks.json", Issuer: issuer,
			Audience: idp.DefaultAudience, RequiredScope: idp.DefaultScope,
		}, auth.Options{Logger: log})
		if err != nil {
			return err
		}
		if !v.Ready() {
			return errors.New("bench: the child's JWKS could not be fetched")
		}
		maxEvents := opts.MaxEvents
		if maxEvents <= 0 {
			maxEvents = 100_000
		}
		// The service through the same root as askd (package app), with the synthetic runner and
		// the validator the baselines share, unobserved (the baselines are not either).
		cfg := config.DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		cfg.Ops.Observe = false
		cfg.Service.BasePath, cfg.Service.KeepAlive, cfg.Service.MaxEvents = "/ask", opts.KeepAlive, maxEvents
		cfg.Service.Deadline, cfg.Service.MaxInFlight, cfg.Service.MaxTickets, cfg.Service.ShutdownGrace = time.Hour, 1<<17, 1<<22, -1
		// The workloads put tens of thousands of asks as a few identities: the per-identity
		// caps would refuse them, so they are far above that, and below a Redis Cluster
		// bucket's share of the store's (16 buckets: 1<<18), so that no identity could fill
		// the capacity the others share (askd warns of that).
		cfg.Service.MaxConversationsPerID, cfg.Service.MaxRetainedPerID = 1<<17, 1<<17
		// Finished tickets kept an hour, as long as the deadline (a TTL below it is warned of;
		// nothing expires within a run either way).
		cfg.Service.TTL = time.Hour
		if opts.Store != "" {
			// A prefix of its own, so a Redis shared with anything else is not disturbed.
			cfg.Store = config.StoreConfig{URL: opts.Store, Prefix: "bench:" + rand.Text() + ":"}
		}
		m := app.NewMain(cfg)
		m.Runner, m.Authenticator, m.Logger = synthetic{gates: g}, v, log
		if err := m.Run(ctx); err != nil {
			return err
		}
		defer m.Close()
		active = m.Server.Active
		ep.IdP, ep.Ask = issuer, m.URL()
		if ep.Bare, err = serve(bareTicketHandler(v, "/ask")); err != nil {
			return err
		}
		ep.Bare += "/ask"
		if ep.BareSSE, err = serve(auth.Middleware(v, &bareStream{gates: g})); err != nil {
			return err
		}
		if ep.MCP, err = serve(peerHandler(v)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("bench: unknown mode %q", opts.Mode)
	}
	var err error
	if ep.Debug, err = serve(newDebug(g, active)); err != nil {
		return err
	}
	line, _ := json.Marshal(ep)
	if opts.Handshake != nil {
		if _, err := fmt.Fprintf(opts.Handshake, "%s\n", line); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// cpuSample is what the child's /rusage answers: its CPU time and the heap bytes it has
// allocated so far.
type cpuSample struct {
	NS    int64  `json:"cpu_ns"`
	Alloc uint64 `json:"alloc_bytes"`
}

// debugStats is what the child's /stats answers.
type debugStats struct {
	Goroutines int    `json:"goroutines"`
	HeapInuse  uint64 `json:"heap_inuse"`
	StackInuse uint64 `json:"stack_inuse"`
	Sys        uint64 `json:"sys"`
}

// newDebug is the child's loopback debug endpoint: the bench child's only, never the
// service's. POST /gc collects and returns memory to the OS; GET /stats; POST
// /release?key=K opens a gate; POST /cpu/start?path=P and /cpu/stop profile CPU;
// POST /heap?path=P writes a heap profile; POST /quiet?timeout=D waits until the service holds
// no ask (active, server.Server.Active: every run ended and its end stored), for at most D
// (default a minute; 0 asks once), and fails with 503 if it still holds one then.
func newDebug(g *gates, active func() int) http.Handler {
	mux := http.NewServeMux()
	var mu sync.Mutex
	var cpu *os.File
	mux.HandleFunc("POST /gc", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		debug.FreeOSMemory()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		_ = json.NewEncoder(w).Encode(debugStats{
			Goroutines: runtime.NumGoroutine(), HeapInuse: m.HeapInuse, StackInuse: m.StackInuse, Sys: m.Sys,
		})
	})
	// POST /rusage collects garbage, then answers this process's CPU time so far (user plus
	// system, getrusage RUSAGE_SELF, all threads) in nanoseconds: the server side's CPU, which
	// the load generator (another process) is not part of; and the heap bytes it has allocated.
	mux.HandleFunc("POST /rusage", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(cpuSample{NS: ru.Utime.Nano() + ru.Stime.Nano(), Alloc: ms.TotalAlloc})
	})
	mux.HandleFunc("POST /quiet", func(w http.ResponseWriter, r *http.Request) {
		if active == nil {
			http.Error(w, "no service in this mode", http.StatusNotImplemented)
			return
		}
		timeout := time.Minute
		if v := r.URL.Query().Get("timeout"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			timeout = d
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for n := active(); n > 0; n = active() {
			select {
			case <-tick.C:
			case <-ctx.Done():
				http.Error(w, strconv.Itoa(n)+" asks still held", http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) {
		g.release(r.URL.Query().Get("key"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /cpu/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if cpu != nil {
			http.Error(w, "already profiling", http.StatusConflict)
			return
		}
		f, err := os.Create(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		cpu = f
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /cpu/stop", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if cpu == nil {
			http.Error(w, "not profiling", http.StatusConflict)
			return
		}
		pprof.StopCPUProfile()
		err := cpu.Close()
		cpu = nil
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /heap", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Create(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		runtime.GC()
		err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
