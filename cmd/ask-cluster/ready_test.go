package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/das-ask/ask/demo/llmstub"
)

// TestLocalURL: a piece told to listen on an unspecified host is asked on 127.0.0.1, so that
// the llm-stub's request log, served to loopback callers only (peer and Host), answers.
func TestLocalURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8092":   "http://127.0.0.1:8092",
		":8092":          "http://127.0.0.1:8092",
		"[::]:8092":      "http://127.0.0.1:8092",
		"127.0.0.1:8092": "http://127.0.0.1:8092",
		"10.1.2.3:8092":  "http://10.1.2.3:8092",
	} {
		if got := localURL(addr); got != want {
			t.Errorf("localURL(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestStubReady: the llm-stub is ready once it answers for its request log, on loopback or off
// it (its refusal to show the log to a caller off loopback is its answer too); another server
// on its port is not it.
func TestStubReady(t *testing.T) {
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	local := httptest.NewServer(stub.Handler())
	defer local.Close()
	if err := stubReady(local.URL)(); err != nil {
		t.Errorf("the llm-stub on loopback: %v, want ready", err)
	}
	// The stub as a caller on the network meets it: the peer's address is not loopback.
	off := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = "10.1.2.3:40000"
		stub.Handler().ServeHTTP(w, r)
	}))
	defer off.Close()
	if err := stubReady(off.URL)(); err != nil {
		t.Errorf("the llm-stub refusing a caller off loopback: %v, want ready", err)
	}
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if err := stubReady(other.URL)(); err == nil {
		t.Error("another server on the stub's port taken for the stub")
	}
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer forbidden.Close()
	if err := stubReady(forbidden.URL)(); err == nil {
		t.Error("another server's 403 taken for the stub's")
	}
}
