package nginx_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/das-ask/ask/deploy/nginx/nginxtest"
)

// bodyOnDisk is what nginx's error log says (at warn) when it writes a request body to a
// temporary file rather than holding it in memory.
const bodyOnDisk = "a client request body is buffered to a temporary file"

// TestGatewayKeepsRequestBodiesOffDisk: a POST body the service accepts, up to its limit (64
// KiB), stays in nginx's memory on its way to the replica, over HTTP/1.1 and HTTP/2, keyed or
// not. A createAsk body is the question, which is never to be written to disk; nginx's default
// buffer (8 or 16 KiB) sent any body above it to a temporary file (a question of 3,000 CJK
// characters, JSON-escaped, is 18 KB).
func TestGatewayKeepsRequestBodiesOffDisk(t *testing.T) {
	const sentinel = "QSENT-gateway-body-7f3c"
	var got []int
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, len(b)) // the handler runs once at a time: one client, in turn
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(upstream.Close)
	up := strings.TrimPrefix(upstream.URL, "http://")

	// The largest body the service takes: DAS_ASK_MAX_BODY_BYTES's default, nginx's
	// client_max_body_size.
	body := `{"question":"` + sentinel + strings.Repeat(`\u6f22`, (65536-len(`{"question":"`+sentinel+`"}`))/6) + `"}`
	if len(body) > 65536 || len(body) < 65536-6 {
		t.Fatalf("body of %d bytes, want just under 64 KiB", len(body))
	}

	plainAddr, plainDir := nginxtest.StartIn(t, up)
	tlsAddr, tlsDir, pool := nginxtest.StartTLSIn(t, up)
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	for _, gw := range []struct {
		name, base, dir string
		client          *http.Client
		proto           int
	}{
		{"HTTP/1.1", "http://" + plainAddr, plainDir, http.DefaultClient, 1},
		{"HTTP/2", "https://" + tlsAddr, tlsDir, h2, 2},
	} {
		for _, key := range []string{"", "k-1"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.base+"/ask/v1/conversations/c_1/asks", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("Idempotency-Key", key) // the keyed location, which may pass it on
			}
			resp, err := gw.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted || resp.ProtoMajor != gw.proto {
				log, _ := os.ReadFile(filepath.Join(gw.dir, "error.log"))
				t.Fatalf("%s key %q: %s over %s, want 202 over HTTP/%d; nginx logged:\n%s", gw.name, key, resp.Status, resp.Proto, gw.proto, log)
			}
		}
		log, err := os.ReadFile(filepath.Join(gw.dir, "error.log"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), bodyOnDisk) {
			t.Errorf("%s: nginx wrote a request body to disk (client_body_buffer_size below client_max_body_size):\n%s", gw.name, log)
		}
	}
	for _, n := range got {
		if n != len(body) {
			t.Errorf("the replica got a body of %d bytes, want %d", n, len(body))
		}
	}
}
