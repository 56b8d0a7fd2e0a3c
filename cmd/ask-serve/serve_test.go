package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/config"
)

// served is an ask-serve that startServe started in this process, once it has printed its banner.
type served struct {
	banner         string        // what it printed, up to and with "Ctrl-C stops everything."
	askURL, idpURL string        // the ask service's and the identity provider's, from the banner
	lines          <-chan string // what it prints after the banner, a line at a time; closed once run has returned
	sigs           chan os.Signal

	t       *testing.T
	errc    chan error
	stopped bool
}

var (
	askURLLine = regexp.MustCompile(`ask service\s+(http://\S+)`)
	idpURLLine = regexp.MustCompile(`identity provider\s+(http://\S+)`)
)

// startServe runs ask-serve (run) with the environment env (nil: none), its logs written to logs
// (nil: discarded), and args after the arguments that put every piece on a free port of
// 127.0.0.1 and its state in a temporary folder; -addr among them unless env sets DAS_ASK_ADDR,
// whose default it is. It returns once the banner is printed, and fails the test if run returns
// before, or if the banner names no ask service or identity provider. stop stops it; so does the
// test's end if the test has not, with a second Ctrl-C at once if the test failed, so that no
// running ask holds it up.
func startServe(t *testing.T, env map[string]string, logs io.Writer, args ...string) *served {
	t.Helper()
	// Every listener on an address of freeAddr's, none on 127.0.0.1:0: the kernel's pick for
	// one of the dev pieces, bound before the ask listener, could be the port freeAddr picked
	// (and closed) for DAS_ASK_ADDR or DAS_ASK_ADMIN_ADDR, which then failed to bind.
	free := []string{"-idp-addr", freeAddr(t), "-source-addr", freeAddr(t), "-stub-addr", freeAddr(t),
		"-catalog-addr", freeAddr(t), "-state", t.TempDir()}
	if _, ok := env["DAS_ASK_ADDR"]; !ok {
		free = append([]string{"-addr", freeAddr(t)}, free...)
	}
	if logs == nil {
		logs = io.Discard
	}
	lines := make(chan string, 64)
	s := &served{lines: lines, sigs: make(chan os.Signal, 2), t: t, errc: make(chan error, 1)}
	out, w := io.Pipe()
	go func() {
		err := run(s.sigs, append(free, args...), config.MapEnv(env), w, logs)
		w.Close() // before the error is sent: lines is closed once it is read
		s.errc <- err
	}()
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out) // a line too long for the scanner blocks no write
	}()
	t.Cleanup(func() {
		if t.Failed() && !s.stopped {
			select {
			case s.sigs <- os.Interrupt:
			default:
			}
		}
		s.stop()
	})
	var b strings.Builder
	for l := range lines {
		b.WriteString(l + "\n")
		if m := askURLLine.FindStringSubmatch(l); m != nil {
			s.askURL = m[1]
		}
		if m := idpURLLine.FindStringSubmatch(l); m != nil {
			s.idpURL = m[1]
		}
		if l == "Ctrl-C stops everything." {
			s.banner = b.String()
			if s.askURL == "" || s.idpURL == "" {
				t.Fatalf("ask-serve did not print its URLs:\n%s", s.banner)
			}
			return s
		}
	}
	s.stopped = true
	t.Fatalf("ask-serve ended before its banner did (err: %v):\n%s", <-s.errc, b.String())
	return nil
}

// stop sends ask-serve a Ctrl-C and waits for run to return, failing the test if it returns an
// error or has not returned 20 s later. Once: later calls do nothing.
func (s *served) stop() {
	s.t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	select {
	case s.sigs <- os.Interrupt:
	default: // two are waiting already
	}
	drained := make(chan struct{})
	go func() { // so that ask-serve's writes never block
		defer close(drained)
		for range s.lines {
		}
	}()
	select {
	case err := <-s.errc:
		<-drained
		if err != nil {
			s.t.Errorf("ask-serve stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		s.t.Fatal("ask-serve did not stop after Ctrl-C")
	}
}

// banner starts ask-serve with the environment env and the arguments args (see startServe),
// stops it, and returns what it printed up to "Ctrl-C stops everything.".
func banner(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	s := startServe(t, env, nil, args...)
	s.stop()
	return s.banner
}

// post posts body, of the content type ct, to u with the bearer token (none if ""), decodes
// the JSON answer into v if v is not nil, and returns the response, its body closed.
func post(t *testing.T, u, bearer, ct, body string, v any) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		_ = json.NewDecoder(resp.Body).Decode(v)
	}
	return resp
}

// events opens the event stream at eventsURL, a path on the ask service's host, with the
// bearer token.
func (s *served) events(eventsURL, bearer string) *http.Response {
	s.t.Helper()
	u, err := url.Parse(s.askURL)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, u.Scheme+"://"+u.Host+eventsURL, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// asked is an ask that served.ask made.
type asked struct {
	token        string         // alice's, from the identity provider
	conversation *http.Response // createConversation's, its body closed
	ticket       string
	eventsURL    string
}

// ask gets alice a token from the identity provider, makes her a conversation and asks question
// in it, failing the test if there is no token or the ask is not accepted with a ticket.
func (s *served) ask(question string) asked {
	s.t.Helper()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	resp := post(s.t, s.idpURL+"/token", "", "application/x-www-form-urlencoded", url.Values{"oid": {"alice"}}.Encode(), &tok)
	if tok.AccessToken == "" {
		s.t.Fatalf("no token from the IdP: %d", resp.StatusCode)
	}
	var conv struct {
		ID string `json:"id"`
	}
	a := asked{token: tok.AccessToken}
	a.conversation = post(s.t, s.askURL+"/v1/conversations", a.token, "application/json", "{}", &conv)
	q, err := json.Marshal(map[string]string{"question": question})
	if err != nil {
		s.t.Fatal(err)
	}
	var ticket struct {
		Ticket    string `json:"ticket"`
		EventsURL string `json:"events_url"`
	}
	resp = post(s.t, s.askURL+"/v1/conversations/"+conv.ID+"/asks", a.token, "application/json", string(q), &ticket)
	if resp.StatusCode != http.StatusAccepted || ticket.Ticket == "" {
		s.t.Fatalf("ask: %d %+v", resp.StatusCode, ticket)
	}
	a.ticket, a.eventsURL = ticket.Ticket, ticket.EventsURL
	return a
}
