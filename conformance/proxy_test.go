package conformance_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/das-ask/ask/demo/idp"
)

// sseFrame is one block of an event stream (the lines up to a blank line), as the proxy relays it.
type sseFrame struct{ lines []string }

func (f sseFrame) comment() bool { return len(f.lines) > 0 && strings.HasPrefix(f.lines[0], ":") }

func (f sseFrame) field(name string) (string, bool) {
	for _, l := range f.lines {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return strings.TrimPrefix(v, " "), true
		}
	}
	return "", false
}

// data decodes the frame's data as a JSON object, or nil.
func (f sseFrame) data() map[string]any {
	d, ok := f.field("data")
	if !ok {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(d), &m) != nil {
		return nil
	}
	return m
}

// event builds a well-formed frame from an event object.
func eventFrame(m map[string]any) sseFrame {
	b, _ := json.Marshal(m)
	seq, _ := m["seq"].(float64)
	typ, _ := m["type"].(string)
	return sseFrame{lines: []string{"id: " + strconv.FormatInt(int64(seq), 10), "event: " + typ, "data: " + string(b)}}
}

// streamState is what the proxy knows while relaying one stream.
type streamState struct {
	// auth is the stream request's Authorization header.
	auth string
	// cursor is the stream request's Last-Event-ID, or else its after parameter ("" for none).
	cursor  string
	lastSeq int64
	gap     bool
	done    bool
}

// variant is a deliberately broken service: the real one behind a proxy that perturbs the wire.
type variant struct {
	name string
	// fails are the checks that must fail against this variant.
	fails []string
	// request changes a request before it is forwarded.
	request func(p *proxy, r *http.Request)
	// intercept answers a request itself when it returns true.
	intercept func(p *proxy, w http.ResponseWriter, r *http.Request) bool
	// body changes a response that is not a stream.
	body func(p *proxy, r *http.Request, status int, h http.Header, body []byte) (int, []byte)
	// header changes a stream's response headers.
	header func(h http.Header)
	// streamHeader changes a stream's response headers knowing its request.
	streamHeader func(p *proxy, r *http.Request, h http.Header)
	// frame changes one frame of a stream into any number of frames.
	frame func(p *proxy, st *streamState, f sseFrame) []sseFrame
	// disconnected is called when a client leaves a stream before done.
	disconnected func(p *proxy, r *http.Request)
	// audit changes each line of the source's audit log as the suite reads it (a proxy in front
	// of the audit endpoint): what a source would have recorded of a broken service's calls.
	audit func(line map[string]any)
	// webhook changes each webhook delivery on its way to the suite's receiver (the test stack's
	// relay): what a broken service would have delivered.
	webhook func(r *http.Request)
}

// proxy relays to upstream through a variant.
type proxy struct {
	t        *testing.T
	upstream *url.URL
	v        variant
	idp      *idp.IdP

	mu        sync.Mutex
	questions map[string]string // ticket → question, learned from accepted events
	seen      map[string]bool   // tickets something was remembered about
}

// startProxy starts a proxy through v to the service at target (a base URL).
func startProxy(t *testing.T, st *testStack, target string, v variant) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, upstream: u, v: v, idp: st.idpFor(target), questions: map[string]string{}, seen: map[string]bool{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

func (p *proxy) remember(key string) (already bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	already = p.seen[key]
	p.seen[key] = true
	return already
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.v.intercept != nil && p.v.intercept(p, w, r) {
		return
	}
	if p.v.request != nil {
		p.v.request(p, r)
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.upstream.Scheme, p.upstream.Host
	out.Host = p.upstream.Host
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		status := resp.StatusCode
		if p.v.body != nil {
			status, body = p.v.body(p, r, status, w.Header(), body)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	if p.v.header != nil {
		p.v.header(w.Header())
	}
	if p.v.streamHeader != nil {
		p.v.streamHeader(p, r, w.Header())
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	st := &streamState{auth: r.Header.Get("Authorization"), cursor: r.Header.Get("Last-Event-ID")}
	if st.cursor == "" {
		st.cursor = r.URL.Query().Get("after")
	}
	defer func() {
		if p.v.disconnected != nil && !st.done && r.Context().Err() != nil {
			p.v.disconnected(p, r)
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var cur sseFrame
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			cur.lines = append(cur.lines, line)
			continue
		}
		if len(cur.lines) == 0 {
			continue
		}
		f := cur
		cur = sseFrame{}
		if m := f.data(); m != nil {
			seq := int64(m["seq"].(float64))
			if st.lastSeq > 0 && seq > st.lastSeq+1 {
				st.gap = true
			}
			st.lastSeq = seq
			st.done = st.done || m["type"] == "done"
			if m["type"] == "accepted" {
				p.mu.Lock()
				p.questions[m["ticket"].(string)] = m["question"].(string)
				p.mu.Unlock()
			}
		}
		frames := []sseFrame{f}
		if p.v.frame != nil {
			frames = p.v.frame(p, st, f)
		}
		var b bytes.Buffer
		for _, g := range frames {
			b.WriteString(strings.Join(g.lines, "\n") + "\n\n")
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return
		}
		_ = rc.Flush()
	}
}

// startAuditProxy serves the audit log at source through edit, one line at a time.
func startAuditProxy(t *testing.T, source string, edit func(map[string]any)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(source + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var lines []map[string]any
		if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
			_ = json.Unmarshal(b, &lines)
		} else {
			for _, l := range bytes.Split(body, []byte("\n")) {
				var m map[string]any
				if json.Unmarshal(l, &m) == nil {
					lines = append(lines, m)
				}
			}
		}
		for _, m := range lines {
			edit(m)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_ = json.NewEncoder(w).Encode(lines)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (p *proxy) question(ticket string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.questions[ticket]
}

// isOp reports whether r is the operation method + path suffix (a regexp-free match on the
// path's shape below the base path).
func isOp(r *http.Request, method, shape string) bool {
	if r.Method != method {
		return false
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/ask"), "/"), "/")
	want := strings.Split(strings.Trim(shape, "/"), "/")
	if len(parts) != len(want) {
		return false
	}
	for i := range want {
		if want[i] != "*" && want[i] != parts[i] {
			return false
		}
	}
	return true
}

// editEvents rewrites the data of event frames of one type.
func editEvents(typ string, edit func(p *proxy, m map[string]any)) func(*proxy, *streamState, sseFrame) []sseFrame {
	return func(p *proxy, _ *streamState, f sseFrame) []sseFrame {
		m := f.data()
		if m == nil || (typ != "" && m["type"] != typ) {
			return []sseFrame{f}
		}
		edit(p, m)
		return []sseFrame{eventFrame(m)}
	}
}

// editJSON rewrites a JSON body of the matching operation and status.
func editJSON(method, shape string, status int, edit func(m map[string]any)) func(*proxy, *http.Request, int, http.Header, []byte) (int, []byte) {
	return func(_ *proxy, r *http.Request, st int, _ http.Header, body []byte) (int, []byte) {
		if st != status || !isOp(r, method, shape) {
			return st, body
		}
		var m map[string]any
		if json.Unmarshal(body, &m) != nil {
			return st, body
		}
		edit(m)
		b, _ := json.Marshal(m)
		return st, b
	}
}

// problem answers a problem+json.
func problem(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status})
}
