package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
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
