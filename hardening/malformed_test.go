package hardening_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
)

// TestMalformedHTTPIsTheDocumentedException: a request the HTTP server cannot read as HTTP —
// a malformed escape in its target, a control character in a header value, an Expect it does
// not know — is refused by net/http before the service sees it, so its answer is not
// problem+json. The contract promises problem+json for every error but what its description
// names, so the description must name these, with the statuses askd sends; each request here
// gets what the description says, and a request id none (no handler ran).
func TestMalformedHTTPIsTheDocumentedException(t *testing.T) {
	s, _ := startStack(t, stack.Options{})
	addr := strings.TrimPrefix(s.AskURL, "http://")
	addr, base, _ := strings.Cut(addr, "/")
	base = "/" + base
	for _, tt := range []struct {
		what, raw string
		status    int
	}{
		{"a malformed escape in the path", "GET " + base + "/v1/asks/t_%zz HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"a truncated escape in the path", "GET " + base + "/v1/asks/t_%4 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"a control character in Authorization", "GET " + base + "/v1/asks/t_x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\x01b\r\n\r\n", http.StatusBadRequest},
		{"a control character in Last-Event-ID", "GET " + base + "/v1/asks/t_x/events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 1\x01\r\n\r\n", http.StatusBadRequest},
		{"an unknown Expect", "POST " + base + "/v1/conversations HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Length: 2\r\n\r\n{}", http.StatusExpectationFailed},
	} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, tt.raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.what, err)
		}
		_ = resp.Body.Close()
		_ = c.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != tt.status || ct == "application/problem+json" {
			t.Errorf("%s: %d %s, want %d from the HTTP layer", tt.what, resp.StatusCode, ct, tt.status)
		}
	}
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	desc := spec.Info.Description
	for _, want := range []string{"`431`", "not well-formed HTTP", "`400`", "`417`", "`text/plain`"} {
		if !strings.Contains(desc, want) {
			t.Errorf("the contract's description does not name %s among the HTTP layer's refusals", want)
		}
	}
}

// TestHeaderBlockBoundIsTheDocumentedOne: the contract's description gives the largest header
// block askd accepts, request line included, as 1 MiB and 4 KiB (net/http's default
// MaxHeaderBytes and the 4 KiB it adds); it said 1 MiB, and a block 4 KiB over that was served.
// A block of exactly that size reaches the service (its 401: no bearer); one byte more is the
// HTTP layer's 431.
func TestHeaderBlockBoundIsTheDocumentedOne(t *testing.T) {
	s, _ := startStack(t, stack.Options{})
	addr := strings.TrimPrefix(s.AskURL, "http://")
	addr, base, _ := strings.Cut(addr, "/")
	const bound = 1<<20 + 4<<10
	for _, tt := range []struct {
		size   int
		status int
	}{{bound, http.StatusUnauthorized}, {bound + 1, http.StatusRequestHeaderFieldsTooLarge}} {
		head := "GET /" + base + "/v1/asks/t_x HTTP/1.1\r\nHost: x\r\nX-Pad: "
		raw := head + strings.Repeat("a", tt.size-len(head)-len("\r\n\r\n")) + "\r\n\r\n"
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a header block of %d bytes: %v", tt.size, err)
		}
		_ = resp.Body.Close()
		_ = c.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("a header block of %d bytes: %d, want %d", tt.size, resp.StatusCode, tt.status)
		}
	}
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	if desc := strings.Join(strings.Fields(spec.Info.Description), " "); !strings.Contains(desc, "(1 MiB and 4 KiB in `askd`, request line included") {
		t.Errorf("the contract's description does not give askd's header block bound as 1 MiB and 4 KiB")
	}
}
