package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/openapi"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestContractProperty is a black-box property test of the whole contract: it walks every
// operation of openapi/ask.openapi.yaml, builds requests from the document (valid ones, and
// ones a seeded math/rand has mutated: wrong types, missing and extra members, null for an
// object, numbers as strings, duplicate keys, trailing data, odd and broken Unicode, empty and
// oversized bodies, wrong or missing Content-Type, unknown Accept, other methods, malformed path,
// query and header parameters, missing or refused bearers), sends each exactly as written to
// askd's composition (app.Main) on a loopback socket, over the in-memory store and over a real
// redis-server, and holds every response to the document:
//
//   - the status is documented for the operation, and the body matches that response's schema
//     for its Content-Type, which is documented (openapi3filter.ValidateResponse; an event
//     stream's frames each against Event);
//   - the headers the document promises are there (Location on 201/202, Retry-After on 429 and
//     503 and an in-progress 409, WWW-Authenticate on 401, Cache-Control and X-Accel-Buffering
//     on a stream), and Idempotent-Replayed only as the document spells it;
//   - every 4xx and 5xx, of an operation or of none, is application/problem+json whose status
//     member is the HTTP status;
//   - the status is the one the request called for: a valid request succeeds, a mutation that
//     breaks the document is refused with the status the document gives that fault.
//
// TestContract (package server) holds hand-picked requests to the same rules; this one finds
// the requests nobody picked. ASK_PROPERTY_SEED repeats a run (the seed is logged), and
// ASK_PROPERTY_N sets the requests per store.
func TestContractProperty(t *testing.T) {
	seed := int64(20261205)
	if s := os.Getenv("ASK_PROPERTY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("ASK_PROPERTY_SEED: %v", err)
		}
	}
	n := 400
	if s := os.Getenv("ASK_PROPERTY_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("ASK_PROPERTY_N: %v", err)
		}
	}
	t.Logf("seed %d, %d requests a store (ASK_PROPERTY_SEED=%d repeats it)", seed, n, seed)
	t.Run("memory", func(t *testing.T) { newWorld(t, seed, "").walk(n) })
	t.Run("redis", func(t *testing.T) { newWorld(t, seed, redistest.Start(t).URL).walk(n) })
}

const (
	propAlice = "prop-alice-4e1f"
	propBob   = "prop-bob-77a0"
	// propHold is the question whose run waits for its context (the service's shutdown).
	propHold     = "hold this run"
	propMaxBody  = 80 << 10 // server.DefaultMaxBodyBytes, as askd runs by default
	propMaxIDLen = 64
)

// propAuth accepts two tokens.
type propAuth struct{}

func (propAuth) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	switch tok {
	case propAlice:
		return ask.Identity{OID: "alice", Tenant: "t", Token: tok}, nil
	case propBob:
		return ask.Identity{OID: "bob", Tenant: "t", Token: tok}, nil
	}
	return ask.Identity{}, errors.New("unknown token")
}

// propRunner ends each run with one of the four terminal events, chosen by the question's
// length, after a milestone, a model call and a step.
var propRunner = ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
	if req.Question == propHold {
		<-ctx.Done()
		return ask.Outcome{}
	}
	n := utf8.RuneCountInString(req.Question)
	emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"})
	emit.ModelCall(ask.Usage{InputTokens: 7, OutputTokens: 3})
	emit.Step(gen.StepBody{CallId: "c1", Tool: "run_query", Source: "demo", Args: map[string]any{"sql": "select 1"}, Ms: 2})
	if n%3 == 0 { // a source branch, as phase 2's; left open half the time (the service closes it)
		b2, b1, demo := "b2", "b1", "demo"
		emit.Branch(gen.BranchBody{BranchId: b2, Role: "source", Source: &demo, Parent: &b1, State: gen.BranchBodyStateOpen})
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseDiscovering, Subject: "incidents", Source: "demo", BranchId: &b2})
		emit.Step(gen.StepBody{CallId: "c2", Tool: "list_tables", Source: "demo", Args: map[string]any{}, Refused: n%2 == 0, BranchId: &b2})
		if n%2 == 0 {
			emit.Branch(gen.BranchBody{BranchId: b2, Role: "source", Source: &demo, Parent: &b1, State: gen.BranchBodyStateClose})
		}
	}
	var divergence *gen.Divergence
	if n%8 == 0 {
		divergence = &gen.Divergence{Result: gen.ResultSet{Columns: []string{"n"}, Rows: [][]any{{41}}}, Sql: []string{"select 2"}, Without: []string{"incident"}}
	}
	switch n % 4 {
	case 0:
		return ask.Outcome{Answer: &gen.AnswerBody{Text: "42", Divergence: divergence, Caveats: []gen.Caveat{{Term: "incident", Text: "t", Source: "demo"}},
			Provenance: []gen.Provenance{{Term: "incident", Statement: "s", Source: "demo", Kind: "glossary_term"}}, Sql: []string{"select 1"},
			Result:   &gen.ResultSet{Columns: []string{"n"}, Rows: [][]any{{42}}},
			Headline: &gen.Headline{Label: "n", Value: 42},
			Path:     gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"}}}
	case 1:
		return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"churn"}, Sources: &[]string{"demo"}}}
	case 2:
		return ask.Outcome{Refusal: &gen.RefusalBody{Tool: "run_query", Source: "demo", CallId: "c1", Reason: "denied"}}
	}
	return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindModel, Message: "the model failed"}}
})

// ticketInfo is a ticket of alice's whose run has ended, and its last seq.
type ticketInfo struct {
	id   string
	last int64
}

type world struct {
	t     *testing.T
	rng   *rand.Rand
	doc   *openapi3.T
	addr  string
	base  string
	hooks *webhooktest.Receiver

	ops        []*routers.Route
	cid        string       // alice's conversation, with asks ended in it
	tickets    []ticketInfo // alice's ended tickets
	running    string       // alice's ticket whose run holds until the service stops
	runningCID string       // its conversation
	keyed      []sent       // keyed creates that succeeded, to replay
	keys       int
	sent       int
	fails      int
	statuses   map[string]map[int]int
}

// sent is a request and the response it got.
type sent struct {
	r    request
	resp *http.Response
	body []byte
}

// request is one request as written on the wire, and the status the test wants for it.
type request struct {
	what   string // how it was built, for a failure's message
	op     string // the operation it reaches ("" for none)
	method string
	target string
	hdr    [][2]string
	body   []byte
	want   []int // the statuses it may get; nil takes any the document gives the operation
	// rawHTTP: the request is not well-formed HTTP, which the HTTP layer may refuse as text/plain.
	rawHTTP bool
	proto   string // "" is HTTP/1.1
	noHost  bool   // no Host header
}

func (r *request) set(name, value string) {
	for i := range r.hdr {
		if strings.EqualFold(r.hdr[i][0], name) {
			r.hdr[i][1] = value
			return
		}
	}
	r.hdr = append(r.hdr, [2]string{name, value})
}

func (r *request) del(name string) {
	r.hdr = slices.DeleteFunc(r.hdr, func(h [2]string) bool { return strings.EqualFold(h[0], name) })
}

func (r *request) get(name string) (string, bool) {
	for _, h := range r.hdr {
		if strings.EqualFold(h[0], name) {
			return h[1], true
		}
	}
	return "", false
}

func newWorld(t *testing.T, seed int64, redisURL string) *world {
	t.Helper()
	doc, err := openapi.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, rng: rand.New(rand.NewSource(seed)), doc: doc, statuses: map[string]map[int]int{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			w.ops = append(w.ops, &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op})
		}
	}
	// The walk's order is the seed's, not the map's.
	slices.SortFunc(w.ops, func(a, b *routers.Route) int {
		return strings.Compare(a.Operation.OperationID, b.Operation.OperationID)
	})

	secret := webhooktest.Secret()
	if w.hooks, err = webhooktest.New(secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.hooks.Close)
	cfg := config.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Ops.AdminAddr = ""
	cfg.Store.URL = redisURL
	cfg.Service.MaxInFlight = 10000
	cfg.Service.MaxTickets = 100000
	cfg.Service.MaxConversationsPerID = 100000
	cfg.Service.MaxRetainedPerID = 100000
	cfg.Service.ShutdownGrace = -1
	cfg.Webhooks.Allow = []string{w.hooks.URL() + "/hooks/"}
	cfg.Webhooks.Secrets = []string{secret}
	cfg.Webhooks.AllowAddrs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	m := app.NewMain(cfg)
	m.Logger = slog.New(slog.DiscardHandler)
	m.Authenticator = propAuth{}
	m.Runner = propRunner
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	w.addr, w.base = m.Addr(), strings.TrimSuffix(m.BasePath(), "/")

	// State: a conversation of alice's with asks that ended in each of the four ways, and an
	// ask that runs until the service stops.
	w.cid = w.newConv(propAlice)
	for i := range 4 {
		q := strings.Repeat("q", 8+i) // the runner's outcome is the length's
		if i > 0 {
			w.cid = w.newConv(propAlice) // one ask runs at a time in a conversation
		}
		tk := w.newAsk(propAlice, w.cid, q)
		w.tickets = append(w.tickets, ticketInfo{tk, w.waitDone(tk)})
	}
	w.runningCID = w.newConv(propAlice)
	w.running = w.newAsk(propAlice, w.runningCID, propHold)
	return w
}

// ---- the walk

func (w *world) walk(n int) {
	for i := 0; i < n && w.fails < 10; i++ {
		if len(w.keyed) > 0 && w.rng.Intn(20) == 0 {
			w.replay()
			continue
		}
		route := w.ops[w.rng.Intn(len(w.ops))]
		if public(route) && w.rng.Intn(3) != 0 {
			continue // the published document, a third as often: it has little to vary
		}
		r := w.valid(route)
		if w.rng.Intn(4) != 0 {
			w.mutate(route, &r)
		}
		s := w.do(r)
		if s.resp == nil {
			continue // reset by the HTTP layer (do logged it)
		}
		if s.r.op != "" && (s.r.method == http.MethodPost) && s.resp.StatusCode < 300 {
			if _, ok := s.r.get("Idempotency-Key"); ok {
				w.keyed = append(w.keyed, s)
			}
		}
		// Some of the tickets asked for join the ones the walk reads (a webhook's status
		// among them).
		if s.r.op == "createAsk" && s.resp.StatusCode == http.StatusAccepted && len(w.tickets) < 40 && w.rng.Intn(3) == 0 {
			var tk gen.Ticket
			if err := json.Unmarshal(s.body, &tk); err == nil {
				w.tickets = append(w.tickets, ticketInfo{tk.Ticket, w.waitDone(tk.Ticket)})
			}
		}
	}
	w.liveStream()
	w.t.Logf("%d requests; statuses by operation: %v", w.sent, w.statuses)
}

// liveStream reads the stream of an ask that is running when the stream opens, cancels the
// ask once the stream's head has come, and holds the whole stream to the document.
func (w *world) liveStream() {
	cid := w.newConv(propAlice)
	tk := w.newAsk(propAlice, cid, propHold)
	r := request{what: "a running ask's stream, cancelled while read", op: "streamEvents", method: http.MethodGet,
		target: w.base + "/v1/asks/" + tk + "/events", hdr: [][2]string{{"Authorization", "Bearer " + propAlice}}, want: []int{http.StatusOK}}
	conn, err := net.DialTimeout("tcp", w.addr, 5*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: ask.test\r\nConnection: close\r\nAuthorization: Bearer %s\r\n\r\n", r.target, propAlice)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: r.method})
	if err != nil {
		w.t.Fatalf("%s: %v", r.what, err)
	}
	w.do(request{what: "cancel of a streamed ask", op: "cancelAsk", method: http.MethodPost, target: w.base + "/v1/asks/" + tk + "/cancel",
		hdr: [][2]string{{"Authorization", "Bearer " + propAlice}}, want: []int{http.StatusAccepted}})
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatalf("%s: %v", r.what, err)
	}
	w.sent++
	w.check(sent{r, resp, body})
	if !bytes.Contains(body, []byte("event: done")) || !bytes.Contains(body, []byte(`"kind":"cancelled"`)) {
		w.fail(r, sent{r, resp, body}, "the stream did not end with error{cancelled} and done")
	}
}

// replay sends a keyed create again: the same request gets the same response, marked
// replayed; the same key on another request is a 422.
func (w *world) replay() {
	first := w.keyed[w.rng.Intn(len(w.keyed))]
	r := first.r
	r.hdr = slices.Clone(first.r.hdr)
	r.what = "replay of: " + first.r.what
	if w.rng.Intn(4) == 0 {
		r.what = "key reused on another path: " + first.r.what
		r.del("Transfer-Encoding")
		r.set("Content-Type", "application/json")
		if first.r.op == "createAsk" {
			r.op, r.target, r.body = "createConversation", w.base+"/v1/conversations", []byte("{}")
		} else {
			r.op, r.target = "createAsk", w.base+"/v1/conversations/"+w.newConv(propAlice)+"/asks"
			r.body = []byte(`{"question":"What is an incident?"}`)
		}
		r.want = []int{http.StatusUnprocessableEntity}
		w.do(r)
		return
	}
	if w.rng.Intn(3) == 0 {
		r.what = "key reused for another body: " + first.r.what
		if first.r.op == "createConversation" {
			r.body = []byte(`{"x":1}`) // refused by the schema first
			r.want = []int{http.StatusBadRequest}
		} else {
			r.body = []byte(`{"question":"another question?"}`)
			r.want = []int{http.StatusUnprocessableEntity}
		}
		r.set("Content-Type", "application/json")
		r.del("Transfer-Encoding")
		w.do(r)
		return
	}
	r.want = []int{first.resp.StatusCode}
	s := w.do(r)
	if s.resp.StatusCode != first.resp.StatusCode {
		return // reported by do
	}
	if got := s.resp.Header.Values("Idempotent-Replayed"); len(got) != 1 || got[0] != "true" {
		w.fail(r, s, fmt.Sprintf("Idempotent-Replayed %q on a replay", got))
	}
	if !bytes.Equal(s.body, first.body) {
		w.fail(r, s, fmt.Sprintf("replayed body differs from the first: %.200s", first.body))
	}
}

// valid builds a request to route that satisfies the document and that the service can only
// answer with success.
func (w *world) valid(route *routers.Route) request {
	op := route.Operation.OperationID
	r := request{what: "valid", op: op, method: route.Method}
	if !public(route) {
		r.set("Authorization", "Bearer "+propAlice)
	}
	path := route.Path
	switch op {
	case "createAsk":
		path = strings.Replace(path, "{conversation_id}", w.newConv(propAlice), 1)
	case "getAsk", "streamEvents", "cancelAsk":
		path = strings.Replace(path, "{ticket}", w.ticket().id, 1)
	}
	if op == "getAsk" && w.rng.Intn(5) == 0 {
		path = strings.Replace(route.Path, "{ticket}", w.running, 1) // state running, no terminal yet
	}
	r.target = w.base + path
	switch op {
	case "createConversation":
		switch w.rng.Intn(4) {
		case 0: // no body at all
		case 1:
			r.set("Content-Type", "application/json; charset=utf-8")
			r.body = []byte(" { } ")
		default:
			r.set("Content-Type", "application/json")
			r.body = []byte("{}")
		}
	case "createAsk":
		r.set("Content-Type", "application/json")
		body := map[string]any{"question": w.question(1 + w.rng.Intn(60))}
		if w.rng.Intn(6) == 0 {
			body["question"] = w.question(4000) // the bound, in code points
		}
		if w.rng.Intn(8) == 0 {
			body["webhook"] = map[string]any{"url": w.hooks.URL() + "/hooks/" + w.word(1+w.rng.Intn(20))}
		}
		r.body = marshal(w.t, body)
	case "getAsk":
		if strings.Contains(path, w.running) {
			break // no wait: the run holds until the end
		}
		if w.rng.Intn(3) == 0 {
			r.set("Prefer", []string{"wait=0", "wait=5", "respond-async", "wait=1, handling=lenient", "return=minimal"}[w.rng.Intn(5)])
		}
	case "streamEvents":
		tk := w.ticketFor(r.target)
		switch w.rng.Intn(4) {
		case 1:
			r.set("Last-Event-ID", strconv.FormatInt(w.rng.Int63n(tk.last+1), 10))
		case 2:
			r.target += "?after=" + strconv.FormatInt(w.rng.Int63n(tk.last+1), 10)
		case 3:
			r.set("Accept", "text/event-stream")
		}
	}
	if (op == "createConversation" || op == "createAsk") && w.rng.Intn(3) == 0 {
		w.keys++
		k := fmt.Sprintf("k-%d-%s", w.keys, w.word(8))
		if w.rng.Intn(2) == 0 {
			k = `"` + k + `"`
		}
		r.set("Idempotency-Key", k)
	}
	r.want = []int{success(route)}
	return r
}

// success is the operation's one 2xx.
func success(route *routers.Route) int {
	for code := range route.Operation.Responses.Map() {
		if n, err := strconv.Atoi(code); err == nil && n/100 == 2 {
			return n
		}
	}
	panic("no 2xx for " + route.Operation.OperationID)
}

// ticket picks one of alice's ended tickets.
func (w *world) ticket() ticketInfo { return w.tickets[w.rng.Intn(len(w.tickets))] }

func (w *world) ticketFor(target string) ticketInfo {
	for _, tk := range w.tickets {
		if strings.Contains(target, "/"+tk.id+"/") || strings.HasSuffix(target, "/"+tk.id) {
			return tk
		}
	}
	w.t.Fatalf("no ticket in %s", target)
	return ticketInfo{}
}

// ---- mutations

// mutation changes a valid request into one the document says something else of; it reports
// false when it does not apply to the operation.
type mutation struct {
	name  string
	apply func(w *world, route *routers.Route, r *request) bool
}

func (w *world) mutate(route *routers.Route, r *request) {
	for {
		m := mutations[w.rng.Intn(len(mutations))]
		before := *r
		before.hdr = slices.Clone(r.hdr)
		if m.apply(w, route, r) {
			r.what = m.name
			return
		}
		*r = before
	}
}

// public: the operation asks for no bearer (the published document).
func public(route *routers.Route) bool {
	return route.Operation.Security != nil && len(*route.Operation.Security) == 0
}

func hasBody(route *routers.Route) bool { return route.Operation.RequestBody != nil }

// bodyRequired: the operation's body is required (createAsk).
func bodyRequired(route *routers.Route) bool {
	return hasBody(route) && route.Operation.RequestBody.Value.Required
}

var (
	badRequest  = []int{http.StatusBadRequest}
	unsupported = []int{http.StatusUnsupportedMediaType}
)

var mutations = []mutation{
	{"a member of the wrong type", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) || route.Operation.OperationID != "createAsk" {
			return false
		}
		vals := []string{`42`, `4.2e1`, `true`, `[]`, `["q"]`, `{}`, `null`, `"42"`}
		v := vals[w.rng.Intn(len(vals))]
		if w.rng.Intn(2) == 0 {
			r.body = []byte(`{"question":` + v + `}`)
			if v == `"42"` {
				return false // a string: valid
			}
		} else {
			if v == `{}` {
				v = `"https://hooks.example/x"`
			}
			r.body = []byte(`{"question":"What is an incident?","webhook":` + v + `}`)
		}
		r.want = badRequest
		return true
	}},
	{"the webhook's url of the wrong type", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		v := []string{`42`, `true`, `null`, `[]`, `{}`}[w.rng.Intn(5)]
		r.body = []byte(`{"question":"What is an incident?","webhook":{"url":` + v + `}}`)
		r.want = badRequest
		return true
	}},
	{"a required member missing", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.body = []byte([]string{`{}`, `{"webhook":{"url":"` + w.hooks.URL() + `/hooks/a"}}`, `{"question":"q?","webhook":{}}`}[w.rng.Intn(3)])
		r.want = badRequest
		return true
	}},
	{"an extra member", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		extra := `"` + w.word(1+w.rng.Intn(10)) + `":` + []string{`1`, `"x"`, `null`, `{}`}[w.rng.Intn(4)]
		switch {
		case route.Operation.OperationID == "createConversation":
			r.body = []byte(`{` + extra + `}`)
		case w.rng.Intn(2) == 0:
			r.body = []byte(`{"question":"What is an incident?",` + extra + `}`)
		default:
			r.body = []byte(`{"question":"What is an incident?","webhook":{"url":"` + w.hooks.URL() + `/hooks/a",` + extra + `}}`)
		}
		if strings.HasPrefix(extra, `"question"`) || strings.HasPrefix(extra, `"webhook"`) || strings.HasPrefix(extra, `"url"`) {
			return false
		}
		r.set("Content-Type", "application/json")
		r.want = badRequest
		return true
	}},
	{"null, an array or a scalar for the body's object", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		r.body = []byte([]string{`null`, `[]`, `[{}]`, `"{}"`, `0`, `true`}[w.rng.Intn(6)])
		r.set("Content-Type", "application/json")
		r.want = badRequest
		return true
	}},
	{"trailing data after the JSON text", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		if len(r.body) == 0 {
			r.body = []byte("{}")
		}
		r.body = append(r.body, []byte([]string{` {}`, `x`, `]`, `}`, "\x00", ` null`, `,`, ` "x"`, "\n{}"}[w.rng.Intn(9)])...)
		r.set("Content-Type", "application/json")
		r.want = badRequest
		return true
	}},
	{"a member named twice", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		switch w.rng.Intn(3) {
		case 0:
			r.body = []byte(`{"question":"a?","question":"b?"}`)
		case 1:
			r.body = []byte(`{"question":"a?","\u0071uestion":"a?"}`)
		default:
			u := w.hooks.URL() + "/hooks/a"
			r.body = []byte(`{"question":"a?","webhook":{"url":"` + u + `","url":"` + u + `"}}`)
		}
		r.want = badRequest
		return true
	}},
	{"an empty body", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		r.body = nil
		if w.rng.Intn(2) == 0 {
			r.del("Content-Type")
		} else {
			r.set("Content-Type", "application/json")
		}
		if bodyRequired(route) {
			r.want = []int{http.StatusBadRequest, http.StatusUnsupportedMediaType}
		}
		return true
	}},
	{"a body over the limit", func(w *world, route *routers.Route, r *request) bool {
		n := propMaxBody + 1 + w.rng.Intn(4096)
		if hasBody(route) {
			r.body = []byte(`{"question":"` + strings.Repeat("q", n) + `"}`)
			r.set("Content-Type", "application/json")
		} else {
			r.body = bytes.Repeat([]byte("x"), n)
			r.set("Content-Type", "text/plain")
		}
		if public(route) {
			return true // the published document reads no body, and documents no 413: want as before
		}
		r.want = []int{http.StatusRequestEntityTooLarge}
		return true
	}},
	{"a question over its length in code points", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.body = marshal(w.t, map[string]string{"question": w.question(4001 + w.rng.Intn(10))})
		r.want = badRequest
		return true
	}},
	{"an empty question", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.body = []byte(`{"question":""}`)
		r.want = badRequest
		return true
	}},
	{"broken Unicode in the body", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		bad := []string{"\xff", "\xc3\x28", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\xc0\xaf"}[w.rng.Intn(6)]
		switch {
		case w.rng.Intn(3) == 0:
			r.body = append([]byte("\xef\xbb\xbf"), r.body...) // a byte order mark
			if len(r.body) == 3 {
				r.body = append(r.body, "{}"...)
			}
		case route.Operation.OperationID == "createAsk":
			r.body = []byte(`{"question":"a` + bad + `b"}`)
		default:
			r.body = []byte(`{"` + bad + `":1}`)
		}
		r.set("Content-Type", "application/json")
		r.want = badRequest
		return true
	}},
	{"an escaped lone surrogate", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.body = []byte(`{"question":"a` + []string{`\ud800`, `\udfff`, `\udc00\ud800`, `\ud83d`}[w.rng.Intn(4)] + `b"}`)
		r.want = badRequest
		return true
	}},
	{"odd but valid Unicode", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		odd := []string{"\u202e", "\u200d", "\ufeff", "\u0301", "\U0010ffff", "\uffff", "\ufffe", "\u2028", "\u00a0", "\U0001f600", "\ufffd", `\u00e9`, `\ud83d\ude00`, `\"`, `\\`, `\/`}
		var b strings.Builder
		for range 1 + w.rng.Intn(8) {
			b.WriteString(odd[w.rng.Intn(len(odd))])
			b.WriteString(w.word(w.rng.Intn(3)))
		}
		b.WriteString("?") // not white space alone, which the service refuses
		r.body = []byte(`{"question":"` + b.String() + `"}`)
		return true // valid: want as before
	}},
	{"escaped control characters in the question", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.body = []byte(`{"question":"a` + []string{`\u0000`, `\u0001`, `\n`, `\t`, `\u007f`, `\u001b`}[w.rng.Intn(6)] + `b"}`)
		return true
	}},
	{"a question of white space alone", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		sp := []string{" ", `\t`, `\n`, "\u3000", "\u00a0", "\u2003", "\u2028", `\u0020`}
		var b strings.Builder
		for range 1 + w.rng.Intn(5) {
			b.WriteString(sp[w.rng.Intn(len(sp))])
		}
		r.body = []byte(`{"question":"` + b.String() + `"}`)
		r.want = badRequest // the question's description: it asks nothing
		return true
	}},
	{"a raw control character in the question", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.body = []byte("{\"question\":\"a" + string(rune(w.rng.Intn(0x20))) + "b\"}")
		r.want = badRequest
		return true
	}},
	{"no Content-Type", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) || len(r.body) == 0 {
			return false
		}
		r.del("Content-Type")
		r.want = unsupported
		return true
	}},
	{"another Content-Type", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		if len(r.body) == 0 {
			r.body = []byte("{}")
		}
		r.set("Content-Type", []string{"text/plain", "application/xml", "application/problem+json", "application/x-www-form-urlencoded",
			"multipart/form-data; boundary=x", "application/merge-patch+json", "text/json", "application/json-seq", "*/*", "application/*"}[w.rng.Intn(10)])
		r.want = unsupported
		return true
	}},
	{"the JSON Content-Type spelled otherwise", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) || len(r.body) == 0 {
			return false
		}
		r.set("Content-Type", []string{"APPLICATION/JSON", "application/json;charset=UTF-8", "application/json ; charset=utf-8", "Application/Json"}[w.rng.Intn(4)])
		return true // valid: want as before
	}},
	{"a garbled Content-Type", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		if len(r.body) == 0 {
			r.body = []byte("{}")
		}
		if w.rng.Intn(2) == 0 {
			r.set("Content-Type", []string{";;;", "application/", "/json", "json", "application json", "application/json/x"}[w.rng.Intn(6)])
			r.want = []int{http.StatusBadRequest, http.StatusUnsupportedMediaType}
		} else {
			// The type is JSON, its parameters are not well-formed: the service refuses it
			// (415, server/jsontext.go), as reading past them would skip its checks of the body.
			r.set("Content-Type", []string{"application/json; charset", "application/json; =x", `application/json; a="b`, "application/json;;"}[w.rng.Intn(4)])
			r.want = append(r.want, http.StatusBadRequest, http.StatusUnsupportedMediaType)
		}
		return true
	}},
	{"Content-Type twice", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		if len(r.body) == 0 {
			r.body = []byte("{}")
			r.set("Content-Type", "application/json")
		}
		r.hdr = append(r.hdr, [2]string{"Content-Type", []string{"application/json", "text/plain"}[w.rng.Intn(2)]})
		r.want = badRequest
		return true
	}},
	{"an unknown Accept", func(w *world, route *routers.Route, r *request) bool {
		r.set("Accept", []string{"application/xml", "text/html", "image/png", "*/*;q=0", "application/json;q=0", "text/event-stream",
			"garbage", "application/problem+json", "", "text/*"}[w.rng.Intn(10)])
		return true // not negotiated (docs/decisions.md): want as before
	}},
	{"another method", func(w *world, route *routers.Route, r *request) bool {
		m := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodTrace, http.MethodOptions, http.MethodHead, "PROPFIND", "BREW"}[w.rng.Intn(10)]
		if m == r.method {
			return false
		}
		r.method = m
		switch {
		case m == http.MethodHead && route.Method == http.MethodGet:
			// a GET's HEAD: as the GET, without content
		case route.PathItem.GetOperation(m) != nil:
			return false
		case m == http.MethodOptions:
			r.op, r.want = "", []int{http.StatusNoContent}
		default:
			r.op, r.want = "", []int{http.StatusMethodNotAllowed}
		}
		return true
	}},
	{"a malformed path parameter", func(w *world, route *routers.Route, r *request) bool {
		p := pathParam(route)
		if p == "" {
			return false
		}
		id, want := w.badID()
		r.target = w.base + strings.Replace(route.Path, "{"+p+"}", id, 1)
		r.want = want
		if want == nil {
			r.op = "" // a dot segment: the request may reach another path or none
		}
		return true
	}},
	{"an unknown path parameter", func(w *world, route *routers.Route, r *request) bool {
		p := pathParam(route)
		if p == "" {
			return false
		}
		id := w.idChars(1 + w.rng.Intn(propMaxIDLen))
		r.target = w.base + strings.Replace(route.Path, "{"+p+"}", id, 1)
		r.want = []int{http.StatusNotFound}
		return true
	}},
	{"another identity's resource", func(w *world, route *routers.Route, r *request) bool {
		if pathParam(route) == "" {
			return false
		}
		r.set("Authorization", "Bearer "+propBob)
		r.want = []int{http.StatusNotFound}
		return true
	}},
	{"a missing or refused bearer", func(w *world, route *routers.Route, r *request) bool {
		switch w.rng.Intn(4) {
		case 0:
			r.del("Authorization")
		case 1:
			r.set("Authorization", "Bearer "+w.word(1+w.rng.Intn(40)))
		case 2:
			r.set("Authorization", "Basic YWxpY2U6cw==")
		default:
			r.set("Authorization", "Bearer "+propAlice+"x")
		}
		if !public(route) {
			r.want = []int{http.StatusUnauthorized}
		}
		return true
	}},
	{"a malformed bearer", func(w *world, route *routers.Route, r *request) bool {
		// The Bearer scheme with no token after a space: authentication attempted, malformed
		// (RFC 6750 §3.1's invalid_request).
		r.set("Authorization", []string{"Bearer", "Bearer ", "bearer\t" + propAlice}[w.rng.Intn(3)])
		if !public(route) {
			r.want = []int{http.StatusBadRequest}
		}
		return true
	}},
	{"an unknown query parameter", func(w *world, route *routers.Route, r *request) bool {
		sep := "?"
		if strings.Contains(r.target, "?") {
			sep = "&"
		}
		name := w.word(1 + w.rng.Intn(8))
		if name == "after" {
			return false
		}
		r.target += sep + name + "=" + url.QueryEscape(w.question(1+w.rng.Intn(10)))
		return true // ignored: want as before
	}},
	{"a malformed cursor", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "streamEvents" {
			return false
		}
		r.del("Last-Event-ID")
		r.target, _, _ = strings.Cut(r.target, "?")
		tk := w.ticketFor(r.target)
		beyond := strconv.FormatInt(tk.last+1+w.rng.Int63n(1000), 10)
		vals := []string{"-1", "abc", "1.5", "", "1e1", "0x1", "%221%22", "99999999999999999999", "1%20", "%2D1", "1,2", "true", "null", beyond}
		v := vals[w.rng.Intn(len(vals))]
		switch w.rng.Intn(3) {
		case 0:
			r.target += "?after=" + v
		case 1:
			r.target += "?after=0&after=" + v
		default:
			hv, err := url.QueryUnescape(v)
			if err != nil || hv != strings.TrimSpace(hv) {
				return false // the header's value is trimmed
			}
			r.set("Last-Event-ID", hv)
		}
		r.want = badRequest
		return true
	}},
	{"a malformed Idempotency-Key", func(w *world, route *routers.Route, r *request) bool {
		if !slices.ContainsFunc(route.Operation.Parameters, func(p *openapi3.ParameterRef) bool { return p.Value.Name == "Idempotency-Key" }) {
			return false
		}
		vals := []string{"", `""`, "a b", "clé", strings.Repeat("k", 256), `"` + strings.Repeat("k", 256) + `"`, `"abc`, `abc"`, "a,b", "a;b", `"a"b"`, "ключ", "a\tb"}
		r.set("Idempotency-Key", vals[w.rng.Intn(len(vals))])
		r.want = badRequest
		return true
	}},
	{"a Prefer over its length", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "getAsk" {
			return false
		}
		r.set("Prefer", "wait=0, "+strings.Repeat("x", 250+w.rng.Intn(100)))
		r.want = badRequest
		return true
	}},
	{"an odd Prefer", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "getAsk" {
			return false
		}
		r.set("Prefer", []string{"wait=abc", "wait=-1", "wait=99999999999999999999", "wait", "wait=1.5", "wait=0;x=1", `wait="0"`, ",,,", "wait=0, wait=1"}[w.rng.Intn(9)])
		return true // honoured or ignored: want as before
	}},
	{"a trailing slash or an extra segment", func(w *world, route *routers.Route, r *request) bool {
		path, q, _ := strings.Cut(r.target, "?")
		path += []string{"/", "/x", "//"}[w.rng.Intn(3)]
		if q != "" {
			path += "?" + q
		}
		r.target = path
		r.op, r.want = "", []int{http.StatusNotFound}
		return true
	}},
	{"the path in other case", func(w *world, route *routers.Route, r *request) bool {
		r.target = strings.Replace(r.target, "/v1/", "/V1/", 1)
		r.op, r.want = "", []int{http.StatusNotFound}
		return true
	}},
	{"a body on a call that takes none", func(w *world, route *routers.Route, r *request) bool {
		if hasBody(route) {
			return false
		}
		r.body = []byte([]string{`{}`, `{"question":"q?"}`, `null`, "\xff", `x`}[w.rng.Intn(5)])
		r.set("Content-Type", []string{"application/json", "text/plain"}[w.rng.Intn(2)])
		r.want = nil
		return true
	}},
	{"a stream of a running ticket, HEAD", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "streamEvents" {
			return false
		}
		r.method = http.MethodHead
		r.target = w.base + strings.Replace(route.Path, "{ticket}", w.running, 1)
		r.del("Last-Event-ID")
		return true // valid: want as before
	}},
	{"an ask in a conversation whose ask runs", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.target = w.base + strings.Replace(route.Path, "{conversation_id}", w.runningCID, 1)
		r.want = []int{http.StatusConflict}
		return true
	}},
	{"a webhook the operator does not allow", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		u := []string{"https://hooks.example/x", "http://hooks.example/x", "ftp://x/y", "not a url", w.hooks.URL() + "/other",
			w.hooks.URL() + "/hooks/../x", w.hooks.URL() + "/hooks/a#f", "//x", "https://u:p@hooks.example/x", "javascript:alert(1)"}[w.rng.Intn(10)]
		r.body = marshal(w.t, map[string]any{"question": "What is an incident?", "webhook": map[string]string{"url": u}})
		r.want = badRequest
		return true
	}},
	{"deep nesting", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) {
			return false
		}
		d := 100 + w.rng.Intn(3000)
		if route.Operation.OperationID == "createAsk" {
			r.body = []byte(`{"question":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}`)
		} else {
			r.body = []byte(`{"a":` + strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d) + `}`)
		}
		r.set("Content-Type", "application/json")
		r.want = badRequest
		return true
	}},
	{"a number beyond float64", func(w *world, route *routers.Route, r *request) bool {
		if route.Operation.OperationID != "createAsk" {
			return false
		}
		r.body = []byte(`{"question":` + []string{"1e99999", "-1e99999", "123456789012345678901234567890", "0.0000000000000000000000000001e-999"}[w.rng.Intn(4)] + `}`)
		r.want = badRequest
		return true
	}},
	{"a chunked body", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) || len(r.body) == 0 {
			return false
		}
		r.set("Transfer-Encoding", "chunked")
		var b bytes.Buffer
		for rest := r.body; len(rest) > 0; {
			n := min(len(rest), 1+w.rng.Intn(16))
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, rest[:n])
			rest = rest[n:]
		}
		b.WriteString("0\r\n\r\n")
		r.body = b.Bytes()
		return true // valid: want as before
	}},
	{"a coded body", func(w *world, route *routers.Route, r *request) bool {
		if !hasBody(route) || len(r.body) == 0 {
			return false
		}
		r.set("Content-Encoding", []string{"gzip", "deflate", "br", "identity, gzip"}[w.rng.Intn(4)])
		r.want = unsupported
		return true
	}},
	{"a request that is not well-formed HTTP", func(w *world, route *routers.Route, r *request) bool {
		switch w.rng.Intn(9) {
		case 0:
			r.set("Transfer-Encoding", []string{"gzip", "gzip, chunked", "identity", "x-custom"}[w.rng.Intn(4)])
			if len(r.body) == 0 {
				r.body = []byte("{}")
			}
		case 1:
			r.proto = []string{"HTTP/2.0", "HTTP/3.0", "HTTP/0.9"}[w.rng.Intn(3)]
		case 2:
			r.target = strings.Replace(r.target, "/v1/", "/v1/%zz", 1)
		case 3:
			r.set("X-Odd", "a\x01b")
		case 4:
			r.set("Expect", "200-ok")
		case 5:
			r.noHost = true
		case 6:
			r.set("Bad Name", "x")
		case 7:
			r.set("Content-Length", "1")
			r.set("Transfer-Encoding", "chunked")
			r.body = []byte("0\r\n\r\n")
		default:
			r.set("Content-Length", "abc")
		}
		r.rawHTTP, r.want = true, nil
		return true
	}},
	{"a conditional, range or coding header", func(w *world, route *routers.Route, r *request) bool {
		h := [][2]string{{"Range", "bytes=0-10"}, {"Range", "bytes=-5"}, {"If-None-Match", "*"}, {"If-None-Match", `"x"`},
			{"If-Modified-Since", "Sun, 06 Nov 2994 08:49:37 GMT"}, {"If-Match", `"nope"`}, {"If-Unmodified-Since", "Sun, 06 Nov 1994 08:49:37 GMT"},
			{"Accept-Encoding", "gzip"}, {"Accept-Encoding", "br, deflate"}, {"Accept-Encoding", "identity;q=0"}, {"Cache-Control", "no-cache"},
			{"Accept-Charset", "iso-8859-1"}, {"Accept-Language", "fr"}, {"Origin", "https://evil.example"}}[w.rng.Intn(14)]
		r.set(h[0], h[1])
		return true // none of them is in the document: want as before
	}},
	{"a header block too large", func(w *world, route *routers.Route, r *request) bool {
		if w.rng.Intn(10) != 0 {
			return false // a megabyte each: now and then
		}
		r.set("X-Big", strings.Repeat("b", 1<<20+4096))
		r.want, r.rawHTTP = []int{http.StatusRequestHeaderFieldsTooLarge}, true
		return true
	}},
}

// pathParam is the name of the route's path parameter, or "".
func pathParam(route *routers.Route) string {
	_, after, ok := strings.Cut(route.Path, "{")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(after, "}")
	return name
}

// badID is a path parameter outside ^[A-Za-z0-9_-]{1,64}$, as written in the target, and the
// statuses it may get (nil: a dot segment, which may reach another path).
func (w *world) badID() (string, []int) {
	switch w.rng.Intn(4) {
	case 0:
		return w.idChars(propMaxIDLen + 1 + w.rng.Intn(200)), badRequest
	case 1:
		return []string{".", ".."}[w.rng.Intn(2)], nil
	}
	odd := []string{"%20", "%00", "%0A", "%C3%A9", "%F0%9F%98%80", ".", "~", "+", "%2B", "%3F", "%3B", ";", "%25", "%252F", "!", "$", "'", "(", "*", ",", "=", ":", "@", "%22", "%3C", "%7F", "%FF"}
	var b strings.Builder
	b.WriteString(w.idChars(w.rng.Intn(5)))
	b.WriteString(odd[w.rng.Intn(len(odd))])
	b.WriteString(w.idChars(w.rng.Intn(5)))
	s := b.String()
	if s == "." || s == ".." {
		return s, nil
	}
	return s, badRequest
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

func (w *world) idChars(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idAlphabet[w.rng.Intn(len(idAlphabet))]
	}
	return string(b)
}

func (w *world) word(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[w.rng.Intn(len(letters))]
	}
	return string(b)
}

// questionRunes are letters of many scripts and widths, and characters that are easy to
// mishandle: combining marks, joiners, direction overrides, astral emoji, noncharacters.
var questionRunes = []rune("abcdefghijklmnopqrstuvwxyz ABC0123456789?.,'\"\\/<>&%+éßøñçü事件数据가나ÅΩЖשלום مرحبا😀🚀𝔘\u0301\u200d\u202e\u00a0\u2028\ufffd\ufeff\U0010fffd")

// question is a question of exactly n code points.
func (w *world) question(n int) string {
	b := make([]rune, n)
	for i := range b {
		b[i] = questionRunes[w.rng.Intn(len(questionRunes))]
	}
	// Never white space alone, which the service refuses (a blank question asks nothing).
	b[0] = rune('a' + w.rng.Intn(26))
	return string(b)
}

func marshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- set-up calls, checked as any other

func (w *world) newConv(tok string) string {
	w.t.Helper()
	s := w.do(request{what: "set-up: conversation", op: "createConversation", method: http.MethodPost, target: w.base + "/v1/conversations",
		hdr: [][2]string{{"Authorization", "Bearer " + tok}, {"Content-Type", "application/json"}}, body: []byte("{}"), want: []int{http.StatusCreated}})
	var c gen.Conversation
	if err := json.Unmarshal(s.body, &c); err != nil || c.Id == "" {
		w.t.Fatalf("set-up: conversation: %v: %s", err, s.body)
	}
	return c.Id
}

func (w *world) newAsk(tok, cid, q string) string {
	w.t.Helper()
	s := w.do(request{what: "set-up: ask", op: "createAsk", method: http.MethodPost, target: w.base + "/v1/conversations/" + cid + "/asks",
		hdr: [][2]string{{"Authorization", "Bearer " + tok}, {"Content-Type", "application/json"}}, body: marshal(w.t, map[string]string{"question": q}),
		want: []int{http.StatusAccepted}})
	var tk gen.Ticket
	if err := json.Unmarshal(s.body, &tk); err != nil || tk.Ticket == "" {
		w.t.Fatalf("set-up: ask: %v: %s", err, s.body)
	}
	return tk.Ticket
}

func (w *world) waitDone(ticket string) int64 {
	w.t.Helper()
	s := w.do(request{what: "set-up: wait", op: "getAsk", method: http.MethodGet, target: w.base + "/v1/asks/" + ticket,
		hdr: [][2]string{{"Authorization", "Bearer " + propAlice}, {"Prefer", "wait=30"}}, want: []int{http.StatusOK}})
	var st gen.AskStatus
	if err := json.Unmarshal(s.body, &st); err != nil || st.Done == nil {
		w.t.Fatalf("set-up: the run did not end: %v: %s", err, s.body)
	}
	return st.LastSeq
}

// ---- the wire

// do sends r on a connection of its own, exactly as written, and checks the response.
func (w *world) do(r request) sent {
	w.t.Helper()
	w.sent++
	conn, err := net.DialTimeout("tcp", w.addr, 5*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b bytes.Buffer
	proto := r.proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	fmt.Fprintf(&b, "%s %s %s\r\n", r.method, r.target, proto)
	if !r.noHost {
		b.WriteString("Host: ask.test\r\n")
	}
	b.WriteString("Connection: close\r\n")
	for _, h := range r.hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	_, te := r.get("Transfer-Encoding")
	_, cl := r.get("Content-Length")
	if !te && !cl && (len(r.body) > 0 || r.method == http.MethodPost) {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.body))
	}
	b.WriteString("\r\n")
	b.Write(r.body)
	if _, err := conn.Write(b.Bytes()); err != nil && !errors.Is(err, net.ErrClosed) {
		// The service may answer and close before it has read an oversized body.
		w.t.Logf("%s: write: %v", r.what, err)
	}
	br := bufio.NewReader(conn)
	var resp *http.Response
	for resp == nil || resp.StatusCode < 200 {
		if resp, err = http.ReadResponse(br, &http.Request{Method: r.method}); err != nil {
			if r.rawHTTP && errors.Is(err, syscall.ECONNRESET) {
				w.t.Logf("%s (%s %.120s): read response: %v", r.what, r.method, r.target, err)
				return sent{r: r}
			}
			w.t.Fatalf("%s (%s %.120s): read response: %v", r.what, r.method, r.target, err)
		}
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil && r.rawHTTP {
		// The HTTP layer closed a connection it would not read on with the request's body
		// unread, and the reset cut its answer short: the status and headers are what it said.
		w.t.Logf("%s (%s %.120s): read body: %v", r.what, r.method, r.target, err)
		err = nil
	}
	if err != nil {
		w.t.Fatalf("%s (%s %.120s): read body: %v", r.what, r.method, r.target, err)
	}
	s := sent{r, resp, body}
	key := r.op
	if key == "" {
		key = "(none)"
	}
	if w.statuses[key] == nil {
		w.statuses[key] = map[int]int{}
	}
	w.statuses[key][resp.StatusCode]++
	w.check(s)
	return s
}

func (w *world) fail(r request, s sent, msg string) {
	w.t.Helper()
	w.fails++
	var hdr strings.Builder
	for _, h := range r.hdr {
		v := h[1]
		if len(v) > 60 {
			v = v[:60] + "…"
		}
		fmt.Fprintf(&hdr, " [%s: %q]", h[0], v)
	}
	w.t.Errorf("%s: %s %.160q%s body %.160q\n  → %d %s %.300s\n  %s", r.what, r.method, r.target, hdr.String(), r.body,
		s.resp.StatusCode, s.resp.Header.Get("Content-Type"), s.body, msg)
}

// check holds one response to the document.
func (w *world) check(s sent) {
	w.t.Helper()
	r, resp, status := s.r, s.resp, s.resp.StatusCode
	ct := resp.Header.Get("Content-Type")
	if r.want != nil && !slices.Contains(r.want, status) {
		w.fail(r, s, fmt.Sprintf("status %d, want one of %v", status, r.want))
	}
	// The HTTP layer's own refusals, before the service sees the request: text/plain, no
	// request id, and a status the document's description names for them.
	if resp.Header.Get("X-Request-Id") == "" && r.rawHTTP {
		if len(s.body) > 0 && !strings.HasPrefix(ct, "text/plain") {
			w.fail(r, s, "the HTTP layer's refusal is not text/plain")
		}
		if !slices.Contains(w.layerStatuses(), status) {
			w.fail(r, s, fmt.Sprintf("the HTTP layer answered %d, which the document's description does not name (it names %v)", status, w.layerStatuses()))
		}
		return
	}
	if resp.Header.Get("X-Request-Id") == "" {
		w.fail(r, s, "no X-Request-Id")
	}
	if status >= 400 {
		w.checkProblem(s)
	}
	if r.op == "" {
		switch status {
		case http.StatusNotFound, http.StatusBadRequest:
		case http.StatusMethodNotAllowed:
			if resp.Header.Get("Allow") == "" {
				w.fail(r, s, "405 without Allow")
			}
		case http.StatusNoContent:
			if r.method != http.MethodOptions || len(s.body) > 0 {
				w.fail(r, s, "204 for a request that reaches no operation")
			}
		default:
			w.fail(r, s, fmt.Sprintf("status %d for a request that reaches no operation", status))
		}
		return
	}
	route := w.route(r.op)
	head := r.method == http.MethodHead
	sse := strings.HasPrefix(ct, "text/event-stream")
	if err := openapi.CheckResponse(w.t.Context(), route, status, resp.Header, s.body, head || sse); err != nil {
		w.fail(r, s, "against the document: "+strings.Join(strings.Fields(err.Error()), " "))
		return
	}
	rsp := route.Operation.Responses.Status(status)
	if rsp == nil {
		w.fail(r, s, "status not documented")
		return
	}
	if len(rsp.Value.Content) > 0 && rsp.Value.Content.Get(ct) == nil {
		w.fail(r, s, fmt.Sprintf("Content-Type %q not documented for %d", ct, status))
	}
	if head && len(s.body) > 0 {
		w.fail(r, s, "a HEAD with content")
	}
	w.checkHeaders(s, route)
	if sse && !head {
		w.checkFrames(s)
	}
}

// layerStatuses are the statuses the document's description gives the HTTP layer's own
// refusals (each written `NNN` there).
func (w *world) layerStatuses() []int {
	var out []int
	for _, para := range strings.Split(w.doc.Info.Description, "\n\n") {
		if !strings.Contains(para, "HTTP layer") {
			continue
		}
		for _, m := range layerStatus.FindAllStringSubmatch(para, -1) {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	return out
}

var layerStatus = regexp.MustCompile("`([1-5][0-9][0-9])`")

func (w *world) route(op string) *routers.Route {
	for _, rt := range w.ops {
		if rt.Operation.OperationID == op {
			return rt
		}
	}
	w.t.Fatalf("no operation %s", op)
	return nil
}

// checkHeaders: the headers the document gives the response, where they are always sent.
func (w *world) checkHeaders(s sent, route *routers.Route) {
	resp, status := s.resp, s.resp.StatusCode
	want := []string{}
	switch status {
	case http.StatusCreated, http.StatusAccepted:
		if route.Operation.Responses.Status(status).Value.Headers["Location"] != nil {
			want = append(want, "Location")
		}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		want = append(want, "Retry-After")
	case http.StatusUnauthorized:
		want = append(want, "WWW-Authenticate")
	case http.StatusOK:
		if route.Operation.OperationID == "streamEvents" {
			if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Accel-Buffering") != "no" {
				w.fail(s.r, s, "a stream without Cache-Control: no-store and X-Accel-Buffering: no")
			}
		}
	case http.StatusConflict:
		var p gen.Problem
		if json.Unmarshal(s.body, &p) == nil && p.Type == "urn:ask:problem:idempotency-key-in-progress" {
			want = append(want, "Retry-After")
		}
	case http.StatusUnprocessableEntity:
		var p gen.Problem
		if s.r.method != http.MethodHead && (json.Unmarshal(s.body, &p) != nil || p.Type != "urn:ask:problem:idempotency-key-reused") {
			w.fail(s.r, s, "a 422 whose type is not urn:ask:problem:idempotency-key-reused")
		}
	}
	for _, h := range want {
		if resp.Header.Get(h) == "" {
			w.fail(s.r, s, "no "+h+" header")
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err != nil || n < 0 {
			w.fail(s.r, s, "Retry-After is not a number of seconds")
		}
	}
	if got := resp.Header.Values("Idempotent-Replayed"); len(got) > 0 && (len(got) != 1 || got[0] != "true") {
		w.fail(s.r, s, fmt.Sprintf("Idempotent-Replayed %q", got))
	}
	if loc := resp.Header.Get("Location"); loc != "" && status < 300 {
		var b struct {
			AsksURL   string `json:"asks_url"`
			StatusURL string `json:"status_url"`
		}
		if s.r.method != http.MethodHead && json.Unmarshal(s.body, &b) == nil && loc != b.AsksURL+b.StatusURL {
			w.fail(s.r, s, "Location is not the body's address")
		}
	}
}

// checkProblem: application/problem+json whose status member is the HTTP status, and which
// matches the Problem schema.
func (w *world) checkProblem(s sent) {
	if ct := s.resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		w.fail(s.r, s, "an error that is not application/problem+json")
		return
	}
	if s.r.method == http.MethodHead {
		return
	}
	var v any
	if err := json.Unmarshal(s.body, &v); err != nil {
		w.fail(s.r, s, "problem body: "+err.Error())
		return
	}
	if err := w.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		w.fail(s.r, s, "problem body against Problem: "+err.Error())
	}
	if m, ok := v.(map[string]any); !ok || m["status"] != float64(s.resp.StatusCode) {
		w.fail(s.r, s, "the problem's status member is not the HTTP status")
	}
}

// checkFrames validates every frame of an event stream: its data is an Event whose seq is the
// frame's id and whose type is its event; the stream ends after done.
func (w *world) checkFrames(s sent) {
	event := w.doc.Components.Schemas["Event"].Value
	var id, typ, last string
	var n int
	for line := range strings.Lines(string(s.body)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "event: "):
			typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			n++
			var v any
			if err := json.Unmarshal([]byte(line[6:]), &v); err != nil {
				w.fail(s.r, s, "a frame's data is not JSON")
				continue
			}
			if err := event.VisitJSON(v, openapi3.MultiErrors(), openapi3.EnableFormatValidation()); err != nil {
				w.fail(s.r, s, fmt.Sprintf("frame %s (%s) against Event: %v", id, typ, err))
			}
			m, _ := v.(map[string]any)
			if fmt.Sprint(m["seq"]) != id || m["type"] != typ {
				w.fail(s.r, s, fmt.Sprintf("frame id %s event %s, data seq %v type %v", id, typ, m["seq"], m["type"]))
			}
			last = typ
		}
	}
	if n > 0 && last != "done" {
		w.fail(s.r, s, "an ended ticket's stream that does not end with done")
	}
}
