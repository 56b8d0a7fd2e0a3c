package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/internal/logtest"
)

func TestAskdServesAndStops(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(stub.Handler())
	defer model.Close()
	env := map[string]string{
		"DAS_JWKS_URL": cfg.JWKSURL, "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
		"DAS_REQUIRED_SCOPE": cfg.RequiredScope, "ASK_LLM": "stub", "ASK_LLM_BASE_URL": model.URL + "/v1",
		"DAS_SOURCES": "demo=http://127.0.0.1:1/mcp", "DAS_ASK_SHUTDOWN_GRACE_S": "0",
		"DAS_ASK_ADMIN_ADDR": "127.0.0.1:0",
		// Never the default port: the dev stack (make ask-serve) may be running beside the tests.
		"DAS_ASK_ADDR": "127.0.0.1:0",
	}
	m, sigs, errc, logs := startAskd(t, env)
	base := m.URL()
	admin := "http://" + m.AdminAddr()

	resp, err := http.Get(base + "/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("contract: %d", resp.StatusCode)
	}
	resp, err = http.Post(base+"/v1/conversations", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("no bearer: %d %q, want 401 with a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/conversations", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+idp.Token(t, "alice"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("conversation with a valid bearer: %d", resp.StatusCode)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the API's response")
	}

	// The admin listener: ready (the JWKS is loaded, the store answers), alive, and the
	// metrics counted the refused and the admitted conversation.
	for path, want := range map[string]int{"/readyz": http.StatusOK, "/healthz": http.StatusOK, "/metrics": http.StatusOK} {
		resp, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("admin %s: %d %s", path, resp.StatusCode, b)
		}
		if path == "/metrics" {
			for _, line := range []string{
				`ask_admission_refusals_total{reason="unauthorized",route="create_conversation"} 1`,
				`ask_http_requests_total{code="201",method="POST",route="create_conversation"} 1`,
			} {
				if !strings.Contains(string(b), line) {
					t.Errorf("/metrics lacks %s", line)
				}
			}
		}
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("the API listener serves /metrics: a gateway would expose it")
	}

	sigs <- syscall.SIGTERM
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("askd stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("askd did not stop")
	}
	if !strings.Contains(logs.String(), `"msg":"serving"`) || !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("want JSON logs by default, serving then stopped, got:\n%s", logs.String())
	}
}

func TestAskdRejectsBadSettings(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no issuer":    {"DAS_JWKS_URL": "http://127.0.0.1:1/jwks", "DAS_AUDIENCE": "das"},
		"bad deadline": {"DAS_ASK_DEADLINE_S": "-3"},
		"bad log":      {"DAS_LOG_FORMAT": "xml"},
		"bad admin":    {"DAS_ASK_ADMIN_ADDR": "everywhere"},
	} {
		t.Run(name, func(t *testing.T) {
			// If a bad setting were only noticed after listening, a fixed port could collide.
			env["DAS_ASK_ADDR"] = "127.0.0.1:0"
			var logs bytes.Buffer
			err := run(nil, config.MapEnv(env), &logs, nil)
			if err == nil {
				t.Fatal("askd started with bad settings")
			}
			// A start that failed says so with its error alone, not with a "stopped" line
			// that reads as if it had served.
			if strings.Contains(logs.String(), "stopped") {
				t.Errorf("a failed start logged:\n%s", logs.String())
			}
			named := false
			for k := range env {
				named = named || strings.Contains(err.Error(), k)
			}
			if !named && !strings.Contains(err.Error(), "DAS_ISSUER") {
				t.Errorf("error %q names no variable", err)
			}
		})
	}
}

// TestAskdSecondSignalEndsTheGrace: the first SIGTERM stops admission and readiness but leaves a
// running ask its grace (an hour here); a second ends the grace, and the ask ends at once with
// error{shutdown} and done, which its open stream receives before askd exits.
func TestAskdSecondSignalEndsTheGrace(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	called := make(chan struct{}, 1)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A model that never answers: the ask runs until it is ended. (The body read first, so
		// that the server notices the client going and the handler returns.)
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case called <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer model.Close()
	v, err := auth.New(t.Context(), cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.New(t.Context(), source.Options{Authenticator: v})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	srcSrv := httptest.NewServer(src.Handler())
	defer srcSrv.Close()
	env := map[string]string{
		"DAS_JWKS_URL": cfg.JWKSURL, "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
		"DAS_REQUIRED_SCOPE": cfg.RequiredScope, "ASK_LLM": "stub", "ASK_LLM_BASE_URL": model.URL + "/v1",
		"DAS_SOURCES": "demo=" + srcSrv.URL + "/mcp", "DAS_ASK_SHUTDOWN_GRACE_S": "3600",
		"DAS_ASK_ADMIN_ADDR": "127.0.0.1:0", "DAS_ASK_ADDR": "127.0.0.1:0",
	}
	m, sigs, errc, logs := startAskd(t, env)
	defer m.EndGrace() // a failure below must not leave askd waiting out its hour
	base, bearer := m.URL(), "Bearer "+idp.Token(t, "alice")
	call := func(method, path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", bearer)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call(http.MethodPost, "/v1/conversations", "{}")
	var conv struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&conv)
	resp.Body.Close()
	resp = call(http.MethodPost, "/v1/conversations/"+conv.ID+"/asks", `{"question":"How many sev1 incidents did we have in 2026-Q2?"}`)
	var ticket struct {
		ID string `json:"ticket"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ticket)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || ticket.ID == "" {
		t.Fatalf("ask: %d", resp.StatusCode)
	}
	stream := call(http.MethodGet, "/v1/asks/"+ticket.ID+"/events", "")
	defer stream.Body.Close()
	select {
	case <-called: // the run is waiting on the model
	case <-time.After(20 * time.Second):
		t.Fatalf("the run never called the model\n%s", logs.String())
	}

	sigs <- syscall.SIGTERM
	admin := "http://" + m.AdminAddr()
	for deadline := time.Now().Add(20 * time.Second); ; { // readiness turns false at the signal
		r, err := http.Get(admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz still ready after SIGTERM")
		}
		runtime.Gosched()
	}
	resp = call(http.MethodGet, "/v1/asks/"+ticket.ID, "")
	var status struct{ State string }
	_ = json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if status.State != "running" {
		t.Errorf("after one SIGTERM the ask is %q, want running within its grace", status.State)
	}

	sigs <- syscall.SIGTERM
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(stream.Body)
		got <- b
	}()
	var events []byte
	select {
	case events = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the ask did not end after the second SIGTERM")
	}
	if !strings.Contains(string(events), `"kind":"shutdown"`) || !strings.Contains(string(events), "event: done") {
		t.Errorf("the stream did not end with error{shutdown} and done:\n%s", events)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("askd stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("askd did not stop after the second SIGTERM")
	}
	if !strings.Contains(logs.String(), "ending the shutdown grace") {
		t.Errorf("the second signal was not logged:\n%s", logs.String())
	}
}

// startAskd runs askd on env as main does, on a goroutine, and waits until it serves: its Main,
// the signals it reads, its end, and its logs.
func startAskd(t *testing.T, env map[string]string) (*app.Main, chan<- os.Signal, <-chan error, *logtest.Buffer) {
	t.Helper()
	sigs := make(chan os.Signal, 2)
	logs := new(logtest.Buffer)
	ready := make(chan *app.Main, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(sigs, config.MapEnv(env), logs, ready) }()
	select {
	case m := <-ready:
		return m, sigs, errc, logs
	case err := <-errc:
		t.Fatalf("askd stopped at start: %v\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("askd did not start")
	}
	return nil, nil, nil, nil
}

// TestAskdUsage: -h explains where the settings come from and exits 0; any other argument is
// refused with exit 2 rather than ignored (askd reads no flags), and askd does not start.
func TestAskdUsage(t *testing.T) {
	for _, c := range []struct {
		args     []string
		code     int
		done     bool
		out, err string
	}{
		{args: nil, code: 0, done: false},
		{args: []string{"-h"}, code: 0, done: true, out: "DAS_JWKS_URL"},
		{args: []string{"--help"}, code: 0, done: true, out: "takes no arguments"},
		{args: []string{"-addr", ":8080"}, code: 2, done: true, err: `unexpected argument "-addr"`},
		{args: []string{"serve"}, code: 2, done: true, err: "takes no arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code, done := usage(c.args, &stdout, &stderr)
		if code != c.code || done != c.done {
			t.Errorf("usage(%q) = %d, %v; want %d, %v", c.args, code, done, c.code, c.done)
		}
		if !strings.Contains(stdout.String(), c.out) || (c.out == "" && stdout.Len() > 0) {
			t.Errorf("usage(%q) stdout %q, want it to contain %q", c.args, stdout.String(), c.out)
		}
		if !strings.Contains(stderr.String(), c.err) || (c.err == "" && stderr.Len() > 0) {
			t.Errorf("usage(%q) stderr %q, want it to contain %q", c.args, stderr.String(), c.err)
		}
	}
}

// TestAskdExitStatus: a setting out of its range (negative, zero, absurd), or a bearer setting
// missing, stops askd at start with a message naming the variable and exit status 2, before
// anything listens; a start that fails otherwise (its address taken) exits 1.
func TestAskdExitStatus(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	valid := map[string]string{
		"DAS_JWKS_URL": cfg.JWKSURL, "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
		"DAS_ASK_ADDR": "127.0.0.1:0", "DAS_ASK_ADMIN_ADDR": "off", "DAS_SOURCES": "demo=http://127.0.0.1:1/mcp",
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		name, key, value string
		status           int
		says             string
	}{
		{"a negative TTL", "DAS_ASK_TTL_S", "-1", 2, `DAS_ASK_TTL_S="-1": want a whole number of seconds from 1 to`},
		{"no keep-alive", "DAS_ASK_KEEPALIVE_S", "0", 2, `DAS_ASK_KEEPALIVE_S="0"`},
		{"an absurd body limit", "DAS_ASK_MAX_BODY_BYTES", "99999999999", 2, `DAS_ASK_MAX_BODY_BYTES="99999999999": want a whole number from 1024 to 16777216`},
		{"fewer events than a run's frame", "DAS_ASK_MAX_EVENTS", "7", 2, `DAS_ASK_MAX_EVENTS="7"`},
		{"no issuer", "DAS_ISSUER", "", 2, "DAS_ISSUER is required"},
		{"its address taken", "DAS_ASK_ADDR", taken.Addr().String(), 1, "address already in use"},
		// A Redis URL that cannot be parsed is a setting to correct, as an unknown scheme is:
		// no restart gets past it. Its password is never echoed.
		{"a Redis URL without a port number", "DAS_ASK_STORE", "redis://:hunter2@127.0.0.1:x/0", 2, "DAS_ASK_STORE: redis store: invalid URL: not a URL (a port that is not a number"},
		{"a Redis URL whose db is not a number", "DAS_ASK_STORE", "redis://127.0.0.1:6379/abc", 2, `DAS_ASK_STORE: redis store: invalid URL: invalid database number: "abc"`},
		{"a Sentinel URL naming no master", "DAS_ASK_STORE", "redis+sentinel://127.0.0.1:26379", 2, "DAS_ASK_STORE: redis store: invalid URL: the Sentinel form's path: want /master or /master/db"},
		{"a Redis that cannot be reached", "DAS_ASK_STORE", "redis://127.0.0.1:1/0", 1, "DAS_ASK_STORE: redis store: dial"},
	} {
		env := maps.Clone(valid)
		if c.value == "" {
			delete(env, c.key)
		} else {
			env[c.key] = c.value
		}
		err := run(make(chan os.Signal), config.MapEnv(env), io.Discard, nil)
		if err == nil {
			t.Errorf("%s: askd started", c.name)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the message echoes the password: %q", c.name, err)
		}
		if got := exitStatus(err); got != c.status || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: exit status %d, message %q; want %d and a message holding %q", c.name, got, err, c.status, c.says)
		}
	}
}

// TestAskdRefusesARedisURLBeforeStarting: a Redis URL that cannot be used is refused (exit 2)
// before anything starts: the issuer's JWKS is not fetched, as for every other invalid setting.
// It was found only when the store opened, after the first JWKS fetch (and its wait for an
// identity provider slow to answer).
func TestAskdRefusesARedisURLBeforeStarting(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	var fetched atomic.Int32
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		resp, err := http.Get(cfg.JWKSURL)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	}))
	defer jwks.Close()
	env := map[string]string{
		"DAS_JWKS_URL": jwks.URL, "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
		"DAS_ASK_ADDR": "127.0.0.1:0", "DAS_ASK_ADMIN_ADDR": "off", "DAS_SOURCES": "demo=http://127.0.0.1:1/mcp",
		"DAS_ASK_STORE": "redis+cluster://127.0.0.1:7000/3",
	}
	err := run(make(chan os.Signal), config.MapEnv(env), io.Discard, nil)
	if got := exitStatus(err); got != 2 || err == nil || !strings.Contains(err.Error(), "DAS_ASK_STORE: redis store: invalid URL: a database in the path") {
		t.Fatalf("exit status %d, %v; want 2 and the URL's fault", got, err)
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the JWKS was fetched %d times before the Redis URL was refused", n)
	}
}

// TestAskdSignalWhileStarting: a SIGTERM while askd is still starting (here waiting for a Redis
// that takes the connection and never answers) stops it as a stop, not as a failure to start:
// run returns nil (exit 0), so a supervisor that asked for the stop does not record a failed
// unit, nor restart it. It returned "DAS_ASK_STORE: redis store: context canceled", exit 1. It
// logs that it stopped while starting, and nothing of running asks, for none ran.
func TestAskdSignalWhileStarting(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	stopWhileStarting(t, "dialled its store", func(mute string) map[string]string {
		return map[string]string{
			"DAS_JWKS_URL": cfg.JWKSURL, "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
			"DAS_ASK_ADDR": "127.0.0.1:0", "DAS_ASK_ADMIN_ADDR": "off", "DAS_SOURCES": "demo=http://127.0.0.1:1/mcp",
			"DAS_ASK_STORE": "redis://" + mute + "/0",
		}
	})
}

// TestAskdSignalWhileWaitingForTheIdP: a SIGTERM while askd waits at start for an identity
// provider that takes the connection and never answers (operations.md: "a store or an identity
// provider slow to answer") is a stop while starting, as for a slow store: the line `stopped
// while starting`, exit 0, and neither listener opened. askd took the cancelled JWKS fetch for
// one that failed, went on, opened its listeners and logged `serving`, then the grace of
// running asks: a process told to stop began to serve.
func TestAskdSignalWhileWaitingForTheIdP(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	stopWhileStarting(t, "fetched the JWKS", func(mute string) map[string]string {
		return map[string]string{
			"DAS_JWKS_URL": "http://" + mute + "/.well-known/jwks.json", "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
			"DAS_ASK_ADDR": "127.0.0.1:0", "DAS_ASK_ADMIN_ADDR": "127.0.0.1:0", "DAS_SOURCES": "demo=http://127.0.0.1:1/mcp",
		}
	})
}

// stopWhileStarting runs askd with the environment env gives for the address of a listener
// that takes connections and never answers, sends SIGTERM once askd has connected to it (what
// it did, in words: "dialled its store"), and holds the stop to a stop while starting: run
// returns nil (exit 0), and askd logs `stopped while starting` with the signal, not `serving`,
// and nothing of running asks, for none ran (the line that gives running asks the grace was
// written too, before this one, and said what was not so).
func stopWhileStarting(t *testing.T, what string, env func(mute string) map[string]string) {
	t.Helper()
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		mute.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	sigs := make(chan os.Signal, 2)
	var logs bytes.Buffer
	errc := make(chan error, 1)
	go func() { errc <- run(sigs, config.MapEnv(env(mute.Addr().String())), &logs, nil) }()
	select {
	case c := <-accepted: // askd is waiting on it: starting
		accepted <- c
	case err := <-errc:
		t.Fatalf("askd ended before it %s: %v", what, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("askd never %s", what)
	}
	sigs <- syscall.SIGTERM
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("askd stopped while starting with %v (exit status %d), want nil: a stop asked for", err, exitStatus(err))
		}
		if got := logs.String(); !strings.Contains(got, "stopped while starting") || !strings.Contains(got, `"signal":"terminated"`) ||
			strings.Contains(got, `"msg":"serving"`) || strings.Contains(got, "running asks") {
			t.Errorf("askd's lines for a stop while starting, want `stopped while starting` with the signal, no `serving` and no word of running asks:\n%s", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("askd did not stop")
	}
}

// TestAskdRefusesAMisspeltSetting: a DAS_ variable that is no setting (DAS_ASK_TLL_S for
// DAS_ASK_TTL_S) stops askd at start, naming it and the setting it is nearest to, with exit
// status 2 and beside any invalid value, never echoing what it holds; askd served with the
// default TTL and said nothing.
func TestAskdRefusesAMisspeltSetting(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	env := map[string]string{
		"DAS_JWKS_URL": cfg.JWKSURL, "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
		"DAS_ASK_ADDR": "127.0.0.1:0", "DAS_ASK_ADMIN_ADDR": "off", "DAS_SOURCES": "demo=http://127.0.0.1:1/mcp",
		"DAS_ASK_TLL_S": "hunter2", "DAS_ASK_DEADLINE_S": "-1",
	}
	defer func(f func() []string) { environNames = f }(environNames)
	environNames = func() []string { return slices.Collect(maps.Keys(env)) }
	err := run(make(chan os.Signal), config.MapEnv(env), io.Discard, nil)
	if err == nil {
		t.Fatal("askd started with a misspelt setting")
	}
	for _, want := range []string{"DAS_ASK_TLL_S: no such setting (did you mean DAS_ASK_TTL_S?)", `DAS_ASK_DEADLINE_S="-1"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %q", want, err)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error echoes the value: %q", err)
	}
	if got := exitStatus(err); got != 2 {
		t.Errorf("exit status %d, want 2", got)
	}
}
