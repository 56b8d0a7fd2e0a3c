//go:build !fuzzsmoke

package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/httpstatus"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/openapi"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestContract drives every operation of openapi/ask.openapi.yaml, as an outside checker
// would, against the whole service on a loopback socket with real tokens (the dev IdP and the
// auth package's validator): valid requests and many kinds of invalid or odd ones. Every
// response is validated against the document with kin-openapi (the status is documented for
// the operation, its content type is documented, its body matches the schema, and the headers
// the document promises are there), and every error is problem+json whose status, title and
// type agree with the HTTP status. Then the reverse: every status the document gives an
// operation was seen here, or is listed in unreachable with the reason and the test that
// reaches it.
func TestContract(t *testing.T) {
	c := newConformer(t)
	c.run(c.probes())
	c.inProgressProbes()
	c.shutdownProbes()
	c.reachability()
}

// unreachable are the documented statuses no request in TestContract can provoke, and why.
// Each is reached elsewhere, named here; the test fails when one of them is seen after all
// (the list has gone stale) or when any other documented status was not seen.
var unreachable = map[string]string{
	"streamEvents 503": "the store unavailable: a real redis-server refusing (TestStoreUnavailable503)",
	"getAsk 503":       "the store unavailable: a real redis-server refusing (TestStoreUnavailable503)",
	"cancelAsk 503":    "the store unavailable: a real redis-server refusing (TestStoreUnavailable503)",
}

type conformer struct {
	t     *testing.T
	doc   *openapi3.T
	idp   *idp.IdP
	srv   *server.Server
	ts    *httptest.Server
	logs  *logtest.Buffer
	toks  map[string]string // identity → token
	seen  map[string]map[int]bool
	gate  chan struct{}
	hooks *webhooktest.Receiver
	// gateway, when set, is the address of a gateway in front of ts the requests go to.
	gateway string
	store   *gatedStore // holds a keyed create's completion when told to
	n       int
	secret  []string // questions and tokens: in no log line
	tokens  []string // in no response

	// State the probes use.
	cid, ticket       string // alice's conversation and its finished ticket
	runCID, runTicket string // alice's conversation whose ask holds until the test ends
}

// maxInFlight is the service's per-identity bound of running asks: well above what alice's
// probes keep running at once (her held ask, and the quick ones not yet ended).
const maxInFlight = 10

// holdQuestion is the question whose run waits for its context (cancel or shutdown).
const holdQuestion = "hold this one"

func newConformer(t *testing.T) *conformer {
	t.Helper()
	doc, err := openapi.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := &conformer{t: t, doc: doc, logs: &logtest.Buffer{}, toks: map[string]string{}, seen: map[string]map[int]bool{}, gate: make(chan struct{})}
	log := slog.New(slog.NewJSONHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	idpSrv := httptest.NewUnstartedServer(nil)
	c.idp, err = idp.New(idp.Options{Issuer: "http://" + idpSrv.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	idpSrv.Config.Handler = c.idp.Handler()
	idpSrv.Start()
	t.Cleanup(idpSrv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := auth.New(ctx, auth.Config{
		JWKSURL: c.idp.JWKSURL(), Issuer: c.idp.Issuer(), Audience: "das", RequiredScope: "das",
		Algorithms: []string{"RS256", "ES256"}, Leeway: time.Second,
	}, auth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		if req.Question == holdQuestion {
			<-ctx.Done()
			return ask.Outcome{}
		}
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"})
		emit.ModelCall(ask.Usage{InputTokens: 10, OutputTokens: 5})
		emit.Step(step(0))
		return ask.Outcome{Answer: answer("42")}
	})
	secret := webhooktest.Secret()
	c.secret = append(c.secret, secret)
	c.hooks, err = webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.hooks.Close)
	c.store = &gatedStore{Memory: store.NewMemory(store.MemoryOptions{})}
	t.Cleanup(func() { _ = c.store.Close() })
	c.srv, err = server.New(server.Options{
		Store: c.store, Runner: runner, Authenticator: panicky{v}, Logger: log,
		Webhooks: server.WebhookOptions{Config: webhook.Config{
			Allow: []string{c.hooks.URL() + "/hooks/"}, Secrets: []string{secret},
			AllowAddrs:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			BaseBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Poll: 10 * time.Millisecond, Timeout: 2 * time.Second,
		}},
		MaxBodyBytes: 4096, MaxInFlight: maxInFlight, MaxConversationsPerID: 150, MaxTurns: 3,
		ShutdownGrace: -1,
		// A body that stops short is answered 408 this long after its header: long enough that
		// a whole body the service reads after a slow authentication (-race, a loaded machine)
		// is still in time, since its bytes past the first read are read under this deadline.
		BodyReadTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.ts = httptest.NewServer(c.srv.Handler())
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = c.srv.Shutdown(sctx)
		c.ts.Close()
		c.logs.AssertAbsent(t, c.secret...)
	})
	return c
}

// panicBearer is the bearer whose validation panics: an unforeseen failure in the chain,
// which the service answers 500 (the only way a request reaches a 500).
const panicBearer = "Bearer panic-in-the-authenticator"

// panicky is an Authenticator that panics on panicBearer's token.
type panicky struct{ ask.Authenticator }

func (p panicky) Authenticate(ctx context.Context, tok string) (ask.Identity, error) {
	if "Bearer "+tok == panicBearer {
		panic("the authenticator failed")
	}
	return p.Authenticator.Authenticate(ctx, tok)
}

// token mints (once) a valid token for oid.
func (c *conformer) token(oid string) string {
	if tok, ok := c.toks[oid]; ok {
		return tok
	}
	tok, err := c.idp.Mint(idp.Claims{OID: oid})
	if err != nil {
		c.t.Fatal(err)
	}
	c.toks[oid] = tok
	c.secret = append(c.secret, tok)
	c.tokens = append(c.tokens, tok)
	return tok
}

// probe is one request and what the test expects of it.
type probe struct {
	name   string
	op     string // the operationId the request reaches; "" for none
	method string
	target string   // sent on the wire as written
	auth   string   // the Authorization header; "" for none
	hdr    []string // more header fields, name and value
	body   string
	ct     string // Content-Type; "" sends none
	want   int    // the status wanted; 0 takes any the document allows
	// also checks more of the response, when it is given.
	also func(r rawResult) error
}

// variant is p named "p's name: name", answering want, as edit changes it.
func (p probe) variant(name string, edit func(*probe), want int) probe {
	p.name, p.want = p.name+": "+name, want
	edit(&p)
	return p
}

// rawResult is a response read off the socket.
type rawResult struct {
	resp *http.Response
	body []byte
}

// send writes p on its own connection, exactly as written, and reads the response.
func (c *conformer) send(p probe) rawResult {
	c.t.Helper()
	r, err := c.sendErr(p)
	if err != nil {
		c.t.Fatalf("%s: %v", p.name, err)
	}
	return r
}

// sendErr is send for any goroutine.
func (c *conformer) sendErr(p probe) (rawResult, error) {
	addr := c.ts.Listener.Addr().String()
	if c.gateway != "" {
		addr = c.gateway
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return rawResult{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: ask.test\r\nConnection: close\r\n", p.method, p.target)
	if p.auth != "" {
		fmt.Fprintf(&b, "Authorization: %s\r\n", p.auth)
	}
	if p.ct != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", p.ct)
	}
	hasCL := false
	for i := 0; i+1 < len(p.hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", p.hdr[i], p.hdr[i+1])
		hasCL = hasCL || strings.EqualFold(p.hdr[i], "Content-Length") || strings.EqualFold(p.hdr[i], "Transfer-Encoding")
	}
	if !hasCL && (p.body != "" || p.method == http.MethodPost) {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(p.body))
	}
	b.WriteString("\r\n")
	b.WriteString(p.body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return rawResult{}, fmt.Errorf("write: %w", err)
	}
	br := bufio.NewReader(conn)
	var resp *http.Response
	for resp == nil || resp.StatusCode < 200 { // past 100 Continue
		if resp, err = http.ReadResponse(br, &http.Request{Method: p.method}); err != nil {
			return rawResult{}, fmt.Errorf("read response: %w", err)
		}
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawResult{}, fmt.Errorf("read body: %w", err)
	}
	return rawResult{resp, body}, nil
}

func (c *conformer) bearer(oid string) string { return "Bearer " + c.token(oid) }

func (c *conformer) run(ps []probe) {
	for _, p := range ps {
		c.do(p)
	}
}

// check holds one response to the document.
func (c *conformer) check(p probe, r rawResult) {
	t := c.t
	t.Helper()
	resp, status := r.resp, r.resp.StatusCode
	where := fmt.Sprintf("%s (%s %.80s)", p.name, p.method, p.target)
	want := p.want
	if c.gateway != "" && status == http.StatusRequestHeaderFieldsTooLarge && len(p.auth)+len(strings.Join(p.hdr, "")) > 32<<10 {
		// Past the gateway's header limits (a line of 32 KiB), below askd's: the gateway's
		// own 431, which the document gives every operation, whatever askd would answer.
		want = status
	}
	if want != 0 && status != want {
		t.Errorf("%s: status %d, want %d: %.300s", where, status, p.want, r.body)
	}
	if p.also != nil {
		if err := p.also(r); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
	for _, s := range c.tokens {
		if s != "" && (bytes.Contains(r.body, []byte(s)) || strings.Contains(fmt.Sprint(resp.Header), s)) {
			t.Errorf("%s: the response carries a token", where)
		}
	}
	if p.op != "" {
		if c.seen[p.op] == nil {
			c.seen[p.op] = map[int]bool{}
		}
		c.seen[p.op][status] = true
	}
	ct := resp.Header.Get("Content-Type")
	// The two answers of the HTTP layer the document's description names as exceptions: no
	// X-Request-Id, text/plain.
	if resp.Header.Get("X-Request-Id") == "" {
		if (status == http.StatusBadRequest || status == http.StatusRequestHeaderFieldsTooLarge || status == http.StatusExpectationFailed) && strings.HasPrefix(ct, "text/plain") {
			if status != http.StatusRequestHeaderFieldsTooLarge && p.op != "" {
				// Not documented as the operation's 400 (problem+json), but as the exception.
				delete(c.seen[p.op], status)
			}
			if route, _ := c.route(p.op); status == http.StatusRequestHeaderFieldsTooLarge && route != nil &&
				(route.Operation.Responses.Status(status) == nil || route.Operation.Responses.Status(status).Value.Content.Get(ct) == nil) {
				t.Errorf("%s: %d %s, which the document does not give this operation", where, status, ct)
			}
			return
		}
		t.Errorf("%s: no X-Request-Id: %d %s", where, status, ct)
	}
	if got := resp.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q, want nosniff (the document's description): %d %s", where, got, status, ct)
	}
	if status >= 400 {
		c.checkProblem(where, p, resp, r.body)
	}
	if p.method == http.MethodOptions {
		// OPTIONS (RFC 9110 §9.3.7) is answered by the router for every route: 204 with the
		// route's methods in Allow, nothing else.
		if status != http.StatusNoContent || len(r.body) > 0 {
			t.Errorf("%s: %d, want 204 without content", where, status)
		}
		c.checkAllow(where, p, resp)
		delete(c.seen[p.op], status)
		return
	}
	if p.op == "" {
		switch status {
		case http.StatusNotFound:
		case http.StatusMethodNotAllowed:
			if resp.Header.Get("Allow") == "" {
				t.Errorf("%s: 405 without Allow", where)
			}
		default:
			t.Errorf("%s: status %d for a request that reaches no operation", where, status)
		}
		return
	}
	route, opMethod := c.route(p.op)
	if route == nil {
		t.Fatalf("%s: no operation %s in the document", where, p.op)
	}
	if p.method != opMethod && !(p.method == http.MethodHead && opMethod == http.MethodGet) {
		if status != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", where, status)
		}
		c.checkAllow(where, p, resp)
		delete(c.seen[p.op], status)
		return
	}
	sse := strings.HasPrefix(ct, "text/event-stream")
	if err := openapi.CheckResponse(t.Context(), route, status, resp.Header, r.body, p.method == http.MethodHead || sse); err != nil {
		t.Errorf("%s: %d %s: %.400s", where, status, ct, strings.Join(strings.Fields(err.Error()), " "))
	}
	rsp := route.Operation.Responses.Status(status)
	if rsp == nil {
		return
	}
	// The content type is documented (ValidateResponse skips it when the body is excluded).
	if len(rsp.Value.Content) > 0 && rsp.Value.Content.Get(ct) == nil {
		t.Errorf("%s: %d with Content-Type %q, not documented", where, status, ct)
	}
	if len(rsp.Value.Content) == 0 && len(r.body) > 0 {
		t.Errorf("%s: %d with content, documented without", where, status)
	}
	c.checkHeaders(where, p, rsp.Value, resp, r.body)
	c.checkUndocumentedHeaders(where, p, rsp.Value, resp)
	if sse && p.method != http.MethodHead {
		c.checkFrames(where, r.body)
	}
}

// checkAllow: a 405's or an OPTIONS's Allow names the methods the document gives the path,
// with HEAD beside GET (and OPTIONS, which every route answers).
func (c *conformer) checkAllow(where string, p probe, resp *http.Response) {
	route, method := c.route(p.op)
	var want []string
	for m := range route.PathItem.Operations() {
		want = append(want, m)
	}
	if method == http.MethodGet {
		want = append(want, http.MethodHead)
	}
	want = append(want, http.MethodOptions)
	var got []string
	for _, v := range resp.Header.Values("Allow") {
		for _, m := range strings.Split(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				got = append(got, m)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		c.t.Errorf("%s: %d Allow %v, want %v", where, resp.StatusCode, got, want)
	}
}

// checkHeaders: the headers the document gives this response, where they are always sent.
func (c *conformer) checkHeaders(where string, p probe, rsp *openapi3.Response, resp *http.Response, body []byte) {
	always := map[string]bool{"Location": true, "WWW-Authenticate": true, "Retry-After": true,
		"Cache-Control": true, "X-Accel-Buffering": true}
	for name := range rsp.Headers {
		if !always[name] {
			continue // Idempotent-Replayed, Preference-Applied: only when they apply
		}
		if resp.StatusCode == http.StatusBadRequest && name == "WWW-Authenticate" || resp.StatusCode == http.StatusConflict && name == "Retry-After" {
			continue // only when they apply: checked below
		}
		if resp.Header.Get(name) == "" {
			c.t.Errorf("%s: %d without the documented %s header", where, resp.StatusCode, name)
		}
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if p.op == "streamEvents" {
			if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Accel-Buffering") != "no" {
				c.t.Errorf("%s: stream headers %q %q", where, resp.Header.Get("Cache-Control"), resp.Header.Get("X-Accel-Buffering"))
			}
		}
	case http.StatusUnauthorized:
		// RFC 6750 §3.1: no error code without credentials; invalid_token or
		// insufficient_scope for a bearer refused.
		ch := resp.Header.Get("WWW-Authenticate")
		switch {
		case !strings.HasPrefix(ch, "Bearer "):
			c.t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge", where, ch)
		case p.auth == "" && strings.Contains(ch, "error="):
			c.t.Errorf("%s: WWW-Authenticate %q carries an error without credentials", where, ch)
		case strings.HasPrefix(p.auth, "Bearer ") && strings.TrimSpace(p.auth[len("Bearer "):]) != "" &&
			!strings.Contains(ch, `error="invalid_token"`) && !strings.Contains(ch, `error="insufficient_scope"`):
			c.t.Errorf("%s: WWW-Authenticate %q, want an error for a refused bearer", where, ch)
		}
	case http.StatusBadRequest:
		// RFC 6750 §3.1: malformed credentials are a 400 with an invalid_request challenge.
		two := len(p.hdr) > 0 && slices.Contains(p.hdr, "Authorization")
		if ch := resp.Header.Get("WWW-Authenticate"); ch != "" && (!strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `error="invalid_request"`)) {
			c.t.Errorf("%s: 400 with WWW-Authenticate %q, want an invalid_request challenge", where, ch)
		} else if ch == "" && (two || malformedBearer(p.auth)) && c.gateway == "" { // nginx refuses two itself
			c.t.Errorf("%s: 400 for malformed credentials without a challenge", where)
		}
	case http.StatusConflict:
		var pr gen.Problem
		if json.Unmarshal(body, &pr) == nil && pr.Type == "urn:ask:problem:idempotency-key-in-progress" && resp.Header.Get("Retry-After") == "" {
			c.t.Errorf("%s: 409 idempotency-key-in-progress without Retry-After", where)
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err != nil || n < 0 {
			c.t.Errorf("%s: Retry-After %q is not a number of seconds", where, ra)
		}
	}
}

// generalHeaders are the headers any response may carry without the document naming them for
// it: representation metadata (RFC 9110), the request id and nosniff every response carries
// (the document's description), and caching directives, which a client need not act on.
var generalHeaders = map[string]bool{"Content-Type": true, "Content-Length": true, "Date": true, "X-Request-Id": true, "X-Content-Type-Options": true, "Cache-Control": true}

// checkUndocumentedHeaders: every other header the response carries is one the document gives
// this response, so a client generated from it knows it (a Retry-After to wait, a challenge
// to read).
// Through a gateway the gateway adds its own (Server, Connection), which are not the service's.
func (c *conformer) checkUndocumentedHeaders(where string, p probe, rsp *openapi3.Response, resp *http.Response) {
	if c.gateway != "" {
		return
	}
	for name := range resp.Header {
		if generalHeaders[name] {
			continue
		}
		documented := false
		for dn := range rsp.Headers {
			documented = documented || http.CanonicalHeaderKey(dn) == name
		}
		if !documented {
			c.t.Errorf("%s: %d with the header %s, which the document does not give this response", where, resp.StatusCode, name)
		}
	}
}

// checkFrames validates every event frame of a stream against the Event schema.
func (c *conformer) checkFrames(where string, body []byte) {
	event := c.doc.Components.Schemas["Event"].Value
	frames := readAll(c.t, bytes.NewReader(body))
	for _, f := range frames {
		var v any
		if err := json.Unmarshal(f.Data, &v); err != nil {
			c.t.Errorf("%s: frame %d: data is not JSON", where, f.ID)
			continue
		}
		if err := event.VisitJSON(v, openapi3.MultiErrors(), openapi3.EnableFormatValidation()); err != nil {
			c.t.Errorf("%s: frame %d (%s): %v", where, f.ID, f.Event, err)
		}
	}
}

// checkProblem: an error is application/problem+json (RFC 9457) whose status member is the
// HTTP status, whose title is the status's reason phrase when its type is about:blank
// (§4.2.1), and whose type is a URI reference.
func (c *conformer) checkProblem(where string, p probe, resp *http.Response, body []byte) {
	t := c.t
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: %d with Content-Type %q, want application/problem+json", where, resp.StatusCode, ct)
		return
	}
	if p.method == http.MethodHead {
		return // no content
	}
	var pr struct {
		Type   *string `json:"type"`
		Title  *string `json:"title"`
		Status *int    `json:"status"`
	}
	if err := json.Unmarshal(body, &pr); err != nil {
		t.Errorf("%s: problem body: %v: %.200s", where, err, body)
		return
	}
	switch {
	case pr.Status == nil || *pr.Status != resp.StatusCode:
		t.Errorf("%s: problem status %v, HTTP %d", where, pr.Status, resp.StatusCode)
	case pr.Type == nil || *pr.Type == "":
		t.Errorf("%s: problem without a type", where)
	case pr.Title == nil || *pr.Title == "":
		t.Errorf("%s: problem without a title", where)
	case *pr.Type == "about:blank" && *pr.Title != httpstatus.Text(resp.StatusCode):
		t.Errorf("%s: about:blank problem titled %q, want %q (RFC 9110's phrase)", where, *pr.Title, httpstatus.Text(resp.StatusCode))
	case *pr.Type != "about:blank" && !strings.HasPrefix(*pr.Type, "urn:ask:problem:"):
		t.Errorf("%s: problem type %q", where, *pr.Type)
	}
}

// route finds the operation with id op.
func (c *conformer) route(op string) (*routers.Route, string) {
	for path, item := range c.doc.Paths.Map() {
		for method, o := range item.Operations() {
			if o.OperationID == op {
				return &routers.Route{Spec: c.doc, Path: path, PathItem: item, Method: method, Operation: o}, method
			}
		}
	}
	return nil, ""
}

// reachability: every documented status was seen, or is listed in unreachable.
func (c *conformer) reachability() {
	for _, item := range c.doc.Paths.Map() {
		for _, o := range item.Operations() {
			for code := range o.Responses.Map() {
				status, err := strconv.Atoi(code)
				if err != nil {
					c.t.Errorf("%s: response %q is not a status", o.OperationID, code)
					continue
				}
				key := o.OperationID + " " + code
				why, listed := unreachable[key]
				switch seen := c.seen[o.OperationID][status]; {
				case seen && listed:
					c.t.Errorf("%s was reached, yet is listed as unreachable (%s)", key, why)
				case !seen && !listed:
					c.t.Errorf("%s is documented and was not reached", key)
				}
			}
		}
	}
	for key := range unreachable {
		op, code, _ := strings.Cut(key, " ")
		if r, _ := c.route(op); r == nil || r.Operation.Responses.Value(code) == nil {
			c.t.Errorf("unreachable lists %s, which the document does not have", key)
		}
	}
	c.t.Logf("%d requests; statuses seen: %v", c.n, c.seen)
}

// TestPublishedDocumentThroughTheTypedClient: the generated client reads both published forms
// of the document. Its YAML form was typed as a string, so the client decoded the YAML mapping
// into a string and failed on every call.
func TestPublishedDocumentThroughTheTypedClient(t *testing.T) {
	h := newHarness(t, server.Options{})
	y, err := h.cw.GetOpenAPIYAMLWithResponse(t.Context())
	if err != nil || y.StatusCode() != http.StatusOK || y.YAML200 == nil {
		t.Fatalf("GetOpenAPIYAMLWithResponse: %v (status %d)", err, statusOrZero(y))
	}
	j, err := h.cw.GetOpenAPIJSONWithResponse(t.Context())
	if err != nil || j.StatusCode() != http.StatusOK || j.JSON200 == nil {
		t.Fatalf("GetOpenAPIJSONWithResponse: %v (status %d)", err, statusOrZero(j))
	}
}

func statusOrZero(r interface{ StatusCode() int }) int {
	if r == nil || reflect.ValueOf(r).IsNil() {
		return 0
	}
	return r.StatusCode()
}
