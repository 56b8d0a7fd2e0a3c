//go:build !fuzzsmoke

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// The requests of TestContract, operation by operation.

const (
	convs    = "/ask/v1/conversations"
	question = `{"question":"What is an incident?"}`
)

func asksOf(cid string) string  { return convs + "/" + cid + "/asks" }
func statusOf(tk string) string { return "/ask/v1/asks/" + tk }
func eventsOf(tk string) string { return statusOf(tk) + "/events" }
func cancelOf(tk string) string { return statusOf(tk) + "/cancel" }

// replayed wants Idempotent-Replayed: true, or wants it absent.
func replayed(want bool) func(rawResult) error {
	return func(r rawResult) error {
		got := r.resp.Header.Values("Idempotent-Replayed")
		if want && (len(got) != 1 || got[0] != "true") || !want && len(got) != 0 {
			return fmt.Errorf("Idempotent-Replayed %q, want it %v", got, want)
		}
		return nil
	}
}

// located wants Location to be the created resource's address the body gives.
func located(r rawResult) error {
	if r.resp.StatusCode >= 300 {
		return nil
	}
	var b struct {
		AsksURL   string `json:"asks_url"`
		StatusURL string `json:"status_url"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		return err
	}
	want := b.AsksURL + b.StatusURL
	if got := r.resp.Header.Get("Location"); got == "" || got != want {
		return fmt.Errorf("Location %q, want %q", got, want)
	}
	return nil
}

// applied wants Preference-Applied to be want ("" for absent).
func applied(want string) func(rawResult) error {
	return func(r rawResult) error {
		if got := r.resp.Header.Get("Preference-Applied"); got != want {
			return fmt.Errorf("Preference-Applied %q, want %q", got, want)
		}
		return nil
	}
}

// do sends and checks p, and returns the response.
func (c *conformer) do(p probe) rawResult {
	c.t.Helper()
	c.n++
	r := c.send(p)
	c.check(p, r)
	return r
}

// newConv creates a conversation for oid and returns its id.
func (c *conformer) newConv(oid string) string {
	c.t.Helper()
	r := c.do(probe{name: "setup: conversation", op: "createConversation", method: http.MethodPost, target: convs,
		auth: c.bearer(oid), ct: "application/json", body: "{}", want: http.StatusCreated})
	var conv gen.Conversation
	if err := json.Unmarshal(r.body, &conv); err != nil || conv.Id == "" {
		c.t.Fatalf("setup: conversation: %v %s", err, r.body)
	}
	return conv.Id
}

// newAsk asks q in cid as oid and returns the ticket.
func (c *conformer) newAsk(oid, cid, q string) string {
	c.t.Helper()
	b, _ := json.Marshal(gen.AskRequest{Question: q})
	c.secret = append(c.secret, q)
	r := c.do(probe{name: "setup: ask", op: "createAsk", method: http.MethodPost, target: asksOf(cid),
		auth: c.bearer(oid), ct: "application/json", body: string(b), want: http.StatusAccepted})
	var tk gen.Ticket
	if err := json.Unmarshal(r.body, &tk); err != nil || tk.Ticket == "" {
		c.t.Fatalf("setup: ask: %v %s", err, r.body)
	}
	return tk.Ticket
}

// waitDone long-polls the ticket until its run has ended.
func (c *conformer) waitDone(oid, ticket string) {
	c.t.Helper()
	r := c.do(probe{name: "setup: wait", op: "getAsk", method: http.MethodGet, target: statusOf(ticket),
		auth: c.bearer(oid), hdr: []string{"Prefer", "wait=30"}, want: http.StatusOK})
	var st gen.AskStatus
	if err := json.Unmarshal(r.body, &st); err != nil || st.Done == nil {
		c.t.Fatalf("setup: the run did not end: %v %s", err, r.body)
	}
}

// authProbes are the bearers that are missing, garbled or not valid for this service.
func (c *conformer) authProbes(base probe) []probe {
	mint := func(cl idp.Claims) string {
		tok, err := c.idp.Mint(cl)
		if err != nil {
			c.t.Fatal(err)
		}
		c.secret = append(c.secret, tok)
		c.tokens = append(c.tokens, tok)
		return tok
	}
	forged, err := c.idp.Forge(idp.Claims{OID: "alice"})
	if err != nil {
		c.t.Fatal(err)
	}
	c.secret = append(c.secret, forged)
	c.tokens = append(c.tokens, forged)
	valid := c.token("alice")
	cases := []struct{ name, auth string }{
		{"no bearer", ""},
		{"empty bearer", "Bearer"},
		{"bearer and a space", "Bearer "},
		{"garbled bearer", "Bearer not.a.jwt"},
		{"bearer of control characters", "Bearer \x01\x02"}, // the HTTP layer's 400
		{"basic credentials", "Basic YWxpY2U6c2VjcmV0"},
		{"expired bearer", "Bearer " + mint(idp.Claims{OID: "alice", Expired: true})},
		{"bearer for another audience", "Bearer " + mint(idp.Claims{OID: "alice", Audience: "other"})},
		{"bearer without the scope", "Bearer " + mint(idp.Claims{OID: "alice", Scope: "other"})},
		{"bearer without oid", "Bearer " + mint(idp.Claims{})},
		{"bearer not yet valid", "Bearer " + mint(idp.Claims{OID: "alice", NotBefore: time.Now().Add(time.Hour)})},
		{"bearer from another issuer", "Bearer " + mint(idp.Claims{OID: "alice", Issuer: "https://evil.example"})},
		{"forged signature", "Bearer " + forged},
		{"truncated signature", "Bearer " + valid[:len(valid)-5]},
		{"huge bearer", "Bearer " + strings.Repeat("A", 64<<10)},
	}
	var out []probe
	for _, a := range cases {
		p := base
		p.name = base.name + ": " + a.name
		p.auth = a.auth
		p.want = http.StatusUnauthorized
		if strings.ContainsAny(a.auth, "\x01") || malformedBearer(a.auth) {
			p.want = http.StatusBadRequest // the HTTP layer's; the Bearer scheme with no token (invalid_request)
		}
		out = append(out, p)
	}
	// The scheme is case-insensitive and followed by one or more spaces (RFC 9110 §11.1,
	// §11.4); a valid bearer so spelled is accepted (the status is then the operation's).
	for _, a := range []struct{ name, auth string }{
		{"scheme in lower case", "bearer " + valid},
		{"scheme in capitals", "BEARER " + valid},
		{"two spaces after the scheme", "Bearer  " + valid},
		{"trailing space", "Bearer " + valid + " "},
	} {
		p := base
		p.name, p.auth, p.want = base.name+": "+a.name, a.auth, 0
		p.also = func(r rawResult) error {
			if r.resp.StatusCode == http.StatusUnauthorized {
				return fmt.Errorf("a valid bearer refused")
			}
			return nil
		}
		out = append(out, p)
	}
	tab := base
	// A tab is no separator of scheme and token (RFC 9110 §11.4): the Bearer scheme with no
	// token after a space, malformed (RFC 6750 §3.1's invalid_request).
	tab.name, tab.auth, tab.want = base.name+": tab after the scheme", "Bearer\t"+valid, http.StatusBadRequest
	out = append(out, tab)
	boom := base
	boom.name, boom.auth, boom.want = base.name+": the authenticator panics", panicBearer, http.StatusInternalServerError
	boom.also = func(r rawResult) error {
		var pr gen.Problem
		if err := json.Unmarshal(r.body, &pr); err != nil || pr.Detail == nil || *pr.Detail != "internal error" {
			return fmt.Errorf("a 500 that says more than internal error: %s", r.body)
		}
		return nil
	}
	out = append(out, boom)
	two := base
	two.name, two.want = base.name+": two Authorization headers", http.StatusBadRequest
	two.hdr = append(slices.Clone(base.hdr), "Authorization", "Bearer "+valid)
	out = append(out, two)
	return out
}

// methodProbes: the methods the path has no operation for are 405 with Allow; OPTIONS and
// TRACE too.
func methodProbes(name, op, target string, not []string) []probe {
	var out []probe
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, http.MethodTrace, "PROPFIND"} {
		if slices.Contains(not, m) {
			continue
		}
		want := http.StatusMethodNotAllowed
		if m == http.MethodOptions {
			want = http.StatusNoContent
		}
		out = append(out, probe{name: name + ": method " + m, op: op, method: m, target: target, want: want})
	}
	return out
}

// idProbes: path parameters malformed, too long, encoded or dotted, for a ticket route
// (target makes the path from the id, as sent).
func idProbes(name, op, method string, target func(string) string, auth string) []probe {
	cases := []struct {
		what, id string
		want     int
	}{
		{"unknown id", "t_UNKNOWN0000000000000000000", http.StatusNotFound},
		{"id of 64 characters", strings.Repeat("a", 64), http.StatusNotFound},
		{"id of 65 characters", strings.Repeat("a", 65), http.StatusBadRequest},
		{"id of 8 KiB", strings.Repeat("a", 8<<10), http.StatusBadRequest},
		{"id with a dot", "t.x", http.StatusBadRequest},
		{"id with an encoded slash", "a%2Fb", 0},
		{"id with an encoded space", "a%20b", http.StatusBadRequest},
		{"id with a non-ASCII letter", "caf%C3%A9", http.StatusBadRequest},
		{"id with an encoded NUL", "a%00b", http.StatusBadRequest},
		{"id with an encoded newline", "a%0Ab", http.StatusBadRequest},
		{"id that is an encoded dot segment", "%2e%2e", http.StatusNotFound},
		{"id that is a dot segment", "..", http.StatusNotFound},
		{"empty id", "", http.StatusNotFound},
		{"id with a malformed escape", "a%zzb", http.StatusBadRequest},
		{"id with a query-looking suffix", "abc%3Fx=1", http.StatusBadRequest},
		{"id with a double-encoded slash", "a%252Fb", http.StatusBadRequest},
		{"id with a matrix parameter", "abc;x=1", http.StatusBadRequest},
		{"id with an encoded matrix parameter", "abc%3Bx=1", http.StatusBadRequest},
		{"id with a plus", "a+b", http.StatusBadRequest},
	}
	var out []probe
	for _, k := range cases {
		p := probe{name: name + ": " + k.what, op: op, method: method, target: target(k.id), auth: auth, want: k.want}
		if method == http.MethodPost {
			p.ct, p.body = "application/json", "{}"
		}
		if k.what == "empty id" || strings.HasPrefix(k.what, "id that is") {
			p.op = "" // no operation has this path
		}
		out = append(out, p)
	}
	return out
}

func (c *conformer) probes() []probe {
	alice, bob := c.bearer("alice"), c.bearer("bob")

	// State.
	c.cid = c.newConv("alice")
	c.ticket = c.newAsk("alice", c.cid, "What is an incident?")
	c.waitDone("alice", c.ticket)
	c.runCID = c.newConv("alice")
	c.runTicket = c.newAsk("alice", c.runCID, holdQuestion)

	var ps []probe
	add := func(p ...probe) { ps = append(ps, p...) }

	// ---- createConversation
	cc := probe{name: "createConversation", op: "createConversation", method: http.MethodPost, target: convs, auth: alice, ct: "application/json", body: "{}"}
	ccv := cc.variant
	add(
		ccv("valid", func(p *probe) { p.also = located }, http.StatusCreated),
		ccv("query string", func(p *probe) { p.target += "?x=1" }, http.StatusCreated),
		ccv("empty query string", func(p *probe) { p.target += "?" }, http.StatusCreated),
		// '#' cannot be in a request target (RFC 9112 §3.2): it is the path's, which no
		// operation has.
		ccv("fragment in the target", func(p *probe) { p.target += "#f"; p.op = "" }, http.StatusNotFound),
		ccv("absolute-form target", func(p *probe) { p.target = "http://ask.test" + convs }, http.StatusCreated),
		ccv("empty first segment", func(p *probe) { p.target = "/" + convs; p.op = "" }, http.StatusNotFound),
		ccv("gzip-coded body", func(p *probe) {
			p.hdr = []string{"Content-Encoding", "gzip"}
			p.body = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xab\xae\x05\x00\x43\xbf\xa6\xa3\x02\x00\x00\x00"
		}, http.StatusUnsupportedMediaType),
		ccv("two content types", func(p *probe) { p.hdr = []string{"Content-Type", "text/plain"} }, http.StatusBadRequest),
		ccv("two content types, no body", func(p *probe) { p.body = ""; p.hdr = []string{"Content-Type", "application/json"} }, http.StatusBadRequest),
		ccv("no body, no content type", func(p *probe) { p.body, p.ct = "", "" }, http.StatusCreated),
		ccv("empty body with JSON content type", func(p *probe) { p.body = "" }, http.StatusCreated),
		ccv("charset parameter", func(p *probe) { p.ct = "application/json; charset=utf-8" }, http.StatusCreated),
		ccv("content type in capitals", func(p *probe) { p.ct = "Application/JSON" }, http.StatusCreated),
		ccv("body without content type", func(p *probe) { p.ct = "" }, http.StatusUnsupportedMediaType),
		ccv("text/plain", func(p *probe) { p.ct = "text/plain" }, http.StatusUnsupportedMediaType),
		ccv("form", func(p *probe) { p.ct, p.body = "application/x-www-form-urlencoded", "a=b" }, http.StatusUnsupportedMediaType),
		ccv("garbled content type", func(p *probe) { p.ct = ";;;" }, 0),
		ccv("malformed JSON", func(p *probe) { p.body = "{" }, http.StatusBadRequest),
		ccv("JSON array", func(p *probe) { p.body = "[]" }, http.StatusBadRequest),
		ccv("JSON null", func(p *probe) { p.body = "null" }, http.StatusBadRequest),
		ccv("JSON string", func(p *probe) { p.body = `"x"` }, http.StatusBadRequest),
		ccv("unknown field", func(p *probe) { p.body = `{"colour":"blue"}` }, http.StatusBadRequest),
		ccv("two JSON texts", func(p *probe) { p.body = `{} {}` }, http.StatusBadRequest),
		ccv("byte order mark", func(p *probe) { p.body = "\ufeff{}" }, http.StatusBadRequest),
		ccv("invalid UTF-8", func(p *probe) { p.body = "{\"\xff\":1}" }, http.StatusBadRequest),
		ccv("whitespace only", func(p *probe) { p.body = "   " }, http.StatusBadRequest),
		ccv("deeply nested", func(p *probe) { p.body = strings.Repeat("[", 2000) + strings.Repeat("]", 2000) }, http.StatusBadRequest),
		ccv("body over the limit", func(p *probe) { p.body = `{"x":"` + strings.Repeat("x", 5000) + `"}` }, http.StatusRequestEntityTooLarge),
		ccv("declared length over the limit", func(p *probe) { p.body = "{}"; p.hdr = []string{"Content-Length", "5000"} }, http.StatusRequestEntityTooLarge),
		ccv("a body that stops short", func(p *probe) { p.body = "{}"; p.hdr = []string{"Content-Length", "100"} }, http.StatusRequestTimeout),
		ccv("chunked body", func(p *probe) { p.body = "2\r\n{}\r\n0\r\n\r\n"; p.hdr = []string{"Transfer-Encoding", "chunked"} }, http.StatusCreated),
		ccv("header block too large", func(p *probe) { p.hdr = []string{"X-Big", strings.Repeat("b", 1<<20+8192)} }, http.StatusRequestHeaderFieldsTooLarge),
		ccv("Accept: text/html", func(p *probe) { p.hdr = []string{"Accept", "text/html"} }, http.StatusCreated),
	)
	add(c.authProbes(cc)...)
	// Idempotency-Key.
	key := func(name, k, body string, want int, also ...func(rawResult) error) probe {
		return ccv("Idempotency-Key "+name, func(p *probe) {
			p.hdr = []string{"Idempotency-Key", k}
			p.body = body
			if len(also) > 0 {
				p.also = also[0]
			}
		}, want)
	}
	add(
		key("first use", "conv-key-1", "{}", http.StatusCreated, replayed(false)),
		key("replayed", "conv-key-1", "{}", http.StatusCreated, replayed(true)),
		key("quoted, the same key", `"conv-key-1"`, "{}", http.StatusCreated, replayed(true)),
		key("replayed with the body's whitespace changed", "conv-key-1", "{ }", http.StatusCreated, replayed(true)),
		// The body is optional and names nothing: none is the same request as {}.
		key("replayed without the optional body", "conv-key-1", "", http.StatusCreated, replayed(true)),
		key("empty", "", "{}", http.StatusBadRequest),
		key("empty quoted", `""`, "{}", http.StatusBadRequest),
		key("with a space", "a b", "{}", http.StatusBadRequest),
		key("non-ASCII", "clé", "{}", http.StatusBadRequest),
		key("of 255 characters", strings.Repeat("k", 255), "{}", http.StatusCreated),
		key("of 256 characters", strings.Repeat("k", 256), "{}", http.StatusBadRequest),
		key("half quoted", `"abc`, "{}", http.StatusBadRequest),
		key("refused first", "conv-key-2", `{"x":1}`, http.StatusBadRequest),
		key("after a refusal: processed afresh", "conv-key-2", "{}", http.StatusCreated, replayed(false)),
		ccv("Idempotency-Key of another identity", func(p *probe) {
			p.hdr = []string{"Idempotency-Key", "conv-key-1"}
			p.auth = bob
			p.also = replayed(false)
		}, http.StatusCreated),
		ccv("two Idempotency-Keys", func(p *probe) { p.hdr = []string{"Idempotency-Key", "k-a", "Idempotency-Key", "k-b"} }, http.StatusBadRequest),
	)
	add(methodProbes("conversations", "createConversation", convs, []string{http.MethodPost})...)
	add(probe{name: "conversations: HEAD", op: "createConversation", method: http.MethodHead, target: convs, auth: alice, want: http.StatusMethodNotAllowed})
	// 429: an identity at its cap of conversations.
	for range 150 {
		c.newConv("dave")
	}
	add(probe{name: "createConversation: over the identity's cap", op: "createConversation", method: http.MethodPost, target: convs,
		auth: c.bearer("dave"), ct: "application/json", body: "{}", want: http.StatusTooManyRequests})

	// ---- createAsk
	fresh := func() string { return c.newConv("alice") }
	ca := func(name, body string, edit func(*probe), want int) probe {
		p := probe{name: "createAsk: " + name, op: "createAsk", method: http.MethodPost, target: asksOf(fresh()), auth: alice, ct: "application/json", body: body, want: want}
		if edit != nil {
			edit(&p)
		}
		return p
	}
	c.secret = append(c.secret, "What is an incident?", "¿Qué es un incidente? 事件 😀", strings.Repeat("q", 4000))
	add(
		ca("valid", question, func(p *probe) { p.also = located }, http.StatusAccepted),
		ca("unicode question", `{"question":"¿Qué es un incidente? 事件 😀"}`, nil, http.StatusAccepted),
		ca("escaped control characters", `{"question":"a\u0001b\u0000c\n"}`, nil, 0),
		ca("raw control character", "{\"question\":\"a\x01b\"}", nil, http.StatusBadRequest),
		ca("lone surrogate", `{"question":"\ud800"}`, nil, http.StatusBadRequest),
		ca("invalid UTF-8", "{\"question\":\"\xc3\x28\"}", nil, http.StatusBadRequest),
		ca("question of 4000 characters", `{"question":"`+strings.Repeat("q", 4000)+`"}`, nil, http.StatusAccepted),
		ca("question of 4001 characters", `{"question":"`+strings.Repeat("q", 4001)+`"}`, nil, http.StatusBadRequest),
		ca("body over the limit", `{"question":"`+strings.Repeat("q", 5000)+`"}`, nil, http.StatusRequestEntityTooLarge),
		ca("empty body", "", nil, http.StatusBadRequest),
		ca("malformed JSON", `{"question":`, nil, http.StatusBadRequest),
		ca("JSON array", `["q"]`, nil, http.StatusBadRequest),
		ca("empty object", `{}`, nil, http.StatusBadRequest),
		ca("unknown field", `{"question":"q?","colour":"blue"}`, nil, http.StatusBadRequest),
		ca("field in other case", `{"Question":"q?"}`, nil, http.StatusBadRequest),
		ca("question twice", `{"question":"a?","question":"b?"}`, nil, http.StatusBadRequest),
		ca("name spelled with an escape", `{"\u0071uestion":"What is an incident?"}`, nil, http.StatusAccepted),
		ca("question twice, once escaped", `{"question":"a?","\u0071uestion":"b?"}`, nil, http.StatusBadRequest),
		ca("webhook url twice, once escaped", `{"question":"q?","webhook":{"url":"`+c.hooks.URL()+`/hooks/a","\u0075rl":"https://evil.example/"}}`, nil, http.StatusBadRequest),
		ca("raw NUL byte", "{\"question\":\"a\x00b\"}", nil, http.StatusBadRequest),
		ca("deeply nested webhook", `{"question":"q?","webhook":{"url":`+strings.Repeat("[", 1900)+strings.Repeat("]", 1900)+`}}`, nil, http.StatusBadRequest),
		ca("question a number", `{"question":42}`, nil, http.StatusBadRequest),
		ca("question huge number", `{"question":1e99999}`, nil, http.StatusBadRequest),
		ca("question an object", `{"question":{"a":1}}`, nil, http.StatusBadRequest),
		ca("question null", `{"question":null}`, nil, http.StatusBadRequest),
		ca("webhook not allowed", `{"question":"q?","webhook":{"url":"https://hooks.example/x"}}`, nil, http.StatusBadRequest),
		ca("webhook a string", `{"question":"q?","webhook":"https://hooks.example/x"}`, nil, http.StatusBadRequest),
		ca("webhook with an extra field", `{"question":"q?","webhook":{"url":"https://hooks.example/x","secret":"s"}}`, nil, http.StatusBadRequest),
		ca("no content type", question, func(p *probe) { p.ct = "" }, http.StatusUnsupportedMediaType),
		ca("text/plain", question, func(p *probe) { p.ct = "text/plain" }, http.StatusUnsupportedMediaType),
		ca("two content types", question, func(p *probe) { p.hdr = []string{"Content-Type", "text/plain"} }, http.StatusBadRequest),
		ca("the same content type twice", question, func(p *probe) { p.hdr = []string{"Content-Type", "application/json"} }, http.StatusBadRequest),
		ca("problem+json", question, func(p *probe) { p.ct = "application/problem+json" }, http.StatusUnsupportedMediaType),
		ca("charset utf-8", question, func(p *probe) { p.ct = "application/json; charset=utf-8" }, http.StatusAccepted),
		ca("charset latin1", question, func(p *probe) { p.ct = "application/json; charset=iso-8859-1" }, 0),
		ca("unknown conversation", question, func(p *probe) { p.target = asksOf("c_UNKNOWN00000000000000000") }, http.StatusNotFound),
		ca("another identity's conversation", question, func(p *probe) { p.target = asksOf(c.cid); p.auth = bob }, http.StatusNotFound),
		ca("conversation id malformed", question, func(p *probe) { p.target = asksOf("c.x") }, http.StatusBadRequest),
		ca("conversation id of 65 characters", question, func(p *probe) { p.target = asksOf(strings.Repeat("c", 65)) }, http.StatusBadRequest),
		ca("conversation id with an encoded slash", question, func(p *probe) { p.target = asksOf("c%2Fx") }, 0),
		ca("while an ask runs", question, func(p *probe) {
			p.target = asksOf(c.runCID)
			p.also = func(r rawResult) error {
				var pr gen.Problem
				if err := json.Unmarshal(r.body, &pr); err != nil || pr.Ticket == nil || *pr.Ticket != c.runTicket {
					return fmt.Errorf("the 409 does not name the running ticket: %s", r.body)
				}
				return nil
			}
		}, http.StatusConflict),
		ca("chunked body over the limit", "", func(p *probe) {
			p.hdr = []string{"Transfer-Encoding", "chunked"}
			p.body = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", 5000, `{"question":"`+strings.Repeat("q", 4985)+`"}`)
		}, http.StatusRequestEntityTooLarge),
		ca("malformed Content-Length", question, func(p *probe) { p.hdr = []string{"Content-Length", "abc"} }, http.StatusBadRequest),
		ca("a body that stops short", question, func(p *probe) { p.hdr = []string{"Content-Length", "100"} }, http.StatusRequestTimeout),
		ca("webhook with a dot segment", `{"question":"q?","webhook":{"url":"`+c.hooks.URL()+`/hooks/../x"}}`, nil, http.StatusBadRequest),
		ca("webhook with an encoded dot segment", `{"question":"q?","webhook":{"url":"`+c.hooks.URL()+`/hooks/%2e%2e/x"}}`, nil, http.StatusBadRequest),
		ca("webhook with a fragment", `{"question":"q?","webhook":{"url":"`+c.hooks.URL()+`/hooks/a#f"}}`, nil, http.StatusBadRequest),
		ca("webhook with user info", `{"question":"q?","webhook":{"url":"http://u:p@`+strings.TrimPrefix(c.hooks.URL(), "http://")+`/hooks/a"}}`, nil, http.StatusBadRequest),
		ca("webhook URL over 2048 characters", `{"question":"q?","webhook":{"url":"`+c.hooks.URL()+`/hooks/`+strings.Repeat("a", 2048)+`"}}`, nil, http.StatusBadRequest),
		ca("webhook URL empty", `{"question":"q?","webhook":{"url":""}}`, nil, http.StatusBadRequest),
		ca("webhook without url", `{"question":"q?","webhook":{}}`, nil, http.StatusBadRequest),
		ca("header block too large", question, func(p *probe) { p.hdr = []string{"X-Big", strings.Repeat("b", 1<<20+8192)} }, http.StatusRequestHeaderFieldsTooLarge),
		ca("Expect: 100-continue", question, func(p *probe) { p.hdr = []string{"Expect", "100-continue"} }, http.StatusAccepted),
	)
	add(c.authProbes(ca("auth", question, nil, 0))...)
	// Idempotency-Key on createAsk.
	kc := fresh()
	kp := func(name, k, body string, want int, also ...func(rawResult) error) probe {
		p := probe{name: "createAsk: Idempotency-Key " + name, op: "createAsk", method: http.MethodPost, target: asksOf(kc), auth: alice,
			ct: "application/json", body: body, hdr: []string{"Idempotency-Key", k}, want: want}
		if len(also) > 0 {
			p.also = also[0]
		}
		return p
	}
	add(
		kp("first use", "ask-key-1", question, http.StatusAccepted, replayed(false)),
		kp("replayed", "ask-key-1", question, http.StatusAccepted, func(r rawResult) error {
			if err := replayed(true)(r); err != nil {
				return err
			}
			return located(r)
		}),
		func() probe {
			p := kp("reused in another conversation", "ask-key-1", question, http.StatusUnprocessableEntity)
			p.target = asksOf(fresh())
			return p
		}(),
		kp("reused for another question", "ask-key-1", `{"question":"Another?"}`, http.StatusUnprocessableEntity),
		kp("used before on createConversation", "conv-key-1", question, http.StatusUnprocessableEntity),
		kp("with a control character", "a\x7fb", question, http.StatusBadRequest),
		kp("too long", strings.Repeat("k", 300), question, http.StatusBadRequest),
	)
	// Every valid create of a conversation is the same request: a key is reused for another
	// by a create of a conversation under an ask's key.
	add(key("used before on createAsk", "ask-key-1", "{}", http.StatusUnprocessableEntity))
	add(methodProbes("asks", "createAsk", asksOf(c.cid), []string{http.MethodPost})...)
	// 409 without a ticket: a full conversation (MaxTurns 3).
	full := c.newConv("alice")
	for range 3 {
		c.waitDone("alice", c.newAsk("alice", full, "What is an incident?"))
	}
	add(probe{name: "createAsk: conversation full", op: "createAsk", method: http.MethodPost, target: asksOf(full), auth: alice,
		ct: "application/json", body: question, want: http.StatusConflict, also: func(r rawResult) error {
			var pr gen.Problem
			if err := json.Unmarshal(r.body, &pr); err != nil || pr.Ticket != nil {
				return fmt.Errorf("the full conversation's 409 names a ticket: %s", r.body)
			}
			return nil
		}})
	// 429: too many asks in flight.
	for range maxInFlight {
		c.newAsk("erin", c.newConv("erin"), holdQuestion)
	}
	add(probe{name: "createAsk: too many in flight", op: "createAsk", method: http.MethodPost, target: asksOf(c.newConv("erin")), auth: c.bearer("erin"),
		ct: "application/json", body: question, want: http.StatusTooManyRequests})

	// An ask with a webhook: its status shows the delivery, and the delivery is the
	// callback's body, signed.
	arrived := c.hooks.Arrived()
	hooked := c.do(ca("with a webhook", `{"question":"What is an incident?","webhook":{"url":"`+c.hooks.URL()+`/hooks/a"}}`, nil, http.StatusAccepted))
	var hookTicket gen.Ticket
	if err := json.Unmarshal(hooked.body, &hookTicket); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		c.t.Fatal("the webhook was not delivered")
	}
	c.checkDeliveries()

	// ---- getAsk
	ga := probe{name: "getAsk", op: "getAsk", method: http.MethodGet, target: statusOf(c.ticket), auth: alice}
	gav := ga.variant
	add(
		gav("finished", func(*probe) {}, http.StatusOK),
		gav("with a webhook", func(p *probe) {
			p.target = statusOf(hookTicket.Ticket)
			p.also = func(r rawResult) error {
				var st gen.AskStatus
				if err := json.Unmarshal(r.body, &st); err != nil || st.Webhook == nil {
					return fmt.Errorf("no webhook status: %v", err)
				}
				return nil
			}
		}, http.StatusOK),
		gav("running", func(p *probe) { p.target = statusOf(c.runTicket) }, http.StatusOK),
		gav("another identity's", func(p *probe) { p.auth = bob }, http.StatusNotFound),
		gav("HEAD", func(p *probe) { p.method = http.MethodHead }, http.StatusOK),
		gav("HEAD unknown", func(p *probe) { p.method = http.MethodHead; p.target = statusOf("t_nope") }, http.StatusNotFound),
		gav("Prefer wait=0", func(p *probe) { p.hdr = []string{"Prefer", "wait=0"} }, http.StatusOK),
		gav("Prefer wait=abc", func(p *probe) { p.hdr = []string{"Prefer", "wait=abc"}; p.also = applied("") }, 0),
		gav("Prefer wait=-1", func(p *probe) { p.hdr = []string{"Prefer", "wait=-1"}; p.also = applied("") }, 0),
		gav("Prefer wait huge", func(p *probe) { p.hdr = []string{"Prefer", "wait=99999999999999999999999"} }, 0),
		gav("Prefer twice", func(p *probe) { p.hdr = []string{"Prefer", "wait=1", "Prefer", "wait=2"} }, 0),
		gav("Prefer wait=1 on a running ticket", func(p *probe) {
			p.target = statusOf(c.runTicket)
			p.hdr = []string{"Prefer", "wait=1"}
			p.also = applied("wait=1")
		}, http.StatusOK),
		gav("Prefer too long", func(p *probe) { p.hdr = []string{"Prefer", "wait=1, " + strings.Repeat("x", 300)} }, http.StatusBadRequest),
		gav("Prefer unknown", func(p *probe) { p.hdr = []string{"Prefer", "respond-async"} }, http.StatusOK),
		gav("unknown query parameter", func(p *probe) { p.target += "?foo=bar" }, http.StatusOK),
		gav("Accept: text/event-stream", func(p *probe) { p.hdr = []string{"Accept", "text/event-stream"} }, 0),
		gav("Accept: application/json;q=0", func(p *probe) { p.hdr = []string{"Accept", "application/json;q=0"} }, 0),
		gav("with a body", func(p *probe) { p.body, p.ct = "{}", "application/json" }, 0),
		gav("with a body over the limit", func(p *probe) { p.body, p.ct = strings.Repeat("x", 5000), "application/json" }, http.StatusRequestEntityTooLarge),
		gav("with a body that stops short", func(p *probe) { p.body, p.ct = "{}", "application/json"; p.hdr = []string{"Content-Length", "100"} }, http.StatusRequestTimeout),
		gav("header block too large", func(p *probe) { p.hdr = []string{"X-Big", strings.Repeat("b", 1<<20+8192)} }, http.StatusRequestHeaderFieldsTooLarge),
		gav("trailing slash", func(p *probe) { p.target += "/"; p.op = "" }, http.StatusNotFound),
	)
	add(c.authProbes(ga)...)
	add(idProbes("getAsk", "getAsk", http.MethodGet, statusOf, alice)...)
	add(methodProbes("status", "getAsk", statusOf(c.ticket), []string{http.MethodGet})...)

	// ---- streamEvents (a finished ticket's stream ends after done)
	var fin gen.AskStatus
	if r := c.do(probe{name: "setup: last seq", op: "getAsk", method: http.MethodGet, target: statusOf(c.ticket), auth: alice, want: http.StatusOK}); json.Unmarshal(r.body, &fin) != nil {
		c.t.Fatal("setup: last seq")
	}
	last := strconv.FormatInt(fin.LastSeq, 10)
	se := probe{name: "streamEvents", op: "streamEvents", method: http.MethodGet, target: eventsOf(c.ticket), auth: alice}
	sev := se.variant
	add(
		sev("from the start", func(*probe) {}, http.StatusOK),
		sev("after=0", func(p *probe) { p.target += "?after=0" }, http.StatusOK),
		sev("after=2", func(p *probe) { p.target += "?after=2" }, http.StatusOK),
		sev("after beyond the last", func(p *probe) { p.target += "?after=999" }, http.StatusBadRequest),
		sev("after the last", func(p *probe) {
			p.target += "?after=" + last
			p.also = func(r rawResult) error {
				if bytes.Contains(r.body, []byte("\nevent:")) {
					return fmt.Errorf("events after the last: %.200s", r.body)
				}
				return nil
			}
		}, http.StatusOK),
		sev("one beyond the last", func(p *probe) { p.target += "?after=" + strconv.FormatInt(fin.LastSeq+1, 10) }, http.StatusBadRequest),
		sev("Last-Event-ID 0", func(p *probe) { p.hdr = []string{"Last-Event-ID", "0"} }, http.StatusOK),
		sev("after=-1", func(p *probe) { p.target += "?after=-1" }, http.StatusBadRequest),
		sev("after=abc", func(p *probe) { p.target += "?after=abc" }, http.StatusBadRequest),
		sev("after=1.5", func(p *probe) { p.target += "?after=1.5" }, http.StatusBadRequest),
		sev("after empty", func(p *probe) { p.target += "?after=" }, http.StatusBadRequest),
		sev("after beyond int64", func(p *probe) { p.target += "?after=99999999999999999999" }, http.StatusBadRequest),
		sev("after twice", func(p *probe) { p.target += "?after=1&after=2" }, http.StatusBadRequest),
		sev("after=%2B1", func(p *probe) { p.target += "?after=%2B1" }, http.StatusBadRequest), // digits only, as Last-Event-ID
		sev("after=-0", func(p *probe) { p.target += "?after=-0" }, http.StatusBadRequest),
		sev("after=1e0", func(p *probe) { p.target += "?after=1e0" }, http.StatusBadRequest),
		sev("after=1.0", func(p *probe) { p.target += "?after=1.0" }, http.StatusBadRequest),
		sev("after=0x1", func(p *probe) { p.target += "?after=0x1" }, http.StatusBadRequest),
		sev("after=01", func(p *probe) { p.target += "?after=01" }, http.StatusOK),
		sev("after=%201", func(p *probe) { p.target += "?after=%201" }, http.StatusBadRequest),
		sev("after=12% (a malformed escape)", func(p *probe) { p.target += "?after=12%" }, http.StatusBadRequest),
		sev("after=%zz (a malformed escape)", func(p *probe) { p.target += "?after=%zz" }, http.StatusBadRequest),
		sev("Last-Event-ID 2", func(p *probe) { p.hdr = []string{"Last-Event-ID", "2"} }, http.StatusOK),
		sev("Last-Event-ID wins over after", func(p *probe) { p.target += "?after=abc"; p.hdr = []string{"Last-Event-ID", "2"} }, 0),
		sev("Last-Event-ID abc", func(p *probe) { p.hdr = []string{"Last-Event-ID", "abc"} }, http.StatusBadRequest),
		sev("Last-Event-ID -1", func(p *probe) { p.hdr = []string{"Last-Event-ID", "-1"} }, http.StatusBadRequest),
		sev("Last-Event-ID beyond the last", func(p *probe) { p.hdr = []string{"Last-Event-ID", "999"} }, http.StatusBadRequest),
		sev("Last-Event-ID of 19 digits", func(p *probe) { p.hdr = []string{"Last-Event-ID", "1234567890123456789"} }, http.StatusBadRequest),
		sev("Last-Event-ID twice", func(p *probe) { p.hdr = []string{"Last-Event-ID", "1", "Last-Event-ID", "2"} }, http.StatusBadRequest),
		sev("Last-Event-ID empty", func(p *probe) { p.hdr = []string{"Last-Event-ID", ""} }, http.StatusBadRequest),
		sev("Accept: application/json", func(p *probe) { p.hdr = []string{"Accept", "application/json"} }, http.StatusOK),
		sev("Accept: */*", func(p *probe) { p.hdr = []string{"Accept", "*/*"} }, http.StatusOK),
		sev("Accept: text/event-stream;q=0", func(p *probe) { p.hdr = []string{"Accept", "text/event-stream;q=0"} }, http.StatusOK),
		sev("HEAD", func(p *probe) { p.method = http.MethodHead }, http.StatusOK),
		sev("HEAD of a running ticket", func(p *probe) { p.method = http.MethodHead; p.target = eventsOf(c.runTicket) }, http.StatusOK),
		sev("another identity's", func(p *probe) { p.auth = bob }, http.StatusNotFound),
		sev("with a body over the limit", func(p *probe) { p.body, p.ct = strings.Repeat("x", 5000), "text/plain" }, http.StatusRequestEntityTooLarge),
		sev("with a body that stops short", func(p *probe) { p.body, p.ct = "{}", "text/plain"; p.hdr = []string{"Content-Length", "100"} }, http.StatusRequestTimeout),
		sev("header block too large", func(p *probe) { p.hdr = []string{"X-Big", strings.Repeat("b", 1<<20+8192)} }, http.StatusRequestHeaderFieldsTooLarge),
	)
	add(c.authProbes(se)...)
	add(idProbes("streamEvents", "streamEvents", http.MethodGet, eventsOf, alice)...)
	add(methodProbes("events", "streamEvents", eventsOf(c.ticket), []string{http.MethodGet})...)

	// ---- cancelAsk
	cn := probe{name: "cancelAsk", op: "cancelAsk", method: http.MethodPost, target: cancelOf(c.ticket), auth: alice}
	cnv := cn.variant
	add(
		cnv("finished", func(*probe) {}, http.StatusAccepted),
		cnv("with an empty JSON body", func(p *probe) { p.body, p.ct = "{}", "application/json" }, 0),
		cnv("with a text body", func(p *probe) { p.body, p.ct = "please", "text/plain" }, 0),
		cnv("with a body over the limit", func(p *probe) { p.body, p.ct = strings.Repeat("x", 5000), "text/plain" }, http.StatusRequestEntityTooLarge),
		cnv("with a body that stops short", func(p *probe) { p.body, p.ct = "{}", "text/plain"; p.hdr = []string{"Content-Length", "100"} }, http.StatusRequestTimeout),
		cnv("another identity's", func(p *probe) { p.auth = bob }, http.StatusNotFound),
		cnv("header block too large", func(p *probe) { p.hdr = []string{"X-Big", strings.Repeat("b", 1<<20+8192)} }, http.StatusRequestHeaderFieldsTooLarge),
		cnv("with an Idempotency-Key", func(p *probe) { p.hdr = []string{"Idempotency-Key", "x y"} }, 0),
	)
	add(c.authProbes(cn)...)
	add(idProbes("cancelAsk", "cancelAsk", http.MethodPost, cancelOf, alice)...)
	add(methodProbes("cancel", "cancelAsk", cancelOf(c.ticket), []string{http.MethodPost})...)
	add(cnv("HEAD", func(p *probe) { p.method = http.MethodHead }, http.StatusMethodNotAllowed))
	// Cancel the running ask, twice, then read its stream to the end.
	add(
		cnv("running", func(p *probe) { p.target = cancelOf(c.runTicket) }, http.StatusAccepted),
		cnv("running, again", func(p *probe) { p.target = cancelOf(c.runTicket) }, http.StatusAccepted),
		gav("cancelled, waited for", func(p *probe) { p.target = statusOf(c.runTicket); p.hdr = []string{"Prefer", "wait=30"} }, http.StatusOK),
		sev("cancelled", func(p *probe) { p.target = eventsOf(c.runTicket) }, http.StatusOK),
	)

	// ---- the published document
	for _, d := range []struct{ op, path string }{{"getOpenAPIYAML", "/ask/v1/openapi.yaml"}, {"getOpenAPIJSON", "/ask/v1/openapi.json"}} {
		add(
			probe{name: d.op, op: d.op, method: http.MethodGet, target: d.path, want: http.StatusOK},
			probe{name: d.op + ": with a bearer", op: d.op, method: http.MethodGet, target: d.path, auth: alice, want: http.StatusOK},
			probe{name: d.op + ": with a garbled bearer", op: d.op, method: http.MethodGet, target: d.path, auth: "Bearer x", want: http.StatusOK},
			probe{name: d.op + ": HEAD", op: d.op, method: http.MethodHead, target: d.path, want: http.StatusOK},
			probe{name: d.op + ": Accept: text/html", op: d.op, method: http.MethodGet, target: d.path, hdr: []string{"Accept", "text/html"}, want: http.StatusOK},
			probe{name: d.op + ": header block too large", op: d.op, method: http.MethodGet, target: d.path, hdr: []string{"X-Big", strings.Repeat("b", 1<<20+8192)}, want: http.StatusRequestHeaderFieldsTooLarge},
		)
		add(methodProbes(d.op, d.op, d.path, []string{http.MethodGet})...)
	}

	// ---- no operation
	for _, target := range []string{"/", "/ask", "/ask/", "/ask/v1", "/ask/v1/", "/ask/v2/conversations", "/ask/v1/nowhere",
		"/ask/v1/conversations/", "/ask//v1/conversations", "/ask/v1/./conversations", "/ask/v1/asks/x/events/more",
		"/ask/v1/conversations/x", "/ask/v1/%2e%2e/v1/conversations", "/ASK/v1/conversations"} {
		add(probe{name: "no operation", method: http.MethodGet, target: target, auth: alice, want: http.StatusNotFound},
			probe{name: "no operation, PUT", method: http.MethodPut, target: target, auth: alice, want: http.StatusNotFound},
			probe{name: "no operation, no bearer", method: http.MethodGet, target: target, want: http.StatusNotFound})
	}
	return ps
}

// checkDeliveries validates every webhook delivery against the runEnded callback: its
// headers, and its body as the callback's request body.
func (c *conformer) checkDeliveries() {
	route, _ := c.route("createAsk")
	cb := route.Operation.Callbacks["runEnded"].Value.Value("{$request.body#/webhook/url}").Post
	schema := cb.RequestBody.Value.Content.Get("application/json").Schema.Value
	for _, d := range c.hooks.Deliveries() {
		if d.ID == "" || d.Timestamp == "" || d.Signature == "" || !d.Verified || d.Authorization != "" {
			c.t.Errorf("webhook delivery: id %q timestamp %q verified %v (%s), Authorization set %v", d.ID, d.Timestamp, d.Verified, d.VerifyError, d.Authorization != "")
		}
		var v any
		if err := json.Unmarshal(d.Body, &v); err != nil {
			c.t.Errorf("webhook delivery: %v", err)
			continue
		}
		if err := schema.VisitJSON(v, openapi3.MultiErrors(), openapi3.EnableFormatValidation()); err != nil {
			c.t.Errorf("webhook delivery: %v", err)
		}
	}
}

// inProgressProbes: a keyed create repeated while the first is still being processed is a 409
// with Retry-After, on both creating calls; the first then completes as it would have.
func (c *conformer) inProgressProbes() {
	for _, first := range []probe{
		{name: "createConversation: Idempotency-Key in progress, the first", op: "createConversation", method: http.MethodPost, target: convs,
			auth: c.bearer("alice"), ct: "application/json", body: "{}", hdr: []string{"Idempotency-Key", "held-conv"}, want: http.StatusCreated},
		{name: "createAsk: Idempotency-Key in progress, the first", op: "createAsk", method: http.MethodPost, target: asksOf(c.newConv("alice")),
			auth: c.bearer("alice"), ct: "application/json", body: question, hdr: []string{"Idempotency-Key", "held-ask"}, want: http.StatusAccepted},
	} {
		hold, reached := make(chan struct{}), make(chan struct{})
		c.store.mu.Lock()
		c.store.holdComplete, c.store.reachedCreate = hold, reached
		c.store.mu.Unlock()
		type result struct {
			r   rawResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := c.sendErr(first)
			done <- result{r, err}
		}()
		<-reached
		dup := first
		dup.name = strings.Replace(first.name, "the first", "the duplicate", 1)
		dup.want = http.StatusConflict
		dup.also = func(r rawResult) error {
			var pr gen.Problem
			if err := json.Unmarshal(r.body, &pr); err != nil || pr.Type != "urn:ask:problem:idempotency-key-in-progress" {
				return fmt.Errorf("type %q, want urn:ask:problem:idempotency-key-in-progress", pr.Type)
			}
			return nil
		}
		c.do(dup)
		close(hold)
		res := <-done
		if res.err != nil {
			c.t.Fatalf("%s: %v", first.name, res.err)
		}
		c.n++
		c.check(first, res.r)
	}
}

// shutdownProbes: once the service is shutting down, the creating calls are 503.
func (c *conformer) shutdownProbes() {
	cid := c.newConv("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		c.t.Fatal(err)
	}
	c.run([]probe{
		{name: "createConversation: shutting down", op: "createConversation", method: http.MethodPost, target: convs, auth: c.bearer("alice"), ct: "application/json", body: "{}", want: http.StatusServiceUnavailable},
		{name: "createAsk: shutting down", op: "createAsk", method: http.MethodPost, target: asksOf(cid), auth: c.bearer("alice"), ct: "application/json", body: question, want: http.StatusServiceUnavailable},
		// The gateway's header (server.RerouteHeader) turns the refusal into 421, with the same
		// Retry-After, for the gateway to pass on to another replica.
		{name: "createConversation: shutting down, rerouted", op: "createConversation", method: http.MethodPost, target: convs, auth: c.bearer("alice"), hdr: []string{server.RerouteHeader, "1"}, ct: "application/json", body: "{}", want: http.StatusMisdirectedRequest},
		{name: "createAsk: shutting down, rerouted", op: "createAsk", method: http.MethodPost, target: asksOf(cid), auth: c.bearer("alice"), hdr: []string{server.RerouteHeader, "1"}, ct: "application/json", body: question, want: http.StatusMisdirectedRequest},
		{name: "getAsk: shutting down", op: "getAsk", method: http.MethodGet, target: statusOf(c.ticket), auth: c.bearer("alice"), want: http.StatusOK},
	})
}

// malformedBearer reports whether an Authorization of auth names the Bearer scheme with no token
// after a space (auth.Credential's invalid_request): a 400 with an invalid_request challenge.
func malformedBearer(authorization string) bool {
	_, bad := auth.Credential(&http.Request{Header: http.Header{"Authorization": {authorization}}})
	return authorization != "" && bad != nil
}
