package source

import (
	"net/http"
	"strconv"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionCap holds each identity to at most max open MCP sessions. The SDK's streamable handler
// has no such limit nor a hook on a session's end, so the cap watches the requests that open
// sessions (a POST with no Mcp-Session-Id), notes whose session each opened from the id it
// answered with, and counts an identity's sessions still among the server's. Until 2026-12-06
// there was no cap: 5,000 initialize calls of one identity held about 52 MB, each session
// living until its 30 min idle timeout. Safe for concurrent use.
type sessionCap struct {
	max    int
	server *mcp.Server
	mu     sync.Mutex
	// owner is the identity (identity.key) that opened each session, by session id; a session
	// the server no longer holds is dropped when next counted.
	owner map[string]string
	// opening is each identity's session-opening requests in flight, counted until they answer.
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
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || ti == nil {
			next.ServeHTTP(w, r)
			return
		}
		key := ti.UserID
		if !c.open(key) {
			http.Error(w, "too many open MCP sessions for this identity (at most "+strconv.Itoa(c.max)+
				"): end one (DELETE) or let one idle out before opening another", http.StatusTooManyRequests)
			return
		}
		defer func() { c.opened(key, w.Header().Get("Mcp-Session-Id")) }()
		next.ServeHTTP(w, r)
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
// handshake, or a request served without a session).
func (c *sessionCap) opened(key, sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opening[key]--; c.opening[key] == 0 {
		delete(c.opening, key)
	}
	if sessionID != "" {
		c.owner[sessionID] = key
	}
}
