package source

import (
	"net/http"
	"strconv"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionCap holds each identity to at most max open MCP sessions. The SDK's streamable handler
// has no such limit nor a hook on a session's end, so the cap watches the HTTP exchanges that
// open and end sessions, at the moment their answers' headers are written, before the client
// can read them:
//
//   - a POST without Mcp-Session-Id is counted as opening while it runs; the session id its
//     answer carries is noted as the identity's before the answer goes out, so a client cannot
//     end (or use) a session the cap has not yet noted;
//   - a DELETE the SDK answers 2xx releases its session before that answer goes out, so a client
//     whose Close has returned (the SDK's client waits for the DELETE's answer) may open another
//     at once. The SDK takes a session out of Server.Sessions only a moment after answering its
//     DELETE, so counting the server's sessions alone refused such a close-then-open 429 (the cap
//     of 40e3823, reverted in e6bd366);
//   - a session that ends otherwise (its idle timeout, Source.Close) is dropped when it is no
//     longer among the server's sessions, at the next count.
//
// Until 2026-12-06 there was no cap: 5,000 initialize calls of one identity held about 52 MB,
// each session living until its 30 min idle timeout. Safe for concurrent use.
type sessionCap struct {
	max    int
	server *mcp.Server
	mu     sync.Mutex
	// owner is the identity (identity.key) that opened each session, by session id.
	owner map[string]string
	// opening is each identity's session-opening requests whose answers are not yet written.
	opening map[string]int
}

func newSessionCap(max int, server *mcp.Server) *sessionCap {
	return &sessionCap{max: max, server: server, owner: map[string]string{}, opening: map[string]int{}}
}

// handler refuses a request that would open a session past its identity's cap with 429, before
// the SDK sees it. The SDK's bearer guard must have run: the identity is its TokenInfo.UserID.
func (c *sessionCap) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := sdkauth.TokenInfoFromContext(r.Context())
		id := r.Header.Get("Mcp-Session-Id")
		switch {
		case ti == nil:
			next.ServeHTTP(w, r)
		case r.Method == http.MethodDelete && id != "":
			next.ServeHTTP(&onHeader{ResponseWriter: w, f: func(status int) {
				if status/100 == 2 {
					c.release(ti.UserID, id)
				}
			}}, r)
		case r.Method == http.MethodPost && id == "":
			if !c.open(ti.UserID) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many open MCP sessions for this identity (at most "+strconv.Itoa(c.max)+
					"): end one (DELETE) or let one idle out before opening another", http.StatusTooManyRequests)
				return
			}
			ow := &onHeader{ResponseWriter: w, f: func(int) { c.opened(ti.UserID, w.Header().Get("Mcp-Session-Id")) }}
			defer ow.fire(http.StatusOK) // an answer never written (a handler that wrote nothing) ends the opening too
			next.ServeHTTP(ow, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// open reports whether key may open one more session, and counts the opening if so.
func (c *sessionCap) open(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The server's sessions are read under the lock, so that none noted since is missed.
	live := map[string]bool{}
	for ss := range c.server.Sessions() {
		live[ss.ID()] = true
	}
	n := c.opening[key]
	for id, k := range c.owner {
		switch {
		case !live[id]:
			delete(c.owner, id)
		case k == key:
			n++
		}
	}
	if n >= c.max {
		return false
	}
	c.opening[key]++
	return true
}

// opened ends key's opening, noting the session it opened, if any ("" for none: a refused
// handshake).
func (c *sessionCap) opened(key, sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opening[key]--; c.opening[key] <= 0 {
		delete(c.opening, key)
	}
	if sessionID != "" {
		c.owner[sessionID] = key
	}
}

// release forgets key's session sessionID, which its DELETE ended.
func (c *sessionCap) release(key, sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner[sessionID] == key {
		delete(c.owner, sessionID)
	}
}

// onHeader calls f once, with the status, just before the response's header is written (by
// WriteHeader, or by the first Write). Flush and http.ResponseController reach the writer
// beneath (the SDK's event streams flush).
type onHeader struct {
	http.ResponseWriter
	f    func(status int)
	done bool
}

func (o *onHeader) fire(status int) {
	if !o.done {
		o.done = true
		o.f(status)
	}
}

func (o *onHeader) WriteHeader(status int) {
	if status >= 200 { // 1xx are interim: the final header is still to come
		o.fire(status)
	}
	o.ResponseWriter.WriteHeader(status)
}

func (o *onHeader) Write(b []byte) (int, error) {
	o.fire(http.StatusOK)
	return o.ResponseWriter.Write(b)
}

func (o *onHeader) Flush() {
	o.fire(http.StatusOK)
	http.NewResponseController(o.ResponseWriter).Flush()
}

func (o *onHeader) Unwrap() http.ResponseWriter { return o.ResponseWriter }
