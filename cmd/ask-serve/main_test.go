package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ask-serve starts the whole system, says where it is, serves the contract, and stops cleanly
// when its context ends (what Ctrl-C does).
func TestAskServeStartsServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, w := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-addr", "127.0.0.1:0", "-idp-addr", "127.0.0.1:0", "-source-addr", "127.0.0.1:0",
			"-stub-addr", "127.0.0.1:0", "-state", t.TempDir()}, func(string) (string, bool) { return "", false }, w, io.Discard)
		w.Close()
	}()
	askURL := ""
	sc := bufio.NewScanner(out)
	re := regexp.MustCompile(`ask service\s+(http://\S+)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			askURL = m[1]
		}
		if sc.Text() == "Ctrl-C stops everything." {
			break
		}
	}
	if askURL == "" {
		t.Fatalf("ask-serve did not print the service's URL (err: %v)", <-errc)
	}
	go io.Copy(io.Discard, out)
	resp, err := http.Get(askURL + "/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET the contract: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("ask-serve stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ask-serve did not stop after its context ended")
	}
	if _, err := http.Get(askURL + "/v1/openapi.yaml"); err == nil {
		t.Error("the service still answers after stop")
	}
}

func TestAskServeRejectsBadSettings(t *testing.T) {
	lookup := func(k string) (string, bool) { return "soon", k == "DAS_ASK_TTL_S" }
	err := run(t.Context(), []string{"-addr", "127.0.0.1:0"}, lookup, io.Discard, io.Discard)
	if err == nil || !regexp.MustCompile(`DAS_ASK_TTL_S`).MatchString(err.Error()) {
		t.Fatalf("err = %v, want one naming DAS_ASK_TTL_S", err)
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
	err = run(t.Context(), []string{"-addr", "127.0.0.1:0", "-idp-addr", taken.Addr().String(), "-source-addr", "127.0.0.1:0",
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
