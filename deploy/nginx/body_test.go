package nginx_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
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
	body := `{"question":"` + sentinel + strings.Repeat(`\u6f22`, (81920-len(`{"question":"`+sentinel+`"}`))/6) + `"}`
	if len(body) > 81920 || len(body) < 81920-6 {
		t.Fatalf("body of %d bytes, want just under 80 KiB", len(body))
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

// TestGatewayKeepsRefusedBodiesOffDisk: a body over the limit whose length nginx learns only
// as it reads it (chunked over HTTP/1.1, no content-length over HTTP/2) is refused with the
// gateway's 413 before any of it is written to disk. With client_body_buffer_size equal to
// client_max_body_size the buffer filled at the limit and nginx wrote it to a temporary file,
// question and all, before it read past the limit and refused the rest (here, where the
// temporary directory cannot be written, a 500). A client pasting a long document as its
// question sends just that (curl -T - sends Expect: 100-continue and chunks of 65524 bytes, as
// the HTTP/1.1 case does).
func TestGatewayKeepsRefusedBodiesOffDisk(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(upstream.Close)
	up := strings.TrimPrefix(upstream.URL, "http://")
	plainAddr, plainDir := nginxtest.StartIn(t, up)
	tlsAddr, tlsDir, pool := nginxtest.StartTLSIn(t, up)

	judge := func(name, dir string, status int) {
		t.Helper()
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		if strings.Contains(string(log), bodyOnDisk) || strings.Contains(string(log), "client_body/") {
			t.Errorf("%s: nginx wrote a refused request body to disk, or tried to (client_body_buffer_size not above client_max_body_size):\n%s", name, log)
		}
		if status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: status %d, want 413; nginx logged:\n%s", name, status, log)
		}
	}

	// HTTP/1.1, chunked, after a 100 Continue (as curl -T - sends it): a first chunk just
	// under the limit, then one that passes it.
	first, second := strings.Repeat("a", 81908), strings.Repeat("a", 4492)
	status := postChunked(t, plainAddr, first, second)
	judge("HTTP/1.1 chunked", plainDir, status)

	// HTTP/2: a reader of unknown length goes without a content-length.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	body := `{"question":"` + strings.Repeat("a", 90000) + `"}`
	hreq, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+tlsAddr+"/ask/v1/conversations/c_1/asks",
		io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := h2.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.ProtoMajor != 2 || hreq.ContentLength != 0 {
		t.Fatalf("HTTP/2 case went over %s with length %d", resp.Proto, hreq.ContentLength)
	}
	judge("HTTP/2 without content-length", tlsDir, resp.StatusCode)
}

// TestGatewayKeepsChunkedBodiesOffDisk: a body the service takes, just under the limit, sent
// chunked in 4 KiB chunks (the framing adds some 130 bytes nginx holds with it) stays in
// memory: a buffer of exactly the limit sent it to a temporary file.
func TestGatewayKeepsChunkedBodiesOffDisk(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(upstream.Close)
	addr, dir := nginxtest.StartIn(t, strings.TrimPrefix(upstream.URL, "http://"))
	body := `{"question":"` + strings.Repeat("a", 81920-len(`{"question":""}`)-16) + `"}`
	var chunks []string
	for rest := body; rest != ""; {
		n := min(4096, len(rest))
		chunks, rest = append(chunks, rest[:n]), rest[n:]
	}
	status := postChunked(t, addr, chunks...)
	log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	if status != http.StatusAccepted || strings.Contains(string(log), bodyOnDisk) || strings.Contains(string(log), "client_body/") {
		t.Errorf("a %d-byte body in 4 KiB chunks: %d (want 202); nginx logged:\n%s", len(body), status, log)
	}
}

// postChunked POSTs chunks to nginx at addr as one chunked body after a 100 Continue (as
// curl -T - does) and returns the final status.
func postChunked(t *testing.T, addr string, chunks ...string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, "POST /ask/v1/conversations/c_1/asks HTTP/1.1\r\nHost: ask\r\nContent-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("chunked POST: %v %v, want 100 Continue", resp, err)
	}
	var b strings.Builder
	for _, c := range chunks {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(c), c)
	}
	b.WriteString("0\r\n\r\n")
	done := make(chan struct{})
	go func() { // nginx may answer before it has read it all
		defer close(done)
		_, _ = io.WriteString(conn, b.String())
	}()
	t.Cleanup(func() { _ = conn.Close(); <-done })
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
