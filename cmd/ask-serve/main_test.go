package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/internal/loopback"
)

// ask-serve starts the whole system, says where it is, serves the contract, and stops cleanly
// at Ctrl-C.
func TestAskServeStartsServesAndStops(t *testing.T) {
	s := startServe(t, nil, nil)
	resp, err := http.Get(s.askURL + "/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET the contract: %d", resp.StatusCode)
	}
	s.stop()
	if _, err := http.Get(s.askURL + "/v1/openapi.yaml"); err == nil {
		t.Error("the service still answers after stop")
	}
}

func TestAskServeRejectsBadSettings(t *testing.T) {
	lookup := func(k string) (string, bool) { return "soon", k == "DAS_ASK_TTL_S" }
	err := run(nil, []string{"-addr", "127.0.0.1:0"}, lookup, io.Discard, io.Discard)
	if err == nil || !regexp.MustCompile(`DAS_ASK_TTL_S`).MatchString(err.Error()) {
		t.Fatalf("err = %v, want one naming DAS_ASK_TTL_S", err)
	}
}

// TestAskServeRefusesAMisspeltSetting: a DAS_ variable that is no setting stops ask-serve before
// anything starts, naming it and the setting it is nearest to, beside any invalid value, with
// exit status 2 as askd's, and never echoing its value; ask-serve started with the default and
// said nothing, and exited 1 for an invalid value where askd exits 2.
func TestAskServeRefusesAMisspeltSetting(t *testing.T) {
	env := map[string]string{"DAS_ASK_TLL_S": "hunter2", "DAS_ASK_DEADLINE_S": "-1"}
	defer func(f func() []string) { environNames = f }(environNames)
	environNames = func() []string { return []string{"PATH", "DAS_ASK_TLL_S", "DAS_ASK_DEADLINE_S"} }
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	err := run(nil, []string{"-addr", "127.0.0.1:0"}, lookup, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("ask-serve started with a misspelt setting")
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
	delete(env, "DAS_ASK_TLL_S")
	environNames = func() []string { return []string{"DAS_ASK_DEADLINE_S"} }
	if err := run(nil, []string{"-addr", "127.0.0.1:0"}, lookup, io.Discard, io.Discard); exitStatus(err) != 2 {
		t.Errorf("an invalid value alone: exit status %d (%v), want 2", exitStatus(err), err)
	}
}

// An argument is refused before anything starts, as askd refuses one, with askd's exit status 2
// (it was 1), as is a flag it does not know. It was ignored, so make ask-serve ARGS="-ui false"
// (-ui, a boolean flag, then an argument "false") served the web page it meant to turn off, and
// said nothing.
func TestAskServeRefusesArguments(t *testing.T) {
	if err := run(nil, []string{"-bogus"}, func(string) (string, bool) { return "", false }, io.Discard, io.Discard); exitStatus(err) != 2 ||
		!strings.Contains(err.Error(), "-bogus") {
		t.Errorf("ask-serve -bogus: %v, exit status %d, want one naming the flag, and 2", err, exitStatus(err))
	}
	for _, args := range [][]string{{"-ui", "false"}, {"-split", "no"}, {"serve"}} {
		sigs := make(chan os.Signal, 2)
		var stdout strings.Builder
		errc := make(chan error, 1)
		go func() {
			errc <- run(sigs, append([]string{"-addr", "127.0.0.1:0", "-idp-addr", "127.0.0.1:0", "-source-addr", "127.0.0.1:0",
				"-stub-addr", "127.0.0.1:0", "-catalog-addr", "127.0.0.1:0", "-state", ""}, args...),
				func(string) (string, bool) { return "", false }, &stdout, io.Discard)
		}()
		select {
		case err := <-errc:
			if want := fmt.Sprintf("unexpected argument %q", args[len(args)-1]); err == nil || !strings.Contains(err.Error(), want) || exitStatus(err) != 2 {
				t.Errorf("ask-serve %q: %v (exit status %d), want an error naming %s, and 2", args, err, exitStatus(err), want)
			}
		case <-time.After(20 * time.Second):
			sigs <- os.Interrupt
			sigs <- os.Interrupt
			<-errc
			t.Errorf("ask-serve %q started and served rather than refuse the argument", args)
		}
	}
}

// The usage asked for (make ask-serve ARGS=-h) is printed and is not an error, as for the
// other commands.
func TestAskServeHelpIsNoError(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var errb strings.Builder
		if err := run(nil, []string{arg}, func(string) (string, bool) { return "", false }, io.Discard, &errb); err != nil {
			t.Errorf("%s: %v, want no error", arg, err)
		}
		if !strings.Contains(errb.String(), "-admin-addr") {
			t.Errorf("%s: stderr %q, want the usage", arg, errb.String())
		}
	}
}

// A second ask-serve while one runs finds its addresses taken: it says so in words a newcomer
// can act on, naming the likely cause and the way out, not only the socket error.
func TestAskServeSaysWhenAnotherIsRunning(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	err = run(nil, []string{"-addr", "127.0.0.1:0", "-idp-addr", taken.Addr().String(), "-source-addr", "127.0.0.1:0",
		"-stub-addr", "127.0.0.1:0", "-state", t.TempDir()}, func(string) (string, bool) { return "", false }, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("ask-serve started on a taken address")
	}
	for _, want := range []string{taken.Addr().String(), "another ask-serve", "-idp-addr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// The first Ctrl-C leaves a running ask the service's grace (an hour here); a second ends it at
// once with error{shutdown} and done, and ask-serve exits.
func TestAskServeSecondCtrlCEndsRunningAsks(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "slow.yaml")
	if err := os.WriteFile(script, []byte(`rules:
  - name: slow
    pattern: '.*'
    steps:
      - tool: search_catalog
        args: {query: incident}
        delay: 1h
    final: "too late"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// If the test fails, its cleanup ends the ask at once (a second Ctrl-C), not after its hour.
	s := startServe(t, map[string]string{"ASK_STUB_SCRIPT": script, "DAS_ASK_SHUTDOWN_GRACE_S": "3600"}, nil)
	a := s.ask("How many sev1 incidents did we have in 2026-Q2?")
	stream := s.events(a.eventsURL, a.token)
	defer stream.Body.Close()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stream.Body)
		got <- string(b)
	}()

	s.sigs <- os.Interrupt
	for l := range s.lines {
		if strings.HasPrefix(l, "stopping") {
			break
		}
	}
	select {
	case events := <-got:
		t.Fatalf("the ask ended at the first Ctrl-C, within its grace:\n%s", events)
	default:
	}
	s.sigs <- os.Interrupt
	select {
	case events := <-got:
		if !strings.Contains(events, `"kind":"shutdown"`) || !strings.Contains(events, "event: done") {
			t.Errorf("the stream did not end with error{shutdown} and done:\n%s", events)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the ask did not end after the second Ctrl-C")
	}
	s.stop() // ask-serve, given both Ctrl-C, stops without error
}

// With -admin-addr the banner says where the metrics and probes are, and they answer there
// (docs/operations.md points the dev stack's users at it).
func TestAskServeSaysWhereItsAdminListenerIs(t *testing.T) {
	s := startServe(t, nil, nil, "-admin-addr", "127.0.0.1:0")
	metrics := ""
	re := regexp.MustCompile(`^\s+admin\s+(http://\S+/metrics)\s`)
	for _, l := range strings.Split(s.banner, "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			metrics = m[1]
		}
	}
	if metrics == "" {
		t.Fatal("ask-serve -admin-addr did not print the admin listener's URL")
	}
	for _, u := range []string{metrics, strings.TrimSuffix(metrics, "/metrics") + "/healthz"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", u, resp.StatusCode)
		}
	}
}

// TestAskServeNamesTheAgentsOwnSources: with DAS_SOURCES (README: "your MCP sources instead of
// the demo source") the banner names the sources the agent asks; it listed only the demo source,
// which still runs but is never asked, as if it answered.
func TestAskServeNamesTheAgentsOwnSources(t *testing.T) {
	const theirs = "warehouse=http://127.0.0.1:1/mcp"
	if got := banner(t, map[string]string{"DAS_SOURCES": theirs}); !strings.Contains(got, "agent's sources    "+theirs) {
		t.Errorf("with DAS_SOURCES=%s the banner says:\n%s\nwant the agent's sources named", theirs, got)
	}
	if got := banner(t, nil); strings.Contains(got, "agent's sources") {
		t.Errorf("with the demo source the banner says:\n%s\nwant no line of other sources", got)
	}
	// A source's password is not shown, as the model line's is not: the banner printed the
	// URL whole.
	got := banner(t, map[string]string{"DAS_SOURCES": "warehouse=http://u:hunter2@127.0.0.1:1/mcp"})
	if !strings.Contains(got, "agent's sources    warehouse=http://u:xxxxx@127.0.0.1:1/mcp") || strings.Contains(got, "hunter2") {
		t.Errorf("with a password in DAS_SOURCES the banner says:\n%s\nwant the source named without it", got)
	}
}

// TestAskServeNamesItsRealModel: with a real model the banner's model line says which, and
// where it is asked, in words; it printed the configuration's Go form ("agent.Config{llm=openai
// model=qwen2.5 base_url=… sources=1 max_model_calls=12}"). A password in the URL is not shown.
func TestAskServeNamesItsRealModel(t *testing.T) {
	got := banner(t, map[string]string{"ASK_LLM": "openai", "ASK_LLM_MODEL": "qwen2.5", "ASK_LLM_BASE_URL": "http://u:hunter2@127.0.0.1:1/v1"})
	if !strings.Contains(got, "  model              openai qwen2.5 at http://u:xxxxx@127.0.0.1:1/v1\n") || strings.Contains(got, "hunter2") {
		t.Errorf("with ASK_LLM=openai the banner says:\n%s\nwant the line: model  openai qwen2.5 at http://u:xxxxx@127.0.0.1:1/v1", got)
	}
	got = banner(t, map[string]string{"ASK_LLM": "anthropic", "ANTHROPIC_API_KEY": "sk-ant-hunter2"})
	if !strings.Contains(got, "  model              anthropic claude-sonnet-4-5 at the provider's API\n") || strings.Contains(got, "hunter2") {
		t.Errorf("with ASK_LLM=anthropic the banner says:\n%s", got)
	}
}

// TestAskServeSaysItIgnoresTheIssuerSettings: the dev stack validates bearers against its own
// IdP, so DAS_JWKS_URL, DAS_ISSUER, DAS_AUDIENCE and DAS_REQUIRED_SCOPE, which askd reads, are
// not applied: it says so, naming them (never their values); it said nothing, as if they were.
func TestAskServeSaysItIgnoresTheIssuerSettings(t *testing.T) {
	env := map[string]string{"DAS_ISSUER": "https://login.example/hunter2", "DAS_AUDIENCE": "api"}
	var logs logtest.Buffer
	startServe(t, env, &logs).stop()
	got := logs.String()
	if !strings.Contains(got, "ignoring the bearer settings") || !strings.Contains(got, "variables=DAS_ISSUER,DAS_AUDIENCE") {
		t.Errorf("with DAS_ISSUER and DAS_AUDIENCE set, ask-serve logged:\n%s\nwant a warning naming both", got)
	}
	if strings.Contains(got, "hunter2") || strings.Contains(got, "login.example") {
		t.Errorf("the warning holds a value:\n%s", got)
	}
}

// TestAskServeLogsAsTheLogSettingsSay: DAS_LOG_FORMAT and DAS_LOG_LEVEL, which askd reads,
// apply to ask-serve too when set (they were validated and then ignored, unsaid): JSON at
// warn here, so the stack's info lines are left out and its warning is a JSON record; -v wins
// over the level. Unset, the logs are text at info.
func TestAskServeLogsAsTheLogSettingsSay(t *testing.T) {
	serve := func(env map[string]string, args ...string) string {
		t.Helper()
		var logs logtest.Buffer
		startServe(t, env, &logs, args...).stop()
		return logs.String()
	}
	// DAS_AUDIENCE makes a warning ("ignoring the bearer settings").
	got := serve(map[string]string{"DAS_LOG_FORMAT": "json", "DAS_LOG_LEVEL": "warn", "DAS_AUDIENCE": "api"})
	var warned bool
	for line := range strings.Lines(got) {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("with DAS_LOG_FORMAT=json, a line is not JSON: %q", line)
		}
		if rec.Level != "WARN" && rec.Level != "ERROR" {
			t.Errorf("with DAS_LOG_LEVEL=warn, a line at %s: %q", rec.Level, line)
		}
		warned = warned || strings.HasPrefix(rec.Msg, "ignoring the bearer settings")
	}
	if !warned {
		t.Errorf("with DAS_LOG_FORMAT=json and DAS_LOG_LEVEL=warn, no warning logged:\n%s", got)
	}
	// The start logs no debug line, but its info lines are below error: -v lets them through.
	if got := serve(map[string]string{"DAS_LOG_LEVEL": "error"}, "-v"); !strings.Contains(got, "level=INFO") {
		t.Errorf("-v under DAS_LOG_LEVEL=error left out the info lines:\n%s", got)
	}
	if got := serve(map[string]string{"DAS_LOG_LEVEL": "error"}); got != "" {
		t.Errorf("under DAS_LOG_LEVEL=error the start logged:\n%s", got)
	}
	if got := serve(nil); !strings.Contains(got, "level=INFO") || strings.HasPrefix(got, "{") {
		t.Errorf("with no log settings, ask-serve logged:\n%s\nwant text at info", got)
	}
}

// TestAskServeSaysHowToReachItsMovedAddresses: on addresses other than the defaults (-addr and
// -idp-addr, as the message of a taken port suggests), the commands the banner gives next reach
// this stack; they said "make ask Q=…" and "make token", which went to 127.0.0.1:8080 and :8090.
func TestAskServeSaysHowToReachItsMovedAddresses(t *testing.T) {
	s := startServe(t, nil, nil)
	s.stop()
	got := s.banner
	for _, want := range []string{
		"ASK_URL=" + s.askURL + " ASK_IDP=" + s.idpURL + " make ask Q=",
		"ASK_URL=" + s.askURL + " ASK_IDP=" + s.idpURL + " make ask AS=bob Q=",
		`make token OID=alice ARGS="--idp ` + s.idpURL + `"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the banner says:\n%s\nwant %q", got, want)
		}
	}
}

// freeAddr is a loopback address no listener holds as it returns, and none freeAddr returned
// before (two picks in a row may otherwise be one port: the service's two listeners on it).
func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := loopback.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAskServeReadsItsAddressesFromTheEnvironment: DAS_ASK_ADDR and DAS_ASK_ADMIN_ADDR are the
// defaults of -addr and -admin-addr, as the package comment says the service's DAS_ASK_*
// settings apply; they were ignored, the service listening on 127.0.0.1:8080 whatever
// DAS_ASK_ADDR said. A flag still wins, and without either the admin listener is off.
func TestAskServeReadsItsAddressesFromTheEnvironment(t *testing.T) {
	ask, admin := freeAddr(t), freeAddr(t)
	got := banner(t, map[string]string{"DAS_ASK_ADDR": ask, "DAS_ASK_ADMIN_ADDR": admin})
	for _, want := range []string{"ask service        http://" + ask + "/ask ", "admin              http://" + admin + "/metrics "} {
		if !strings.Contains(got, want) {
			t.Errorf("with DAS_ASK_ADDR=%s DAS_ASK_ADMIN_ADDR=%s the banner says:\n%s\nwant %q", ask, admin, got, want)
		}
	}
	moved := freeAddr(t)
	got = banner(t, map[string]string{"DAS_ASK_ADDR": "127.0.0.1:1", "DAS_ASK_ADMIN_ADDR": "off"}, "-addr", moved)
	if !strings.Contains(got, "ask service        http://"+moved+"/ask ") || !strings.Contains(got, "admin              off") {
		t.Errorf("with -addr %s and DAS_ASK_ADMIN_ADDR=off the banner says:\n%s\nwant -addr's address and no admin listener", moved, got)
	}
	if got := banner(t, nil); !strings.Contains(got, "admin              off") {
		t.Errorf("with no DAS_ASK_ADMIN_ADDR the banner says:\n%s\nwant no admin listener", got)
	}
}

// TestPhaseFlagIsASK_PHASE: -phase is ASK_PHASE and wins over it, so the settings that depend on
// the phase follow the flag. Under -phase 2 with ASK_PHASE unset, ASK_DIVERGENCE_TURNS=0 was
// ignored (the withheld branch ran: divergence on the wrong-winner question) and
// ASK_DIVERGENCE_TURNS=3 was refused at start ("divergence needs ASK_PHASE=2"); -phase 1 under
// ASK_PHASE=2 ran phase 2.
func TestPhaseFlagIsASK_PHASE(t *testing.T) {
	const on, off = "phase 2            a branch per source, and divergence", "phase 2            a branch per source, no divergence (ASK_DIVERGENCE_TURNS=0)"
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string // "" for no phase-2 line
	}{
		{"-phase 2", nil, []string{"-phase", "2"}, on},
		{"-phase 2, ASK_DIVERGENCE_TURNS=0", map[string]string{"ASK_DIVERGENCE_TURNS": "0"}, []string{"-phase", "2"}, off},
		{"-phase 2, ASK_DIVERGENCE_TURNS=3", map[string]string{"ASK_DIVERGENCE_TURNS": "3"}, []string{"-phase", "2"}, on},
		{"ASK_PHASE=2, ASK_DIVERGENCE_TURNS=0", map[string]string{"ASK_PHASE": "2", "ASK_DIVERGENCE_TURNS": "0"}, nil, off},
		{"-phase 1, ASK_PHASE=2", map[string]string{"ASK_PHASE": "2"}, []string{"-phase", "1"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := banner(t, c.env, append(c.args, "-ui=false")...)
			switch {
			case c.want == "" && strings.Contains(got, "phase 2 "):
				t.Errorf("banner:\n%s\nwant phase 1", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("banner:\n%s\nwant %q", got, c.want)
			}
		})
	}
}

// TestReadmeNamesEveryFlag: every flag ask-serve takes is named in README.md, so a newcomer
// whose port is taken, or who wants the two-source demo in phase 1, finds it there and not only
// in the usage.
func TestReadmeNamesEveryFlag(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var usage strings.Builder
	if err := run(nil, []string{"-h"}, func(string) (string, bool) { return "", false }, io.Discard, &usage); err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`(?m)^  (-[a-z-]+)`).FindAllStringSubmatch(usage.String(), -1)
	if len(flags) < 10 {
		t.Fatalf("found %d flags in the usage:\n%s", len(flags), usage.String())
	}
	for _, f := range flags {
		if !regexp.MustCompile("`" + f[1] + "[ =`]").Match(readme) {
			t.Errorf("README.md does not name ask-serve's %s", f[1])
		}
	}
}

// TestAskServeRefusesABadAddressFlagBeforeStarting: a listen address given by flag is checked as
// DAS_ASK_ADDR is, before anything starts: exit status 2, the flag named. -addr bad started the
// IdP, the demo source and the llm-stub, wrote the IdP's keys and the audit log under -state, and
// only then failed at listen with status 1 ("ask service: listen tcp: address bad: …"); -admin-addr
// bad was reported as DAS_ASK_ADMIN_ADDR, which was not set.
func TestAskServeRefusesABadAddressFlagBeforeStarting(t *testing.T) {
	free := []string{"-addr", "127.0.0.1:0", "-idp-addr", "127.0.0.1:0", "-source-addr", "127.0.0.1:0",
		"-stub-addr", "127.0.0.1:0", "-catalog-addr", "127.0.0.1:0"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-addr", "bad"}, `-addr "bad": want host:port`},
		{[]string{"-addr", "127.0.0.1:99999"}, `-addr "127.0.0.1:99999": want host:port`},
		{[]string{"-idp-addr", "bad"}, `-idp-addr "bad": want host:port`},
		{[]string{"-source-addr", "127.0.0.1"}, `-source-addr "127.0.0.1": want host:port`},
		{[]string{"-stub-addr", ":http-nope"}, `-stub-addr ":http-nope": want host:port`},
		{[]string{"-catalog-addr", "x:-1"}, `-catalog-addr "x:-1": want host:port`},
		{[]string{"-admin-addr", "bad"}, `-admin-addr "bad": want host:port, or "off"`},
		{[]string{"-addr", "127.0.0.1:18080", "-admin-addr", "127.0.0.1:18080"}, `-admin-addr "127.0.0.1:18080": the same address as -addr`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			args := append(append(append([]string{}, free...), c.args...), "-state", state)
			sigs := make(chan os.Signal, 1)
			sigs <- os.Interrupt // a stack that does start stops at once
			err := run(sigs, args, func(string) (string, bool) { return "", false }, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			if got := exitStatus(err); got != 2 {
				t.Errorf("exit status %d, want 2", got)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("-state %s was written before the refusal (stat: %v)", state, err)
			}
		})
	}
}

// -admin-addr off is none, as DAS_ASK_ADMIN_ADDR=off is: it was taken for an address and failed at
// listen, after the rest of the stack had started.
func TestAskServeAdminAddrOffIsNone(t *testing.T) {
	if b := banner(t, nil, "-admin-addr", "off"); !regexp.MustCompile(`(?m)^\s+admin\s+off `).MatchString(b) {
		t.Errorf("the banner does not say the admin listener is off:\n%s", b)
	}
}

// An ASK_STUB_SCRIPT that cannot be read is named with the error: "llmstub: open …: no such file
// or directory" named no setting.
func TestAskServeNamesAnUnreadableStubScript(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	lookup := func(k string) (string, bool) { return missing, k == "ASK_STUB_SCRIPT" }
	err := run(nil, []string{"-addr", "127.0.0.1:0", "-state", t.TempDir()}, lookup, io.Discard, io.Discard)
	if want := fmt.Sprintf("ASK_STUB_SCRIPT %q: ", missing); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want one saying %q", err, want)
	}
}

// A -state folder that cannot be made is named: "identity provider: idp: RS256 key: mkdir …: not
// a directory" named no flag.
func TestAskServeNamesAStateItCannotWrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(file, "state")
	err := run(nil, []string{"-addr", "127.0.0.1:0", "-idp-addr", "127.0.0.1:0", "-source-addr", "127.0.0.1:0",
		"-stub-addr", "127.0.0.1:0", "-catalog-addr", "127.0.0.1:0", "-state", state}, func(string) (string, bool) { return "", false }, io.Discard, io.Discard)
	if want := fmt.Sprintf("-state %q: ", state); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want one saying %q", err, want)
	}
}
