package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/das-ask/ask/server"
)

// TestViolationWording: a 400's errors say, in the contract's terms, what the request broke:
// no Go type or library wording, and a repeated one-valued parameter is named as repeated
// (Prefer, a list, is combined instead).
func TestViolationWording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{})
		cid := h.conv(alice)
		ticket := h.ask(alice, cid, "a question")
		h.events(alice, ticket)
		events := "/ask/v1/asks/" + ticket + "/events"

		for _, tc := range []struct {
			name, method, path, body string
			hdr                      []string
			want                     string
		}{
			{"null conversation request", http.MethodPost, "/ask/v1/conversations", `null`, nil, "body: value must be an object"},
			{"array conversation request", http.MethodPost, "/ask/v1/conversations", `[]`, nil, "body: value must be an object"},
			{"webhook url beyond float64", http.MethodPost, "/ask/v1/conversations/" + cid + "/asks", `{"question":"q","webhook":{"url":1e999}}`, nil,
				"body/webhook/url: value must be a string"},
			{"repeated after", http.MethodGet, events + "?after=3&after=4", "", nil, `parameter "after" in query: must be given once, not repeated`},
			{"repeated Last-Event-ID", http.MethodGet, events, "", []string{"Last-Event-ID", "1", "Last-Event-ID", "2"},
				`parameter "Last-Event-ID" in header: must be given once, not repeated`},
			{"repeated Idempotency-Key", http.MethodPost, "/ask/v1/conversations", `{}`, []string{"Idempotency-Key", "a", "Idempotency-Key", "b"},
				`parameter "Idempotency-Key" in header: must be given once, not repeated`},
			{"repeated Idempotency-Key on an ask", http.MethodPost, "/ask/v1/conversations/" + cid + "/asks", `{"question":"q"}`,
				[]string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, `parameter "Idempotency-Key" in header: must be given once, not repeated`},
			{"repeated after, HEAD", http.MethodHead, events + "?after=3&after=4", "", nil, ""},
			// Go's query parser drops a pair with a ';': the cursor was lost, and the stream
			// replayed from seq 1 what the client had.
			{"a semicolon after the cursor", http.MethodGet, events + "?after=3;x=1", "", nil,
				`query: a ";" separates nothing; parameters are separated by "&" (in a value, write it %3B)`},
			{"a semicolon before the cursor", http.MethodGet, events + "?x=1;after=3", "", nil,
				`query: a ";" separates nothing; parameters are separated by "&" (in a value, write it %3B)`},
			{"a semicolon, HEAD", http.MethodHead, events + "?after=3;x=1", "", nil, ""},
			// It drops a pair with a malformed escape too: ?after=12% replayed from seq 1.
			{"a trailing percent in the cursor", http.MethodGet, events + "?after=12%", "", nil,
				`query: a "%" that does not begin an escape of two hex digits (in a value, write it %25)`},
			{"a malformed escape for the cursor", http.MethodGet, events + "?after=%zz", "", nil,
				`query: a "%" that does not begin an escape of two hex digits (in a value, write it %25)`},
			{"a malformed escape beside a cursor", http.MethodGet, events + "?after=5&after=%zz", "", nil,
				`query: a "%" that does not begin an escape of two hex digits (in a value, write it %25)`},
			{"a malformed escape beside the header", http.MethodGet, events + "?x=%zz", "", []string{"Last-Event-ID", "1"},
				`query: a "%" that does not begin an escape of two hex digits (in a value, write it %25)`},
			{"a malformed escape, HEAD", http.MethodHead, events + "?after=12%", "", nil, ""},
			{"more parameters than Go's parser reads", http.MethodGet, events + "?after=5" + strings.Repeat("&", 10000), "", nil, "query: too many parameters"},
		} {
			req := newReq(t, tc.method, tc.path, alice, tc.body)
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Add(tc.hdr[i], tc.hdr[i+1])
			}
			resp := h.do(req)
			body := readBody(t, resp)
			if tc.method == http.MethodHead {
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%s: %d, want 400", tc.name, resp.StatusCode)
				}
				continue
			}
			p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusBadRequest)
			if p.Errors == nil || !slices.Contains(*p.Errors, tc.want) {
				t.Errorf("%s: errors %v, want %q among them", tc.name, p.Errors, tc.want)
			}
			for _, leak := range []string{"json.Number", "float64", "nullable", "Invalid format", "Expected one value"} {
				if strings.Contains(string(body), leak) {
					t.Errorf("%s: the problem says %q: %s", tc.name, leak, body)
				}
			}
		}
		// A cursor of 19 digits is digits only and fits an int64, but not the contract's
		// ^[0-9]{1,18}$: the problem says the bound it broke (the header's, the validator's
		// pattern; the query's, read as an integer by the validator, the service's detail).
		for _, tc := range []struct {
			hdr  []string
			want string
		}{
			{nil, "after must be a seq: 1 to 18 decimal digits"},
			{[]string{"Last-Event-ID", "1234567890123456789"}, "{1,18}"},
		} {
			path := events
			if tc.hdr == nil {
				path += "?after=1234567890123456789"
			}
			req := newReq(t, http.MethodGet, path, alice, "")
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			resp := h.do(req)
			body := readBody(t, resp)
			problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusBadRequest)
			if !strings.Contains(string(body), tc.want) {
				t.Errorf("a 19-digit cursor (%v): %s, want %q in it", tc.hdr, body, tc.want)
			}
		}
		// An unknown property is named, but a name as long as the body is not repeated whole.
		long := strings.Repeat("ü", 5000)
		resp := h.do(newReq(t, http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", alice, `{"question":"q","`+long+`":1}`))
		body := readBody(t, resp)
		p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusBadRequest)
		want := `body: property "` + strings.Repeat("ü", 64) + `"… (cut at 64 characters) is unsupported`
		if p.Errors == nil || !slices.Contains(*p.Errors, want) || len(body) > 1024 {
			t.Errorf("a long unknown property: %d bytes: %.300s, want %q among the errors", len(body), body, want)
		}
		// Many unknown properties are not all repeated back: the problem lists a few and says
		// how many more there were, so a body of short names does not come back several times
		// its size.
		var many strings.Builder
		many.WriteString(`{"question":"q"`)
		for i := range 2000 {
			fmt.Fprintf(&many, `,"k%d":0`, i)
		}
		many.WriteString(`}`)
		resp = h.do(newReq(t, http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", alice, many.String()))
		body = readBody(t, resp)
		p = problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusBadRequest)
		if p.Errors == nil || len(*p.Errors) > 10 || len(body) > 1024 ||
			!slices.Contains(*p.Errors, "1991 more violations not listed") {
			n := 0
			if p.Errors != nil {
				n = len(*p.Errors)
			}
			t.Errorf("2000 unknown properties: %d errors in %d bytes (%d bytes asked), want at most 10 saying how many more, in at most 1 KiB: %.300s",
				n, len(body), many.Len(), body)
		}
		resp = h.do(newReq(t, http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", alice, `{"question":"q","qestion":1}`))
		p = problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusBadRequest)
		if want := `body: property "qestion" is unsupported`; p.Errors == nil || !slices.Contains(*p.Errors, want) {
			t.Errorf("a short unknown property: errors %v, want %q among them", p.Errors, want)
		}
		// Prefer is a list (RFC 7240): two lines of it are one list, read in order, and the first
		// wait in it is the one applied, not a repeated parameter.
		req := newReq(t, http.MethodGet, "/ask/v1/asks/"+ticket, alice, "")
		req.Header.Add("Prefer", "respond-async")
		req.Header.Add("Prefer", "wait=1, wait=2")
		resp = h.do(req)
		if body := readBody(t, resp); resp.StatusCode != http.StatusOK || resp.Header.Get("Preference-Applied") != "wait=1" {
			t.Errorf("two Prefer lines: %d, Preference-Applied %q: %s", resp.StatusCode, resp.Header.Get("Preference-Applied"), body)
		}
	})
}
