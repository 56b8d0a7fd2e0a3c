package stack

import (
	"log/slog"
	"net"
	"net/http"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// admin instruments the stack's ask service with package obs, as askd does, when
// Options.AdminAddr is set: metrics, request ids, the per-ask log line, and /metrics, /healthz
// and /readyz on a loopback listener of their own. A nil *admin (no AdminAddr) changes nothing:
// each method hands back what it is given.
type admin struct {
	o   *obs.Observer
	ln  net.Listener
	mem *store.Memory
}

func newAdmin(addr string, log *slog.Logger) (*admin, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	return &admin{o: obs.New(obs.Options{Logger: log.With("component", "obs")}), ln: ln}, nil
}

func (a *admin) model(m model.Model, provider string) model.Model {
	if a == nil {
		return m
	}
	return a.o.Model(m, provider)
}

func (a *admin) runner(r ask.Runner) ask.Runner {
	if a == nil {
		return r
	}
	return a.o.Runner(r)
}

// options sets the service's store: an in-memory store sized as the service would size it,
// observed.
func (a *admin) options(o *server.Options, cfg server.Config) {
	if a == nil {
		return
	}
	a.mem = store.NewMemory(store.MemoryOptions{TTL: cfg.TTL, MaxEvents: cfg.MaxEvents})
	o.Store = a.o.Store(a.mem)
}

func (a *admin) handler(h http.Handler) http.Handler {
	if a == nil {
		return h
	}
	return a.o.Handler(h)
}

// close releases the listener when the stack fails to start.
func (a *admin) close() {
	if a != nil {
		a.ln.Close()
	}
}
