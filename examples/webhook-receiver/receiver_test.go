package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

type oneUser struct{}

func (oneUser) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	if tok != "tok" {
		return ask.Identity{}, errors.New("no")
	}
	return ask.Identity{OID: "u", Tenant: "t", Token: tok}, nil
}

// askWith runs a real service whose webhooks are allowed to base and signs with secret, and asks
// one question with the webhook base+"/hook".
func askWith(t *testing.T, base, secret string) gen.Ticket {
	t.Helper()
	srv, err := server.New(server.Options{
		Runner: ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
			return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"churn"}}}
		}),
		Authenticator: oneUser{},
		Webhooks: server.WebhookOptions{Config: webhook.Config{
			Allow: []string{base + "/"}, Secrets: []string{webhooktest.Secret(), secret},
			AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Poll: 20 * time.Millisecond,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	c, err := client.New(hs.URL+"/ask", client.Options{Token: client.StaticToken("tok")})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := c.CreateConversation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := c.AskWith(t.Context(), conv.Id, "what is churn?", client.AskOptions{Webhook: base + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestGoReceiver(t *testing.T) {
	secret := webhooktest.Secret()
	got := make(chan delivery, 4)
	r, err := newReceiver([]string{secret}, func(_ string, d delivery) { got <- d })
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: l, Config: &http.Server{Handler: r}}
	hs.Start()
	defer hs.Close()
	tk := askWith(t, hs.URL, secret)
	select {
	case d := <-got:
		var term struct{ Type string }
		_ = json.Unmarshal(d.Terminal, &term)
		if d.Ticket != tk.Ticket || term.Type != "abstention" {
			t.Fatalf("delivery %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no verified delivery within 10s")
	}
	// A forged delivery is refused.
	resp, err := http.Post(hs.URL+"/hook", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned POST: %d, want 401", resp.StatusCode)
	}
}

func TestPythonReceiver(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed (apt-get install python3)")
	}
	secret := webhooktest.Secret()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, py, filepath.Join("python", "receiver.py"), "127.0.0.1:0")
	cmd.Env = append(cmd.Environ(), "WEBHOOK_SECRETS="+secret)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan map[string]any, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	next := func() map[string]any {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("the receiver exited")
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("the receiver said nothing within 10s")
		}
		return nil
	}
	base, _ := next()["listening"].(string)
	if base == "" {
		t.Fatal("no listening line")
	}
	tk := askWith(t, base[:len(base)-1], secret)
	m := next()
	if m["ticket"] != tk.Ticket || m["outcome"] != "abstention" || m["webhook_id"] == "" {
		t.Fatalf("python receiver handled %v", m)
	}
}

// TestGoReceiverRefusesNoSecret: started without WEBHOOK_SECRETS the receiver must refuse to run,
// not verify with an empty key (the library of the version it uses takes "" as a key, and
// strings.Split("", ",") is one empty secret): with an empty key anyone can sign a delivery.
func TestGoReceiverRefusesNoSecret(t *testing.T) {
	for _, env := range []string{"", " ", ",", "whsec_", "whsec_ , "} {
		if _, err := newReceiver(strings.Split(env, ","), func(string, delivery) {}); err == nil {
			t.Errorf("WEBHOOK_SECRETS=%q: a receiver started; want it refused", env)
		}
	}
	// A secret beside empty entries still starts one, verifying with that secret alone.
	secret := webhooktest.Secret()
	r, err := newReceiver(strings.Split(secret+", ,", ","), func(string, delivery) {})
	if err != nil || len(r.secrets) != 1 {
		t.Fatalf("WEBHOOK_SECRETS=%q: %v, %d secrets; want one", secret+", ,", err, len(r.secrets))
	}
}

// TestGoReceiverNamesItsMethod: a request other than a POST is a 405 whose Allow names POST, as
// RFC 9110 §15.5.6 requires of every 405; the receiver answered without it.
func TestGoReceiverNamesItsMethod(t *testing.T) {
	r, err := newReceiver([]string{webhooktest.Secret()}, func(string, delivery) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(method, "/hook", nil))
		if got, allow := w.Code, w.Header().Get("Allow"); got != http.StatusMethodNotAllowed || allow != http.MethodPost {
			t.Errorf("%s: %d, Allow %q; want 405, Allow %q", method, got, allow, http.MethodPost)
		}
	}
}
