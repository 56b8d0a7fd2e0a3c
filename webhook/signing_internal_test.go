package webhook

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// The reference libraries' test vector (standard-webhooks, libraries/python/tests/
// test_webhooks.py, test_sign_function): testSecret is its secret.
const (
	vecID   = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS   = 1614265330
	vecBody = `{"test": 2432232314}`
	vecSig  = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// TestSignatureIsTheReferences: the signature header is, byte for byte, what the reference
// libraries compute: v1, base64 HMAC-SHA256 over id.timestamp.body, one entry per secret in the
// operator's order, space-separated.
func TestSignatureIsTheReferences(t *testing.T) {
	next := webhooktest.Secret()
	s, err := newSender(Config{Secrets: []string{testSecret}}.withDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.sign("https://hooks.example/a", vecID, time.Unix(vecTS, 0), []byte(vecBody))
	if err != nil || got != vecSig {
		t.Fatalf("sign = %q, %v; want the reference's %q", got, err, vecSig)
	}
	both, err := newSender(Config{Secrets: []string{next, testSecret}}.withDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = both.sign("https://hooks.example/a", vecID, time.Unix(vecTS, 0), []byte(vecBody))
	entries := strings.Split(got, " ")
	if err != nil || len(entries) != 2 || entries[1] != vecSig || !strings.HasPrefix(entries[0], "v1,") {
		t.Fatalf("sign with two secrets = %q, %v; want \"v1,<new> %s\"", got, err, vecSig)
	}
}

// canonical is h as a server reads it off the wire: names in canonical form, so Get finds the
// headers the sender names exactly as the specification does (setExact).
func canonical(h http.Header) http.Header {
	c := http.Header{}
	for k, vs := range h {
		for _, v := range vs {
			c.Add(k, v)
		}
	}
	return c
}

// recorded is one request a recorder got, at the (bubble's) time it came.
type recorded struct {
	header http.Header
	body   []byte
	at     time.Time
}

// recorder answers 503 with Retry-After: 7 to its first request and 204 to the rest.
type recorder struct {
	mu  sync.Mutex
	got []recorded
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, recorded{header: canonical(req.Header), body: body, at: time.Now()})
	if len(r.got) == 1 {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"7"}}, Body: http.NoBody}, nil
	}
	return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody}, nil
}

// TestEveryAttemptVerifiesAsTheReferenceDoes: a delivery signed with two secrets (a rotation)
// and retried once verifies, on each attempt and with either secret, by the reference
// receivers' algorithm (webhooktest.ReferenceVerify, not the library the sender signs with);
// the webhook-id is the same on both attempts and webhook-timestamp is each attempt's own time,
// so a receiver's replay window holds for a retry made minutes after the first attempt.
func TestEveryAttemptVerifiesAsTheReferenceDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old, next := testSecret, webhooktest.Secret()
		rt := &recorder{}
		ob := store.NewMemoryOutbox()
		d, err := New(Options{Config: Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{next, old},
			BaseBackoff: time.Second, MaxBackoff: time.Minute}, Outbox: ob, Tickets: finished{}, Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t1", ID: "msg_1", URL: "https://hooks.example/a", Due: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		for {
			synctest.Wait()
			if w, _ := ob.Webhook(t.Context(), "t1"); w.State != gen.WebhookStatePending {
				break
			}
			time.Sleep(time.Second) // the bubble's clock moves on to the retry
		}
		cancel()
		<-done
		if len(rt.got) != 2 {
			t.Fatalf("%d attempts, want 2", len(rt.got))
		}
		for i, r := range rt.got {
			id, ts, sig := r.header.Get("webhook-id"), r.header.Get("webhook-timestamp"), r.header.Get("webhook-signature")
			if id != "msg_1" {
				t.Errorf("attempt %d: webhook-id %q, want msg_1 on every attempt", i+1, id)
			}
			if want := strconv.FormatInt(r.at.Unix(), 10); ts != want {
				t.Errorf("attempt %d: webhook-timestamp %q, want the attempt's own time %s", i+1, ts, want)
			}
			if n := len(strings.Split(sig, " ")); n != 2 {
				t.Errorf("attempt %d: %d signatures, want one per secret", i+1, n)
			}
			for _, s := range []string{old, next} {
				if err := webhooktest.ReferenceVerify(s, id, ts, sig, r.body, r.at); err != nil {
					t.Errorf("attempt %d does not verify as the reference does: %v", i+1, err)
				}
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("attempt %d: Content-Type %q", i+1, ct)
			}
		}
		if gap := rt.got[1].at.Sub(rt.got[0].at); gap < 7*time.Second {
			t.Errorf("retry %v after the first attempt, want at least the 7 s asked for", gap)
		}
	})
}

// TestHeaderNamesOnTheWire: the headers go out named exactly as the specification names them
// (webhook-id, webhook-timestamp, webhook-signature), not in Go's canonical Webhook-Id form: a
// receiver that reads its framework's raw header map (API Gateway's REST events keep the case
// that was sent) finds them under the names the specification and the reference libraries use.
func TestHeaderNamesOnTheWire(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	head := make(chan []string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			head <- nil
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		var lines []string
		for {
			line, err := br.ReadString('\n')
			line = strings.TrimRight(line, "\r\n")
			if err != nil || line == "" {
				break
			}
			lines = append(lines, line)
		}
		head <- lines
		_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
	}()
	cfg := Config{Secrets: []string{testSecret}, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}.withDefaults()
	s, err := newSender(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.send(t.Context(), "http://"+l.Addr().String()+"/hook", "msg_1", []byte(vecBody)); r.Status != http.StatusNoContent {
		t.Fatalf("send: %+v", r)
	}
	lines := <-head
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, name+": ")
		}
		if !found {
			t.Errorf("no %q header line as sent; the request head:\n%s", name, strings.Join(lines, "\n"))
		}
	}
}

// TestResponseHeadersAreBounded: a receiver that answers with megabytes of headers is not read
// to the end of them (the transport's default allows 10 MB per attempt, times the attempts in
// flight): the attempt ends as a transport failure after maxResponseHeaderBytes.
func TestResponseHeadersAreBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		_, _ = io.ReadFull(br, make([]byte, len(vecBody)))
		_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n")
		filler := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		for range 1024 { // 1 MB of headers
			if _, err := io.WriteString(c, filler); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, "\r\n")
	}()
	cfg := Config{Secrets: []string{testSecret}, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}.withDefaults()
	s, err := newSender(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.send(t.Context(), "http://"+l.Addr().String()+"/hook", "msg_1", []byte(vecBody)); r.Status != 0 || r.Err != "transport" {
		t.Fatalf("an answer with 1 MB of headers: %+v, want no status and a transport failure", r)
	}
}

// TestEndpointSecretsSignTheirPrefixAlone: a delivery to a prefix with secrets of its own
// (EndpointSecrets) is signed with those alone, so no other receiver can sign one it would
// accept; a delivery to another prefix is signed with the shared secrets alone. The longest
// prefix a URL is under decides.
func TestEndpointSecretsSignTheirPrefixAlone(t *testing.T) {
	shared, a, a2 := webhooktest.Secret(), webhooktest.Secret(), webhooktest.Secret()
	c := Config{Allow: []string{"https://hooks.example/", "https://hooks.example/team-a/"}, Secrets: []string{shared},
		EndpointSecrets: map[string][]string{"https://hooks.example/team-a/": {a, a2}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := newSender(c.withDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(secret, sig string) bool {
		w, err := newSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", vecID)
		h.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		h.Set("webhook-signature", sig)
		return w.Verify([]byte(vecBody), h) == nil
	}
	for _, tc := range []struct {
		url        string
		yes, no    []string
		signatures int
	}{
		{"https://hooks.example/team-a/in", []string{a, a2}, []string{shared}, 2},
		{"https://hooks.example:443/team-a/", []string{a, a2}, []string{shared}, 2},
		{"https://hooks.example/team-b/in", []string{shared}, []string{a, a2}, 1},
		{"https://hooks.example/team-a", []string{shared}, []string{a, a2}, 1}, // not under team-a/
	} {
		sig, err := s.sign(tc.url, vecID, time.Now(), []byte(vecBody))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(strings.Fields(sig)); n != tc.signatures {
			t.Errorf("%s: %d signatures, want %d", tc.url, n, tc.signatures)
		}
		for _, sec := range tc.yes {
			if !verifies(sec, sig) {
				t.Errorf("%s: does not verify with a secret that should sign it", tc.url)
			}
		}
		for _, sec := range tc.no {
			if verifies(sec, sig) {
				t.Errorf("%s: verifies with a secret that must not sign it", tc.url)
			}
		}
	}
}

// TestEndpointSecretsValidated: the shared secrets are needed only for prefixes without their
// own; an entry must name an allowed prefix as written and carry valid secrets; no error holds a
// secret, not even one written where the prefix goes.
func TestEndpointSecretsValidated(t *testing.T) {
	own := webhooktest.Secret()
	for _, tc := range []struct {
		name string
		c    Config
		want string // "" is valid
	}{
		{"every prefix its own", Config{Allow: []string{"https://a.example/"}, EndpointSecrets: map[string][]string{"https://a.example/": {own}}}, ""},
		{"one prefix without", Config{Allow: []string{"https://a.example/", "https://b.example/"}, EndpointSecrets: map[string][]string{"https://a.example/": {own}}},
			"DAS_ASK_WEBHOOK_SECRETS: required"},
		{"not an allowed prefix", Config{Allow: []string{"https://a.example/"}, Secrets: []string{own}, EndpointSecrets: map[string][]string{"https://b.example/": {own}}},
			"entry 1 (in the order of their prefixes): its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes"},
		{"secret first", Config{Allow: []string{"https://a.example/"}, Secrets: []string{own}, EndpointSecrets: map[string][]string{own: {"https://a.example/"}}},
			"its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes"},
		// A secret run into the prefix is still a URL: it must not be named as one (found by an
		// audit: the error quoted "https://a.example/whsec_…").
		{"a secret run into the prefix", Config{Allow: []string{"https://a.example/"}, Secrets: []string{own}, EndpointSecrets: map[string][]string{"https://a.example/" + own: {own}}},
			"its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes"},
		{"a secret after an equals sign", Config{Allow: []string{"https://a.example/"}, Secrets: []string{own}, EndpointSecrets: map[string][]string{"https://a.example/=" + own: {own}}},
			"its first word is not one of DAS_ASK_WEBHOOK_ALLOW's prefixes"},
		// The same prefix spelled twice: a URL under both is the first's, so the second's own
		// secrets would never sign (found by an audit).
		{"one prefix spelled twice", Config{Allow: []string{"https://hooks.example/a/", "https://HOOKS.example:443/a/"}, Secrets: []string{own},
			EndpointSecrets: map[string][]string{"https://HOOKS.example:443/a/": {own}}},
			`DAS_ASK_WEBHOOK_ALLOW also names it as "https://hooks.example/a/"`},
		// Webhooks off: the entry is ignored (askd warns, naming the variable), not refused.
		{"webhooks off", Config{EndpointSecrets: map[string][]string{"https://a.example/": {own}}}, ""},
		{"a bad secret", Config{Allow: []string{"https://a.example/"}, EndpointSecrets: map[string][]string{"https://a.example/": {"whsec_short"}}},
			`"https://a.example/": secret 1: want whsec_`},
		{"no secret", Config{Allow: []string{"https://a.example/"}, Secrets: []string{own}, EndpointSecrets: map[string][]string{"https://a.example/": nil}},
			"no secret follows the prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want it to say %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), strings.TrimPrefix(own, "whsec_")) || strings.Contains(err.Error(), "whsec_short")):
				t.Fatalf("Validate's error holds a secret: %v", err)
			}
		})
	}
}
