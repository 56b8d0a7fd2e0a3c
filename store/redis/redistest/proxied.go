package redistest

import (
	"testing"

	"github.com/das-ask/ask/internal/faultproxy"
	redisstore "github.com/das-ask/ask/store/redis"
)

// StoreBehindProxy opens a store from a URL, as askd does (go-redis's own timeouts: a 3 s read
// timeout, retries), with every connection to srv through a fault proxy, for the faults a
// client's own timeouts meet (a stalled Redis). o.URL is set here; both close with the test.
func StoreBehindProxy(t testing.TB, srv *Server, o redisstore.Options) (*redisstore.Store, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	o.URL = "redis://" + p.Addr()
	st, err := redisstore.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, p
}
