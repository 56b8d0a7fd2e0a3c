package nginx_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx/nginxtest"
)

// TestGatewayHoldsLongPolls: a status call with `Prefer: wait=N` is held by the service up to N
// seconds (at most 60), so the gateway gives it the long poll's read timeout (75 s), not every
// other call's 5 s, after which nginx answered 504 (and, the call being idempotent, tried the
// next replica, which waited again). A HEAD is answered as the GET is, the wait included
// (server/head.go), so it is a long poll too. The replica here answers after 6 s, past the
// 5 s; the test waits on nginx's real timers: they are what is checked.
func TestGatewayHoldsLongPolls(t *testing.T) {
	const answerAfter = 6 * time.Second
	stop := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Prefer"), "wait=") {
			select {
			case <-time.After(answerAfter):
			case <-stop:
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() { close(stop); upstream.Close() })
	addr := nginxtest.Start(t, strings.TrimPrefix(upstream.URL, "http://"))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+addr+"/ask/v1/asks/t_x", nil)
			req.Header.Set("Prefer", "wait=30")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s with Prefer: wait=30, answered after %s: %d, want the replica's 200", method, answerAfter, resp.StatusCode)
			}
		})
	}
}
