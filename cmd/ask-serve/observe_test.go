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

	"github.com/das-ask/ask/internal/logtest"
)

// Without -admin-addr, ask-serve's service is observed as askd's is: a `request` line per API
// request, and an ask ends with one `ask finished` line naming its ticket (README's promise),
// holding neither the question nor the token. Before, both came only with -admin-addr.
func TestAskServeLogsEachAskAsAskdDoes(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	out, w := io.Pipe()
	var logs logtest.Buffer
	errc := make(chan error, 1)
	go func() {
		errc <- run(sigs, []string{"-addr", "127.0.0.1:0", "-idp-addr", "127.0.0.1:0", "-source-addr", "127.0.0.1:0",
			"-stub-addr", "127.0.0.1:0", "-state", t.TempDir()}, func(string) (string, bool) { return "", false }, w, &logs)
		w.Close()
	}()
	askURL, idpURL := "", ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := regexp.MustCompile(`ask service\s+(http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			askURL = m[1]
		}
		if m := regexp.MustCompile(`identity provider\s+(http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			idpURL = m[1]
		}
		if sc.Text() == "Ctrl-C stops everything." {
			break
		}
	}
	if askURL == "" || idpURL == "" {
		t.Fatalf("ask-serve did not print its URLs (err: %v)", <-errc)
	}
	go io.Copy(io.Discard, out)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sigs <- os.Interrupt
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("ask-serve stopped with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("ask-serve did not stop after Ctrl-C")
		}
	}
	defer stop()

	do := func(method, u, bearer, ct, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	resp := do(http.MethodPost, idpURL+"/token", "", "application/x-www-form-urlencoded", url.Values{"oid": {"alice"}}.Encode())
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if tok.AccessToken == "" {
		t.Fatalf("no token from the IdP: %d", resp.StatusCode)
	}
	var conv struct {
		ID string `json:"id"`
	}
	resp = do(http.MethodPost, askURL+"/v1/conversations", tok.AccessToken, "application/json", "{}")
	_ = json.NewDecoder(resp.Body).Decode(&conv)
	resp.Body.Close()
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("createConversation: %d without X-Request-Id", resp.StatusCode)
	}
	const question = "How many sev1 incidents did we have in 2026-Q2?"
	var ticket struct {
		Ticket    string `json:"ticket"`
		EventsURL string `json:"events_url"`
	}
	resp = do(http.MethodPost, askURL+"/v1/conversations/"+conv.ID+"/asks", tok.AccessToken, "application/json", `{"question":"`+question+`"}`)
	_ = json.NewDecoder(resp.Body).Decode(&ticket)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || ticket.Ticket == "" {
		t.Fatalf("ask: %d %+v", resp.StatusCode, ticket)
	}
	u, _ := url.Parse(askURL)
	stream := do(http.MethodGet, u.Scheme+"://"+u.Host+ticket.EventsURL, tok.AccessToken, "", "")
	events, _ := io.ReadAll(stream.Body) // to done, which closes the stream
	stream.Body.Close()
	if !strings.Contains(string(events), "event: done") {
		t.Fatalf("the stream ended without done:\n%s", events)
	}
	stop() // every line of the ask is written by then

	var finished []string
	requests := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="ask finished"`) {
			finished = append(finished, l)
		}
		if strings.Contains(l, "msg=request ") && strings.Contains(l, "request_id=") {
			requests++
		}
	}
	if requests < 3 { // createConversation, createAsk, streamEvents (the token is the IdP's)
		t.Errorf("%d request lines, want one per API request, 3 at least", requests)
	}
	if len(finished) != 1 || !strings.Contains(finished[0], "ticket="+ticket.Ticket) || !strings.Contains(finished[0], "request_id=") {
		t.Errorf("ask finished lines %q, want one naming ticket %s and its request id", finished, ticket.Ticket)
	}
	logs.AssertAbsent(t, question, tok.AccessToken)
}
